"""Dynamic NTK in `hf` numerics against torch itself (issue: posenc's float32 base departed).

transformers' forward pass (dynamic_rope_update -> _compute_dynamic_ntk_parameters) computes,
with seq_len = max(position_ids) + 1 as an int64 0-dim tensor above max_position_embeddings:
    base' = rope_theta * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    inv_freq = 1.0 / (base' ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
This script runs those formulas in torch (written here from the formulas, not copied code) over a
grid of bases, factors, contexts, head dims and lengths, and runs `posenc inspect --json --numerics
hf --seq-len N` on a config.json with the same values. The base and every inv_freq entry must be
bit-identical: posenc's hf pow is torch's own (Sleef on the 16-float blocks, libm powf on the
tail; docs/numerics.md).

usage: dynamic_ntk_base_test.py POSENC
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch


def torch_dynamic(theta, factor, max_pos, dim, seq):
    seq_len = torch.tensor(seq, dtype=torch.int64)
    seq_len = torch.maximum(seq_len, torch.tensor(max_pos, dtype=seq_len.dtype))
    base = theta * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    exps = torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim
    inv = 1.0 / (base ** exps)
    return base.item(), inv.numpy().astype(np.float32)


def ulps(a, b):
    ia = np.frombuffer(np.float32(a).tobytes(), dtype=np.int32)[0]
    ib = np.frombuffer(np.float32(b).tobytes(), dtype=np.int32)[0]
    return abs(int(ia) - int(ib))


def main():
    posenc = sys.argv[1]
    failures = []
    cases = 0
    entries = 0
    off_by = {1: 0, 2: 0}
    with tempfile.TemporaryDirectory() as tmp:
        for theta in (10000.0, 500000.0, 1000000.0, 1e7):
            for factor in (1.5, 2.0, 4.0, 8.0):
                for max_pos in (2048, 4096, 32768):
                    for dim in (64, 128):
                        for mult in (1.0001, 1.37, 2.0, 5.5):
                            seq = int(max_pos * mult)
                            cfg = {
                                "model_type": "llama",
                                "hidden_size": dim * 8,
                                "num_attention_heads": 8,
                                "head_dim": dim,
                                "max_position_embeddings": max_pos,
                                "rope_theta": theta,
                                "rope_scaling": {"rope_type": "dynamic", "factor": factor},
                            }
                            path = os.path.join(tmp, "config.json")
                            with open(path, "w") as f:
                                json.dump(cfg, f)
                            out = subprocess.run(
                                [posenc, "inspect", path, "--json", "--numerics", "hf", "--seq-len", str(seq)],
                                capture_output=True, text=True, check=True)
                            got = json.loads(out.stdout)
                            base, inv = torch_dynamic(theta, factor, max_pos, dim, seq)
                            where = f"theta {theta} factor {factor} max_pos {max_pos} dim {dim} seq {seq}"
                            cases += 1
                            if got["base_in_effect"] != base:
                                failures.append(f"{where}: base {got['base_in_effect']!r}, torch {base!r}")
                            for i, (p, t) in enumerate(zip(got["inv_freq"], inv)):
                                entries += 1
                                d = ulps(p, t)
                                if d in off_by:
                                    off_by[d] += 1
                                if d > 0:
                                    failures.append(f"{where}: inv_freq[{i}] {p!r}, torch {float(t)!r} ({d} ulps)")
    print(f"{cases} cases, {entries} inv_freq entries: base bit-identical in "
          f"{cases - sum(': base ' in f for f in failures)}; {off_by[1]} entries 1 ulp and {off_by[2]} 2 ulps "
          "from torch (its float32 pow)")
    for f in failures[:20]:
        print("FAIL", f)
    if failures:
        print(f"{len(failures)} failures")
        sys.exit(1)


if __name__ == "__main__":
    main()
