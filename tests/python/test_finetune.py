"""python3 -m posenc.finetune, short runs (a few steps on a few hundred tokens): the loss falls,
the run is deterministic, the output loads in `posenc eval` with its sidecar, bad input is
refused before training."""
import json
import os
import subprocess
import sys

import pytest

from conftest import CLI, SHARED, cli_env
from posenc.finetune import main as finetune_main

MODEL = SHARED / "models" / "stories260K" / "tinystories_260k_v1.bin"
EMMA = SHARED / "data" / "austen" / "emma.txt"
SENSE = SHARED / "data" / "austen" / "sensesensibility.txt"


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    d = tmp_path_factory.mktemp("texts")
    a, b = d / "emma.txt", d / "sense.txt"
    a.write_bytes(EMMA.read_bytes()[20000:21500])    # ~450 tokens each
    b.write_bytes(SENSE.read_bytes()[20000:21500])
    short = d / "short.txt"
    short.write_bytes(b"Once upon a time")
    return a, b, short


def finetune(*args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "posenc.finetune", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


def finetune_here(args, capsys):
    """main() in this process (argparse's refusals exit with 2 as well): (status, stderr)."""
    capsys.readouterr()
    try:
        rc = finetune_main([str(a) for a in args])
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().err


def base_args(texts, out, *extra, seed=1):
    a, b, _ = texts
    return ["--model", MODEL, "--train", a, b, "--ctx", 128, "--method", "yarn", "--steps", 6,
            "--batch", 2, "--lr", 2e-3, "--warmup", 2, "--seed", seed, "-o", out, *extra]


def test_loss_falls_and_eval_reads_the_output(texts, tmp_path):
    out = tmp_path / "ft.bin"
    r = finetune(*base_args(texts, out, "--eval", texts[0], "--eval-ctx", "128,256", "--eval-every", 3,
                            "--json"))
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["method"] == "yarn" and s["factor"] == 1.0  # max(1, 128 / 512)
    assert len(s["losses"]) == 6
    # progress on stderr: step, loss, tokens/s, time left
    for word in ("step 6/6", "loss", "tokens/s", "s left", "eval step 3 ctx 256"):
        assert word in r.stderr, word
    evals = {(e["step"], e["ctx"]): e["perplexity"] for e in s["evals"]}
    assert sorted(evals) == [(0, 128), (0, 256), (3, 128), (3, 256), (6, 128), (6, 256)]
    # Trained on this very text: its perplexity falls (eval's protocol, C++ forward pass).
    assert evals[(6, 128)] < 0.9 * evals[(0, 128)]
    assert s["final_loss"] < s["first_loss"]
    assert s["tokens_per_second"] > 0

    sidecar = json.loads((tmp_path / "ft.json").read_text())
    assert sidecar["format"] == "posenc-rope-sidecar/1"
    assert (sidecar["method"], sidecar["factor"], sidecar["trained_context"]) == ("yarn", 1.0, 128)
    # posenc eval reads OUT.bin and, without flags, OUT.json: the perplexity finetune reported.
    e = subprocess.run([CLI, "eval", "--model", out, "--text", texts[0], "--ctx", "128,256",
                        "--threads", "1", "--json"], capture_output=True, text=True, env=cli_env())
    assert e.returncode == 0, e.stderr
    assert "ft.json" in e.stderr
    j = json.loads(e.stdout)
    assert j["methods"] == ["yarn"] and j["factor"] == 1.0
    for c in (128, 256):
        assert j["table"]["yarn"][str(c)] == pytest.approx(evals[(6, c)], rel=1e-12)


def test_method_parameters_go_to_the_sidecar_and_eval(texts, tmp_path):
    """--beta-fast, --beta-slow, --truncate (the CLI's flags) train with those parameters, land in
    OUT.json, and posenc eval then uses them without flags: its perplexity is finetune's."""
    out = tmp_path / "p.bin"
    args = base_args(texts, out, "--factor", 4, "--beta-fast", 8, "--beta-slow", 0.5, "--truncate",
                     "false", "--eval", texts[0], "--eval-ctx", "256", "--json")
    args[args.index("--steps") + 1] = 2
    r = finetune(*args)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert (s["beta_fast"], s["beta_slow"], s["truncate"], s["mscale"]) == (8.0, 0.5, False, None)
    assert "--beta-fast 8 --beta-slow 0.5 --truncate false" in r.stderr
    sidecar = json.loads((tmp_path / "p.json").read_text())
    assert (sidecar["beta_fast"], sidecar["beta_slow"], sidecar["truncate"]) == (8.0, 0.5, False)
    assert sidecar["low_freq_factor"] is None
    final = [e["perplexity"] for e in s["evals"] if e["step"] == 2][0]
    e = subprocess.run([CLI, "eval", "--model", out, "--text", texts[0], "--ctx", "256",
                        "--threads", "1", "--json"], capture_output=True, text=True, env=cli_env())
    assert e.returncode == 0, e.stderr
    j = json.loads(e.stdout)
    assert j["method_params"] == {"beta_fast": 8.0, "beta_slow": 0.5, "truncate": False}
    assert j["table"]["yarn"]["256"] == pytest.approx(final, rel=1e-12)
    # Without the parameters the same weights give another perplexity: they were used.
    d = subprocess.run([CLI, "eval", "--model", out, "--text", texts[0], "--ctx", "256",
                        "--threads", "1", "--json", "--method", "yarn", "--factor", "4"],
                       capture_output=True, text=True, env=cli_env())
    assert d.returncode == 0, d.stderr
    assert json.loads(d.stdout)["table"]["yarn"]["256"] != pytest.approx(final, rel=1e-9)


def test_deterministic(texts, tmp_path):
    outs = []
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        out = tmp_path / f"{name}.bin"
        args = base_args(texts, out, "--threads", 2, "--json", seed=seed)
        args[args.index("--steps") + 1] = 3
        args[args.index("--ctx") + 1] = 64
        r = finetune(*args)
        assert r.returncode == 0, r.stderr
        outs.append((out.read_bytes(), json.loads(r.stdout)["losses"]))
    assert outs[0][0] == outs[1][0] and outs[0][1] == outs[1][1]
    assert outs[0][0] != outs[2][0]  # another seed draws other windows
    assert outs[0][0] != MODEL.read_bytes()  # it trained


@pytest.mark.parametrize("change,expect", [
    ({"--ctx": 1}, "--ctx (1) must be at least 2"),
    ({"--ctx": 4000}, "shorter than one window of --ctx 4000"),
    ({"--method": "rope-magic"}, "rope-magic"),
    ({"--steps": 0}, "--steps (0) must be at least 1"),
    ({"--lr": 0}, "--lr (0) must be greater than 0"),
    ({"--lr": -1e-3}, "--lr (-0.001) must be greater than 0"),
    ({"--lr": "nan"}, "--lr (nan) must be finite"),
    ({"--batch": 0}, "--batch (0) must be at least 1"),
    ({"--warmup": -1}, "--warmup (-1) must not be negative"),
    ({"--warmup": 7}, "--warmup (7) must be at most --steps (6)"),
    ({"--method": "none", "--factor": 2}, "--factor (2) has no effect on --method none"),
    ({"--method": "ntk", "--attention-factor": 1.5}, "not to method ntk"),
    ({"--method": "linear", "--beta-fast": 16}, "--beta-fast (16) applies to yarn, yarn-paper and dynamic-yarn, not to method linear"),
    ({"--low-freq-factor": 2}, "--low-freq-factor (2) applies to llama3, not to method yarn"),
    ({"--beta-fast": 1, "--beta-slow": 2}, "beta_fast (1) must be greater than beta_slow (2) (with --beta-fast 1"),
    ({"--truncate": "yes"}, "--truncate (yes) must be true or false"),
    ({"--beta-slow": "inf"}, "--beta-slow (inf) must be finite"),
    ({"--factor": -2}, "--factor (-2) must be greater than 0"),
    ({"--eval-ctx": "128"}, "--eval-ctx without --eval"),
    ({"--eval": "EMMA"}, "--eval needs --eval-ctx"),
    ({"--eval": "EMMA", "--eval-ctx": "128,1"}, "--eval-ctx (1) must be at least 2"),
    ({"--eval": "EMMA", "--eval-ctx": "100000"}, "--eval-ctx 100000 needs 100000 tokens"),
    ({"-o": "out.txt"}, "must end in .bin"),
    ({"--model": "EMMA"}, "format version"),
    ({"--train": "missing.txt"}, "--train: cannot read missing.txt"),
])
def test_refusals_before_training(texts, tmp_path, capsys, change, expect):
    out = tmp_path / "r.bin"
    args = [str(a) for a in base_args(texts, out)]
    for flag, value in change.items():
        value = str(texts[0]) if value == "EMMA" else str(value)
        if flag == "-o":
            value = str(tmp_path / value)
        if flag in args:
            i = args.index(flag)
            args[i + 1] = value
            if flag == "--train":
                del args[i + 2]  # the second text
        else:
            args += [flag, value]
    rc, err = finetune_here(args, capsys)
    assert rc == 2, err
    assert expect in err, err
    assert "step 1/" not in err  # refused before training
    assert not out.exists()


def test_short_text_is_refused(texts, tmp_path, capsys):
    a, _, short = texts
    rc, err = finetune_here(["--model", MODEL, "--train", a, short, "--ctx", 64, "--method", "none",
                             "--steps", 1, "--lr", 1e-3, "-o", tmp_path / "x.bin"], capsys)
    assert rc == 2
    assert f"--train {short}: 4 tokens, shorter than one window of --ctx 64" in err, err
