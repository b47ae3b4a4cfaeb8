"""python3 -m posenc.finetune_grid --quick: the whole grid pipeline on stories260K in miniature
(linear, yarn and the control, 2 steps of 256 tokens, L = 64): every run evaluated at 1x-8x at
every step, the control with 4x the windows of a quarter of the length, results.json, the SVG,
the tables; a second invocation skips the finished runs."""
import json
import subprocess
import sys
import xml.dom.minidom

import pytest


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    out = tmp_path_factory.mktemp("grid")
    cmd = [sys.executable, "-m", "posenc.finetune_grid", "--out", str(out), "--quick", "--threads", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return out, cmd, p.stderr


def test_every_run_and_context(grid):
    out, _, _ = grid
    res = json.loads((out / "results.json").read_text())
    m = res["models"]["stories260K"]
    assert m["L"] == 64
    assert sorted(m["methods"]) == ["control", "linear", "yarn"]
    for name, cell in m["methods"].items():
        assert sorted(cell["ctx"]) == ["1", "2", "4", "8"]
        for k in ("1", "2", "4", "8"):
            assert sorted(cell["ctx"][k], key=int) == ["0", "1", "2"], (name, k)
            assert all(v > 1 for v in cell["ctx"][k].values())
    # Same tokens per step: 1 window of 256 against 4 windows of 64.
    assert (m["methods"]["yarn"]["train_ctx"], m["methods"]["yarn"]["batch"]) == (256, 1)
    assert (m["methods"]["control"]["train_ctx"], m["methods"]["control"]["batch"]) == (64, 4)
    run = json.loads((out / "stories260K" / "yarn.json").read_text())
    assert run["factor"] == 4 and run["method"] == "yarn"
    # Fine-tuning on Austen lowers the Austen perplexity at the trained length.
    assert m["methods"]["yarn"]["ctx"]["4"]["2"] < m["methods"]["yarn"]["ctx"]["4"]["0"]


def test_figure_and_tables(grid):
    out, _, _ = grid
    doc = xml.dom.minidom.parse(str(out / "stories260K.svg"))
    assert len(doc.getElementsByTagName("path")) == 3 * 4  # a line per method and context
    tables = (out / "tables.md").read_text()
    assert "| method | 0 | 1 | 2 |" in tables
    assert "reaches control 4x" in tables
    assert "| yarn |" in tables


def test_resumes(grid):
    out, cmd, _ = grid
    before = (out / "stories260K" / "linear.json").read_bytes()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("done already, skipped") == 3
    assert (out / "stories260K" / "linear.json").read_bytes() == before


@pytest.mark.parametrize("flags, message", [
    (["--models", "stories260K", "--methods", "none,pi"], "unknown method 'pi'"),
    (["--models", "gpt2"], "unknown model 'gpt2'"),
    (["--models", "stories260K", "--steps", "50,25"], "--steps (50,25) must list increasing positive integers"),
    (["--models", "stories260K", "--warmup", "500"], "--warmup (500) must be in [0, 400]"),
    (["--models", "stories260K", "--jobs", "0"], "--jobs (0) must be at least 1"),
])
def test_refusals(tmp_path, flags, message):
    p = subprocess.run([sys.executable, "-m", "posenc.finetune_grid", "--out", str(tmp_path), "--plan", *flags],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert message in p.stderr, p.stderr


def test_plan_estimates_the_time(tmp_path):
    p = subprocess.run([sys.executable, "-m", "posenc.finetune_grid", "--out", str(tmp_path), "--plan"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 13  # 12 runs and the total
    assert all("min (" in line and "training" in line for line in lines[:12]), p.stdout
    # 12 runs at the measured rates: under the two hours even one at a time.
    total = float(lines[-1].split("whole grid: ")[1].split(" h of runs")[0])
    left = float(lines[-1].split("takes about ")[1].split(" h with --jobs 2")[0])
    assert 0 < left < total < 2
