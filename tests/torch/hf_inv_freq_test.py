"""`hf` numerics bit for bit against torch itself: inv_freq, attention factor, cos and sin.

For every config in ../shared/testdata/hf-configs and a synthetic grid (bases, head dims, the
methods default, linear, dynamic at several lengths, yarn, llama3, longrope), this script computes
transformers' rotary frequencies with torch, written here from the formulas of transformers'
modeling_rope_utils.py (not copied code), and compares them with
`posenc inspect CONFIG --json --numerics hf [--seq-len N]`: every inv_freq entry and the attention
factor must be bit-identical. Then cos and sin at positions up to 2^20: torch as
LlamaRotaryEmbedding.forward does (inv_freq @ positions, cat(freqs, freqs), emb.cos() *
attention_scaling), posenc through `posenc apply --numerics hf` on queries whose every rotated
pair is (1, 0), so that the rotated pair is exactly (cos, sin).

Both sides run in this process's environment, so ATEN_CPU_CAPABILITY (if set) reaches torch and
posenc alike.

usage: hf_inv_freq_test.py POSENC SHARED_DIR
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

# torch.cos over a tensor depends on its thread count (docs/numerics.md): posenc matches one thread.
torch.set_num_threads(1)


# ---- transformers' formulas, in torch -------------------------------------------------------

def exponents(dim):
    return torch.arange(0, dim, 2, dtype=torch.int64).float() / dim


def default_inv(base, dim):
    return 1.0 / (base ** exponents(dim))


def get_mscale(scale, mscale=1.0):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def yarn(base, dim, factor, orig, beta_fast=32.0, beta_slow=1.0, truncate=True,
         mscale=None, mscale_all_dim=None, attention_factor=None):
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)

    def correction_dim(rotations):
        return (dim * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** exponents(dim)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (factor * pos_freqs)
    e = 1 - ramp
    return interpolation * (1 - e) + extrapolation * e, attention_factor


def llama3(base, dim, factor, orig, low_freq_factor, high_freq_factor):
    inv = default_inv(base, dim)
    low_wavelen = orig / low_freq_factor
    high_wavelen = orig / high_freq_factor
    wavelen = 2 * math.pi / inv
    llama = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (orig / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * llama / factor + smooth * llama
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, llama)


def longrope(base, dim, factor, orig, short, long, seq_len, attention_factor=None):
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
    ext = torch.tensor(long if seq_len and seq_len > orig else short, dtype=torch.float32)
    return 1.0 / (ext * base ** exponents(dim)), attention_factor


def dynamic(base, dim, factor, max_pos, seq_len):
    if seq_len <= max_pos:
        return default_inv(base, dim)
    s = torch.tensor(seq_len, dtype=torch.int64)
    b = base * ((factor * s / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    return 1.0 / (b ** exponents(dim))


# ---- a config's parameters, as transformers reads them ------------------------------------

def rope_of(cfg, seq_len):
    """(inv_freq float32 tensor, attention factor, rotary dim) for config dict `cfg`."""
    base = cfg.get("rope_theta", cfg.get("rotary_emb_base", 10000.0))
    head_dim = cfg.get("qk_rope_head_dim") or cfg.get("head_dim") or (
        cfg["hidden_size"] // cfg["num_attention_heads"])
    prf = cfg.get("partial_rotary_factor", cfg.get("rotary_pct", 1.0))
    dim = int(head_dim * prf)
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    max_pos = cfg["max_position_embeddings"]
    if kind == "default":
        return default_inv(base, dim), 1.0, dim
    if kind == "linear":
        inv = default_inv(base, dim)
        inv /= rs["factor"]
        return inv, 1.0, dim
    if kind == "dynamic":
        return dynamic(base, dim, rs["factor"], max_pos, seq_len), 1.0, dim
    if kind == "yarn":
        orig = rs.get("original_max_position_embeddings") or max_pos
        inv, af = yarn(base, dim, rs["factor"], orig, rs.get("beta_fast", 32.0),
                       rs.get("beta_slow", 1.0), rs.get("truncate", True), rs.get("mscale"),
                       rs.get("mscale_all_dim"), rs.get("attention_factor"))
        return inv, af, dim
    if kind == "llama3":
        return (llama3(base, dim, rs["factor"], rs["original_max_position_embeddings"],
                       rs["low_freq_factor"], rs["high_freq_factor"]), 1.0, dim)
    if kind == "longrope":
        if "original_max_position_embeddings" in cfg:
            orig = cfg["original_max_position_embeddings"]
            factor = max_pos / orig
        else:
            orig, factor = max_pos, rs.get("factor", 1.0)
        inv, af = longrope(base, dim, factor, orig, rs["short_factor"], rs["long_factor"], seq_len,
                           rs.get("attention_factor"))
        return inv, af, dim
    raise ValueError(f"rope type {kind} is not in this test")


# ---- the synthetic grid ----------------------------------------------------------------------

def synthetic():
    """(name, config dict, seq_len) cases."""
    rng = np.random.default_rng(11)
    out = []
    for base in (10000.0, 500000.0, 1000000.0, 10000.0 * 4.0 ** (128 / 126), 160000.0):
        for dim in (16, 24, 32, 40, 64, 80, 96, 128, 256):
            def cfg(scaling, max_pos=4096, **extra):
                c = {"model_type": "llama", "hidden_size": dim * 8, "num_attention_heads": 8,
                     "head_dim": dim, "max_position_embeddings": max_pos, "rope_theta": base}
                if scaling:
                    c["rope_scaling"] = scaling
                c.update(extra)
                return c
            tag = f"b {base} D {dim}"
            out.append((f"{tag} default", cfg(None), 0))
            for f in (2.0, 4.0, 7.5):
                out.append((f"{tag} linear {f}", cfg({"rope_type": "linear", "factor": f}), 0))
            for f in (2.0, 8.0):
                for seq in (4096, 5000, 22528):
                    out.append((f"{tag} dynamic {f} seq {seq}",
                                cfg({"rope_type": "dynamic", "factor": f}), seq))
            for f, truncate in ((4.0, True), (32.0, False), (40.0, True)):
                out.append((f"{tag} yarn {f} truncate {truncate}",
                            cfg({"rope_type": "yarn", "factor": f, "truncate": truncate,
                                 "original_max_position_embeddings": 4096}, max_pos=int(4096 * f)), 0))
            out.append((f"{tag} yarn mscale", cfg({"rope_type": "yarn", "factor": 40.0, "mscale": 0.707,
                                                   "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1,
                                                   "original_max_position_embeddings": 4096},
                                                  max_pos=163840), 0))
            out.append((f"{tag} llama3", cfg({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                              "high_freq_factor": 4.0,
                                              "original_max_position_embeddings": 8192},
                                             max_pos=131072), 0))
            short = [float(x) for x in np.round(1.0 + rng.random(dim // 2) * 0.2, 6)]
            long = [float(x) for x in np.round(1.0 + rng.random(dim // 2) * 40.0, 6)]
            for seq in (0, 4096, 4097, 100000):
                out.append((f"{tag} longrope seq {seq}",
                            cfg({"rope_type": "longrope", "short_factor": short, "long_factor": long},
                                max_pos=131072, original_max_position_embeddings=4096), seq))
    return out


# ---- posenc ---------------------------------------------------------------------------------

def posenc_inspect(posenc, path, seq_len):
    cmd = [posenc, "inspect", path, "--json", "--numerics", "hf"]
    if seq_len:
        cmd += ["--seq-len", str(seq_len)]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def posenc_cos_sin(posenc, path, got, positions, seq_len, tmp):
    """posenc's (cos, sin) [tokens, pairs] float32, from rotating (1, 0) pairs."""
    head_dim, n, offset = got["head_dim"], len(got["inv_freq"]), got["rotary_offset"]
    q = np.zeros((len(positions), 1, head_dim), dtype=np.float32)
    interleaved = got["layout"] == "interleaved"
    a = offset + (2 * np.arange(n) if interleaved else np.arange(n))
    b = a + 1 if interleaved else a + n
    q[:, 0, a] = 1.0
    qp, pp, op = (os.path.join(tmp, x) for x in ("q.npy", "pos.npy", "out.npy"))
    np.save(qp, q)
    np.save(pp, np.asarray(positions, dtype=np.int64))
    cmd = [posenc, "apply", path, "--q", qp, "-o", op, "--positions", pp, "--numerics", "hf"]
    if got["rope_type"] in ("dynamic", "longrope"):
        cmd += ["--seq-len", str(seq_len)]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    out = np.load(op)
    return out[:, 0, a], out[:, 0, b]


