"""bench/python_bench.py runs (--quick --json) and reports every field; its correctness check
refuses a wrong rotation; its option errors name the option. Speed is never asserted here (a
timed test on a shared machine would be flaky). Registered in tests/CMakeLists.txt as
python.bench_quick_json (not collected by the test_*.py glob)."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "python_bench.py"
VARIANTS = ["posenc/table/threads:1", "posenc/table/threads:2", "posenc/spec/threads:1",
            "posenc/spec/threads:2"]


def run_bench(*args):
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=500)


def check_stats(s, where):
    for key in ("median_ns", "min_ns", "max_ns", "samples", "calls_per_sample"):
        assert key in s, f"{key} missing in {where}: {s}"
    assert s["samples"] >= 1 and s["calls_per_sample"] >= 1, where
    assert 0 < s["min_ns"] <= s["median_ns"] <= s["max_ns"], where


@pytest.fixture(scope="module")
def report():
    r = run_bench("--quick", "--json")
    assert r.returncode == 0, r.stderr
    assert "repetition" in r.stderr  # progress goes to stderr, not into the JSON
    return json.loads(r.stdout)


def test_header(report):
    assert report["bench"] == "python_bench" and report["quick"] is True
    assert report["numerics"] == "hf" and report["repetitions"] == 1
    for key in ("load_before", "load_after"):
        assert len(report[key]) == 3 and all(isinstance(v, float) and v >= 0 for v in report[key])
    t = report["torch"]
    assert isinstance(t["default_threads"], int) and t["default_threads"] >= 1
    assert 1 in t["timed_threads"] and 2 in t["timed_threads"] and t["default_threads"] in t["timed_threads"]
    for key in ("commit", "posenc_version", "python_version", "numpy_version", "cpu_count"):
        assert key in report


def test_cases(report):
    cases = report["cases"]
    names = {(c["case"], c["dtype"]) for c in cases}
    assert names == {(f"{phase}-q32-k{k}", d) for phase in ("prefill", "decode") for k in (8, 32)
                     for d in ("float32", "bfloat16")}
    torch_variants = [f"torch/threads:{n}" for n in report["torch"]["timed_threads"]]
    for c in cases:
        where = f'{c["case"]}/{c["dtype"]}'
        assert c["q_heads"] == 32 and c["k_heads"] in (8, 32) and c["head_dim"] == 128, where
        if c["phase"] == "decode":
            assert c["tokens"] == 1 and c["positions"] == [4095, 4095], where
        else:
            assert c["phase"] == "prefill" and c["tokens"] > 1, where
            assert c["positions"] == [0, c["tokens"] - 1], where
        assert sorted(c["timings"]) == sorted(torch_variants + VARIANTS), where
        for name, s in c["timings"].items():
            check_stats(s, f"{where} {name}")
        assert sorted(c["max_abs_error_vs_torch"]) == sorted(VARIANTS), where
        assert all(0 <= e < 0.05 for e in c["max_abs_error_vs_torch"].values()), where
        assert sorted(c["speedup"]) == sorted(VARIANTS), where
        for p, by_torch in c["speedup"].items():
            assert sorted(by_torch) == sorted(f"vs_{t}" for t in torch_variants), where
            for t, ratio in by_torch.items():
                want = c["timings"][t.removeprefix("vs_")]["median_ns"] / c["timings"][p]["median_ns"]
                assert ratio == pytest.approx(want), f"{where} {p} {t}"


def test_fused(report):
    rows = report["fused"]
    assert {(c["case"], c["dtype"]) for c in rows} == {
        (f"fused-{phase}-q32-kv8", d) for phase in ("prefill", "decode") for d in ("float32", "bfloat16")}
    torch_variants = [f"torch/threads:{n}" for n in report["torch"]["timed_threads"]]
    posenc_variants = ["posenc/table/threads:1", "posenc/table/threads:2"]
    for c in rows:
        where = f'{c["case"]}/{c["dtype"]}'
        assert c["q_heads"] == 32 and c["kv_heads"] == 8 and c["head_dim"] == 128, where
        assert c["block_size"] == 16 and (c["tokens"] == 1) == (c["phase"] == "decode"), where
        assert sorted(c["timings"]) == sorted(torch_variants + posenc_variants), where
        for name, s in c["timings"].items():
            check_stats(s, f"{where} {name}")
        assert 0 <= c["max_abs_error_vs_torch"] < 0.05, where
        for p in posenc_variants:
            for t in torch_variants:
                want = c["timings"][t]["median_ns"] / c["timings"][p]["median_ns"]
                assert c["speedup"][p][f"vs_{t}"] == pytest.approx(want), f"{where} {p} {t}"


def test_a_wrong_cache_append_is_refused(monkeypatch):
    bench = load_bench_module()
    real = bench.posenc.rope_append_kv_cache_

    def unrotated(q, k, *args, **kwargs):  # k cached without its rotation: the check must see it
        return real(None, k, *args, **{**kwargs, "rotate": False})

    monkeypatch.setattr(bench.posenc, "rope_append_kv_cache_", unrotated)
    with pytest.raises(SystemExit) as e:
        bench.main(["--quick", "--json"])
    assert "posenc differs from eager torch" in str(e.value)


def test_overhead(report):
    rows = report["overhead"]
    assert {(o["kind"], o["dtype"], o["source"]) for o in rows} == {
        (kind, dtype, src) for kind, dtype in (("torch", "float32"), ("torch", "bfloat16"), ("numpy", "float32"))
        for src in ("table", "frequencies", "spec")}
    for o in rows:
        where = f'{o["kind"]}/{o["dtype"]}/{o["source"]}'
        check_stats(o["python"], where)
        check_stats(o["cpp"], where)
        assert o["overhead_ns"] == pytest.approx(o["python"]["median_ns"] - o["cpp"]["median_ns"]), where
        assert o["python"]["cpu_median_ns"] > 0 and o["cpp"]["cpu_median_ns"] > 0, where
        assert o["overhead_cpu_ns"] == pytest.approx(o["python"]["cpu_median_ns"] - o["cpp"]["cpu_median_ns"])
        assert o["goal_ns"] == 5000 and o["goal_met"] == (o["overhead_ns"] <= 5000), where


def test_goals(report):
    g = report["goals"]
    assert set(g["prefill_speedup"]) == {f"prefill-q32-k{k}/{d}" for k in (8, 32)
                                         for d in ("float32", "bfloat16")}
    for v in g["prefill_speedup"].values():
        assert v["goal"] == 5 and v["goal_met"] == all(s >= 5 for s in v["speedup"].values())
    d = g["decode_overhead"]
    assert d["worst_ns"] == max(o["overhead_ns"] for o in report["overhead"])
    assert d["goal_met"] == (d["worst_ns"] <= 5000)


def load_bench_module():
    spec = importlib.util.spec_from_file_location("python_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_markdown_output(report, capsys):
    load_bench_module().print_markdown(report)
    out = capsys.readouterr().out
    for text in ("load average before:", "| prefill-q32-k8 | float32 |", "| decode-q32-k32 | bfloat16 |",
                 "goal decode overhead <= 5000 ns", "| numpy | float32 | table |",
                 "| fused-prefill-q32-kv8 | bfloat16 |"):
        assert text in out


def test_a_wrong_rotation_is_refused(monkeypatch, capsys):
    bench = load_bench_module()
    real = bench.posenc.apply_rope_

    def inverse_rotation(*args, **kwargs):
        return real(*args, **{**kwargs, "inverse": True})

    monkeypatch.setattr(bench.posenc, "apply_rope_", inverse_rotation)
    with pytest.raises(SystemExit) as e:
        bench.main(["--quick", "--json"])
    assert "posenc differs from eager torch" in str(e.value) and "refusing to time" in str(e.value)
    assert capsys.readouterr().out == ""  # nothing reported


@pytest.mark.parametrize("args, message", [
    (["--repetitions", "0"], "--repetitions (0) must be at least 1"),
    (["--min-sample-ms", "-1"], "--min-sample-ms (-1.0) must be positive"),
    (["--warmup-ms", "-2"], "--warmup-ms (-2.0) must not be negative"),
    (["--numerics", "exact"], "--numerics: invalid choice: 'exact'"),
])
def test_option_errors(args, message):
    r = run_bench(*args)
    assert r.returncode == 2 and message in r.stderr, r.stderr
