"""python3 -m posenc.pretrain, a short run (a tiny model, a few steps on a few thousand tokens):
the loss falls, the run is deterministic, the float16 file (format version 2) loads in `posenc
eval` with the held-out perplexity pretrain reported, and bad input is refused before training."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import CLI, SHARED, cli_env
from posenc import pretrain

TOKENIZER = SHARED / "models" / "stories260K" / "tinystories_260k_v1.bin"
AUSTEN = SHARED / "data" / "austen"
TINY = ["--dim", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1", "--hidden", "64",
        "--ctx", "32", "--steps", "12", "--batch", "4", "--lr", "1e-2", "--warmup", "2", "--seed", "3",
        "--threads", "1", "--max-tokens", "2048"]


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    d = tmp_path_factory.mktemp("texts")
    out = []
    for name in ("emma.txt", "sensesensibility.txt", "prideprejudice.txt"):
        (d / name).write_bytes((AUSTEN / name).read_bytes()[30000:38000])  # ~4,500 tokens each
        out.append(d / name)
    return out


def run(texts, out, *extra):
    cmd = [sys.executable, "-m", "posenc.pretrain", "--train", str(texts[0]), str(texts[1]),
           "--heldout", str(texts[2]), "--tokenizer", str(TOKENIZER), "-o", str(out), *TINY, *extra, "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p


@pytest.fixture(scope="module")
def first(texts, tmp_path_factory):
    out = tmp_path_factory.mktemp("a") / "m.bin"
    p = run(texts, out)
    assert p.returncode == 0, p.stderr
    return out, json.loads(p.stdout), p.stderr


def test_loss_falls_and_progress_on_stderr(first):
    _, r, err = first
    assert len(r["losses"]) == 12
    assert np.mean(r["losses"][-3:]) < r["losses"][0] - 0.3, r["losses"]
    assert "step 12/12 loss" in err and "tokens/s" in err


def test_deterministic(first, texts, tmp_path):
    out, r, _ = first
    p = run(texts, tmp_path / "again.bin")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "again.bin").read_bytes() == out.read_bytes()
    assert json.loads(p.stdout)["losses"] == r["losses"]


def test_float16_file_loads_in_posenc_eval(first, texts):
    out, r, _ = first
    data = out.read_bytes()
    assert data[0] == 2  # format version 2: float16 weights
    assert r["bytes"] == len(data)
    e = subprocess.run([CLI, "eval", "--model", str(out), "--text", str(texts[2]), "--ctx", "32",
                        "--method", "none", "--max-tokens", "2048", "--json"],
                       capture_output=True, text=True, env=cli_env(), timeout=300)
    assert e.returncode == 0, e.stderr
    ppl = json.loads(e.stdout)["results"][0]["perplexity"]
    assert ppl == pytest.approx(r["heldout_perplexity"][-1]["perplexity"], rel=1e-9)
    assert ppl < 512  # better than uniform over the vocabulary


def test_float16_bytes_round_trip(first):
    out, _, _ = first
    v2 = out.read_bytes()
    v1 = pretrain.to_float32_bytes(v2)
    assert v1[0] == 1
    at = pretrain._weights_offset(v2)
    assert len(v1) - at == 2 * (len(v2) - at)
    assert pretrain.to_float16_bytes(v1) == v2  # float16 -> float32 -> float16 is exact
    m = pretrain.load_model(out)
    assert m.cfg.dim == 32 and m.cfg.seq_len == 32 and m.cfg.n_kv_heads == 1


def test_float32_output(texts, tmp_path):
    p = run(texts, tmp_path / "f32.bin", "--dtype", "float32", "--steps", "2")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "f32.bin").read_bytes()[0] == 1


@pytest.mark.parametrize("flags, message", [
    (["--ctx", "1"], "--ctx (1) must be at least 2"),
    (["--heads", "3"], "--dim (32) must be divisible by --heads (3)"),
    (["--kv-heads", "3"], "--heads (2) must be divisible by --kv-heads (3)"),
    (["--steps", "0"], "--steps (0) must be at least 1"),
    (["--lr", "0"], "--lr (0.0) must be positive"),
    (["--ctx", "100000"], "shorter than one window of --ctx + 1 (100001)"),
])
def test_refusals_before_training(texts, tmp_path, flags, message):
    p = run(texts, tmp_path / "r.bin", *flags)
    assert p.returncode == 2
    assert message in p.stderr, p.stderr
    assert "step 1/" not in p.stderr
    assert not (tmp_path / "r.bin").exists()