def torch_cos_sin(inv, attention_factor, positions):
    pos = torch.tensor(positions, dtype=torch.int64)[None, :]
    inv_expanded = inv[None, :, None].float().expand(pos.shape[0], -1, 1)
    freqs = (inv_expanded @ pos[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * attention_factor, emb.sin() * attention_factor
    n = inv.shape[0]
    return cos[0, :, :n].numpy(), sin[0, :, :n].numpy()


def bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def main():
    posenc, shared = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20)
    positions = sorted(set([0, 1, 2, 3, 100, 4095, 4096, 32767, 131071, 2 ** 20 - 1, 2 ** 20]
                           + [int(x) for x in rng.integers(0, 2 ** 20 + 1, 1500)]))
    failures = []
    counts = {"cases": 0, "inv_freq": 0, "attention": 0, "cos_sin": 0}

    def check(name, path, cfg, seq_len, with_cos_sin):
        got = posenc_inspect(posenc, path, seq_len)
        inv, af, dim = rope_of(cfg, seq_len)
        counts["cases"] += 1
        if got["rotary_dim"] != dim:
            failures.append(f"{name}: rotary_dim {got['rotary_dim']}, transformers {dim}")
            return
        mine = np.asarray(got["inv_freq"], dtype=np.float64)
        if not np.all(mine.astype(np.float32).astype(np.float64) == mine):
            failures.append(f"{name}: posenc's hf inv_freq is not float32")
        diff = np.nonzero(bits(mine) != bits(inv.numpy()))[0]
        counts["inv_freq"] += len(mine)
        for i in diff[:3]:
            failures.append(f"{name}: inv_freq[{i}] {mine[i]!r}, torch {float(inv[i])!r}")
        # cos/sin multiply by the Python float, which torch rounds to float32; posenc reports
        # that float32 value.
        counts["attention"] += 1
        if got["attention_factor"] != float(np.float32(af)):
            failures.append(f"{name}: attention factor {got['attention_factor']!r}, "
                            f"transformers {af!r} (float32 {float(np.float32(af))!r})")
        if with_cos_sin:
            # transformers' forward updates dynamic/longrope frequencies from max(position_ids) + 1.
            eff = seq_len or positions[-1] + 1
            if eff != seq_len:
                inv, af, dim = rope_of(cfg, eff)
            c, s = posenc_cos_sin(posenc, path, got, positions, eff, tmp)
            tc, ts = torch_cos_sin(inv, af, positions)
            counts["cos_sin"] += c.size + s.size
            for what, p, t in (("cos", c, tc), ("sin", s, ts)):
                bad = np.argwhere(bits(p) != bits(t))
                for k, i in bad[:3]:
                    failures.append(f"{name}: {what} at position {positions[k]} pair {i}: "
                                    f"{float(p[k, i])!r}, torch {float(t[k, i])!r}")
                if len(bad) > 3:
                    failures.append(f"{name}: {len(bad)} {what} entries differ")

    with tempfile.TemporaryDirectory() as tmp:
        config_dir = os.path.join(shared, "testdata", "hf-configs")
        configs = sorted(f for f in os.listdir(config_dir) if f.endswith(".json"))
        if not configs:
            failures.append(f"no configs in {config_dir}")
        for f in configs:
            path = os.path.join(config_dir, f)
            cfg = json.load(open(path))
            rs = cfg.get("rope_scaling") or {}
            long_ctx = [0]
            if rs.get("rope_type", rs.get("type")) in ("dynamic", "longrope"):
                long_ctx = [0, cfg["max_position_embeddings"]]
            for seq in long_ctx:
                check(f"{f} seq {seq}", path, cfg, seq, True)
        for k, (name, cfg, seq) in enumerate(synthetic()):
            path = os.path.join(tmp, "config.json")
            with open(path, "w") as fh:
                json.dump(cfg, fh)
            # cos/sin for one case in 8 (every method, base and dim is still covered by some).
            check(name, path, cfg, seq, k % 8 == 0)

    print(f"{counts['cases']} cases: {counts['inv_freq']} inv_freq entries, {counts['attention']} "
          f"attention factors, {counts['cos_sin']} cos/sin values compared bit for bit with torch "
          f"{torch.__version__}")
    for f in failures[:30]:
        print("FAIL", f)
    if failures:
        print(f"{len(failures)} failures")
        sys.exit(1)


if __name__ == "__main__":
    main()
