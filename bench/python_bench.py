#!/usr/bin/env python3
"""posenc from Python against transformers-style eager PyTorch RoPE, on the same tensors.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python_bench.py            # markdown tables
    PYTHONPATH=build/release/python /usr/bin/python3 bench/python_bench.py --json     # for machines
    PYTHONPATH=build/release/python /usr/bin/python3 bench/python_bench.py --quick    # a smoke run

What is timed (docs/benchmarks.md, "Python: posenc vs eager PyTorch", says what the numbers mean):

- Rotation of q and k for Llama 2 7B shapes: head_dim 128, q 32 heads, k 8 heads (GQA as in
  Llama 3 8B) or 32 (Llama 2 7B itself), prefill (4096 tokens, positions 0..4095) and decode
  (1 token at position 4095), float32 and bfloat16. q and k are [tokens, heads, head_dim]
  tensors, as a projection makes them.
  * eager torch: transformers' `q * cos + rotate_half(q) * sin` (and k) on the
    [1, heads, seq, head_dim] views transformers makes (`.view(...).transpose(1, 2)` of the same
    tensors), cos/sin computed beforehand as transformers' rotary forward does ([1, seq,
    head_dim] in the tensors' dtype, unsqueezed at dim 1), new tensors out. torch with its
    default threads, with 1 and with 2 (torch.set_num_threads).
  * posenc: `posenc.apply_rope_(q, k, positions, src, threads=n)` in place on the same tensors,
    src a prebuilt posenc.CosSinTable ("table") or the RopeSpec (cos/sin computed per token,
    "spec"), threads 1 and 2; numerics "hf" (transformers' values) unless --numerics says.
- The fused RoPE + KV-cache append for Llama 3 8B shapes (q 32 heads, k and v 8 heads, a vLLM
  cache [blocks, 16, 8, 128] of the tensors' dtype, slots 0..tokens-1), prefill and decode:
  * eager torch: transformers' rotation of q and k as above, then vLLM's reshape_and_cache in
    torch (`key_cache.view(-1, 8, 128)[slots] = k_rot`, the same for v), torch's default
    threads, 1 and 2.
  * posenc: `posenc.rope_append_kv_cache_(q, k, v, key_cache, value_cache, positions, table,
    slot_mapping=slots, threads=n)`, threads 1 and 2.
- Decode overhead: the per-call time of apply_rope_ from Python minus the time of the C++
  apply_rope call on the same views (posenc._posenc._time_apply), for torch tensors and numpy
  arrays, with a table, a Frequencies and a RopeSpec.

Every number is the median of --repetitions samples (min and max too); a sample is a batch of
back-to-back calls lasting at least --min-sample-ms, timed with time.perf_counter_ns after a
warm-up. Within a repetition every variant of a case is sampled in turn, so speedups (eager torch
time / posenc time) compare numbers from the same minutes of the same process. Before anything is
timed, each posenc variant's result is checked against eager torch's on the same input; a
mismatch stops the bench (exit 1). The load average is printed before and after. Progress goes to
stderr. No speed is asserted: this is a benchmark, not a test.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

import posenc
from posenc import _posenc

HEAD_DIM = 128
PREFILL_TOKENS = 4096
DECODE_POSITION = 4095
QUICK_PREFILL_TOKENS = 256
OVERHEAD_GOAL_NS = 5000.0
PREFILL_SPEEDUP_GOAL = 5.0
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# Worst |posenc - eager| on inputs in [-1, 1): eager bf16 rounds cos/sin, both products and the sum
# to bf16 (about 4 half-ulps of 2^-8), posenc rounds once; a 1-ulp inv_freq at position 4095
# moves an f32 angle by up to ~5e-4. A wrong rotation is off by O(1).
TOLERANCE = {"float32": 2e-3, "bfloat16": 3e-2}


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def rotate_half(x):
    """transformers' rotate_half."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def eager_rope(q4, k4, cos, sin):
    """transformers' apply_rotary_pos_emb (unsqueeze_dim=1) on [batch, heads, seq, head_dim]."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return (q4 * cos) + (rotate_half(q4) * sin), (k4 * cos) + (rotate_half(k4) * sin)


def hf_cos_sin(theta, positions, dtype):
    """transformers' default rotary forward: inv_freq, the outer product, cat, cos/sin, .to(dtype)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.int64).float() / HEAD_DIM))
    position_ids = positions.view(1, -1)
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def as_transformers_view(x):
    """[tokens, heads, head_dim] -> transformers' [1, heads, seq, head_dim] view (no copy)."""
    tokens, heads, dim = x.shape
    return x.view(1, tokens, heads, dim).transpose(1, 2)


class Timer:
    def __init__(self, min_sample_ns, warmup_ns):
        self.min_sample_ns = min_sample_ns
        self.warmup_ns = warmup_ns

    def calibrate(self, fn):
        """Warms fn up, then returns the number of calls a sample needs to last min_sample_ns."""
        start = time.perf_counter_ns()
        fn()
        while time.perf_counter_ns() - start < self.warmup_ns:
            fn()
        n = 1
        while True:
            dt = self.sample(fn, n) * n
            if dt >= self.min_sample_ns:
                return n
            n = max(n * 2, int(n * self.min_sample_ns / max(dt, 1) * 1.2))

    @staticmethod
    def sample(fn, n):
        """ns per call over n back-to-back calls."""
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - t0) / n


def stats(samples):
    return {"median_ns": statistics.median(samples), "min_ns": min(samples), "max_ns": max(samples),
            "samples": len(samples)}


def with_torch_threads(n, fn):
    def run():
        torch.set_num_threads(n)
        return fn()
    return run


def measure(variants, timer, repetitions, label):
    """variants: {name: (setup, fn)}; setup runs before each sample (e.g. set torch's threads).
    Returns {name: stats}; the variants take turns within each repetition."""
    counts = {}
    for name, (setup, fn) in variants.items():
        setup()
        counts[name] = timer.calibrate(fn)
    samples = {name: [] for name in variants}
    for r in range(repetitions):
        progress(f"  {label}: repetition {r + 1}/{repetitions}")
        for name, (setup, fn) in variants.items():
            setup()
            samples[name].append(Timer.sample(fn, counts[name]))
    out = {}
    for name in variants:
        out[name] = stats(samples[name])
        out[name]["calls_per_sample"] = counts[name]
    return out


def check(name, dtype_name, got, want):
    err = (got.float() - want.float()).abs().max().item()
    tol = TOLERANCE[dtype_name]
    if not err <= tol:  # also catches NaN
        raise SystemExit(f"python_bench: {name} ({dtype_name}): posenc differs from eager torch by "
                         f"{err:g} (tolerance {tol:g}); refusing to time a wrong result")
    return err


def rope_cases(args, spec, torch_threads):
    tokens = QUICK_PREFILL_TOKENS if args.quick else PREFILL_TOKENS
    shapes = []
    for k_heads in (8, 32):
        shapes.append((f"prefill-q32-k{k_heads}", tokens, 32, k_heads, torch.arange(tokens)))
    for k_heads in (8, 32):
        shapes.append((f"decode-q32-k{k_heads}", 1, 32, k_heads, torch.tensor([DECODE_POSITION])))
    tables = {}
    timer = Timer(args.min_sample_ms * 1e6, args.warmup_ms * 1e6)
    gen = torch.Generator().manual_seed(1234)
    results = []
    for dtype_name, dtype in DTYPES.items():
        for name, tokens, q_heads, k_heads, positions in shapes:
            label = f"{name}/{dtype_name}"
            progress(f"{label}: preparing")
            table_positions = int(positions.max()) + 1
            if table_positions not in tables:
                tables[table_positions] = posenc.CosSinTable(spec, table_positions, args.numerics)
            table = tables[table_positions]
            q = (torch.rand(tokens, q_heads, HEAD_DIM, generator=gen) * 2 - 1).to(dtype)
            k = (torch.rand(tokens, k_heads, HEAD_DIM, generator=gen) * 2 - 1).to(dtype)
            cos, sin = hf_cos_sin(spec.rope_theta, positions, dtype)
            q4, k4 = as_transformers_view(q), as_transformers_view(k)

            posenc_variants = {}
            for src_name, src in (("table", table), ("spec", spec)):
                for n in (1, 2):
                    posenc_variants[f"posenc/{src_name}/threads:{n}"] = (src, n)
            # The check: every posenc variant on a copy against eager torch on the original.
            want_q, want_k = eager_rope(q4, k4, cos, sin)
            errors = {}
            for vname, (src, n) in posenc_variants.items():
                qc, kc = q.clone(), k.clone()
                numerics = None if src is table else args.numerics
                posenc.apply_rope_(qc, kc, positions, src, numerics=numerics, threads=n)
                errors[vname] = max(check(vname + " q", dtype_name, as_transformers_view(qc), want_q),
                                    check(vname + " k", dtype_name, as_transformers_view(kc), want_k))

            variants = {}
            default_threads = torch_threads["default"]
            for n in torch_threads["timed"]:
                variants[f"torch/threads:{n}"] = (
                    lambda n=n: torch.set_num_threads(n), lambda: eager_rope(q4, k4, cos, sin))
            restore = lambda: torch.set_num_threads(default_threads)  # noqa: E731
            for vname, (src, n) in posenc_variants.items():
                numerics = None if src is table else args.numerics
                variants[vname] = (restore, lambda src=src, n=n, numerics=numerics: posenc.apply_rope_(
                    q, k, positions, src, numerics=numerics, threads=n))
            timings = measure(variants, timer, args.repetitions, label)
            torch.set_num_threads(default_threads)

            speedups = {}
            for vname in posenc_variants:
                p = timings[vname]["median_ns"]
                speedups[vname] = {f"vs_torch/threads:{n}": timings[f"torch/threads:{n}"]["median_ns"] / p
                                   for n in torch_threads["timed"]}
            results.append({
                "case": name, "phase": "prefill" if tokens > 1 else "decode", "dtype": dtype_name,
                "tokens": tokens, "q_heads": q_heads, "k_heads": k_heads, "head_dim": HEAD_DIM,
                "positions": [int(positions.min()), int(positions.max())],
                "max_abs_error_vs_torch": errors, "timings": timings, "speedup": speedups,
            })
    return results


def fused_cases(args, spec, torch_threads):
    """The fused append against eager torch's rotation + reshape_and_cache (module docstring)."""
    tokens = QUICK_PREFILL_TOKENS if args.quick else PREFILL_TOKENS
    q_heads, kv_heads, block = 32, 8, 16
    shapes = [("fused-prefill-q32-kv8", tokens, torch.arange(tokens)),
              ("fused-decode-q32-kv8", 1, torch.tensor([DECODE_POSITION]))]
    timer = Timer(args.min_sample_ms * 1e6, args.warmup_ms * 1e6)
    gen = torch.Generator().manual_seed(4321)
    table = posenc.CosSinTable(spec, max(tokens, DECODE_POSITION + 1), args.numerics)
    results = []
    for dtype_name, dtype in DTYPES.items():
        for name, n_tokens, positions in shapes:
            label = f"{name}/{dtype_name}"
            progress(f"{label}: preparing")
            q, k, v = ((torch.rand(n_tokens, h, HEAD_DIM, generator=gen) * 2 - 1).to(dtype)
                       for h in (q_heads, kv_heads, kv_heads))
            slots = torch.arange(n_tokens)
            blocks = (n_tokens + block - 1) // block
            caches = {who: (torch.zeros(blocks, block, kv_heads, HEAD_DIM, dtype=dtype),
                            torch.zeros(blocks, block, kv_heads, HEAD_DIM, dtype=dtype))
                      for who in ("torch", "posenc")}
            cos, sin = hf_cos_sin(spec.rope_theta, positions, dtype)
            q4, k4 = as_transformers_view(q), as_transformers_view(k)

            def eager(q4=q4, k4=k4, cos=cos, sin=sin, v=v, slots=slots, kc=caches["torch"]):
                q_rot, k_rot = eager_rope(q4, k4, cos, sin)
                kc[0].view(-1, kv_heads, HEAD_DIM)[slots] = k_rot[0].transpose(0, 1)
                kc[1].view(-1, kv_heads, HEAD_DIM)[slots] = v
                return q_rot

            def fused(n, q=q, k=k, v=v, positions=positions, slots=slots, kc=caches["posenc"]):
                posenc.rope_append_kv_cache_(q, k, v, kc[0], kc[1], positions, table,
                                             slot_mapping=slots, threads=n)

            # The check: posenc on copies of q and k against eager torch on the originals.
            want_q = eager()
            qc, kcopy = q.clone(), k.clone()
            posenc.rope_append_kv_cache_(qc, kcopy, v, caches["posenc"][0], caches["posenc"][1],
                                         positions, table, slot_mapping=slots)
            error = max(check(label + " q", dtype_name, as_transformers_view(qc), want_q),
                        check(label + " key cache", dtype_name, caches["posenc"][0],
                              caches["torch"][0]),
                        check(label + " value cache", dtype_name, caches["posenc"][1],
                              caches["torch"][1]))

            variants = {}
            default_threads = torch_threads["default"]
            for n in torch_threads["timed"]:
                variants[f"torch/threads:{n}"] = (lambda n=n: torch.set_num_threads(n), eager)
            restore = lambda: torch.set_num_threads(default_threads)  # noqa: E731
            for n in (1, 2):
                variants[f"posenc/table/threads:{n}"] = (restore, lambda n=n: fused(n))
            timings = measure(variants, timer, args.repetitions, label)
            torch.set_num_threads(default_threads)
            speedups = {}
            for n in (1, 2):
                p = timings[f"posenc/table/threads:{n}"]["median_ns"]
                speedups[f"posenc/table/threads:{n}"] = {
                    f"vs_torch/threads:{t}": timings[f"torch/threads:{t}"]["median_ns"] / p
                    for t in torch_threads["timed"]}
            results.append({
                "case": name, "phase": "prefill" if n_tokens > 1 else "decode",
                "dtype": dtype_name, "tokens": n_tokens, "q_heads": q_heads, "kv_heads": kv_heads,
                "head_dim": HEAD_DIM, "block_size": block, "max_abs_error_vs_torch": error,
                "timings": timings, "speedup": speedups,
            })
    return results


def overhead_cases(args, spec):
    """Decode: apply_rope_ from Python minus the C++ call on the same views."""
    timer = Timer(args.min_sample_ms * 1e6, args.warmup_ms * 1e6)
    table = posenc.CosSinTable(spec, DECODE_POSITION + 1, args.numerics)
    freqs = spec.frequencies(args.numerics)
    gen = torch.Generator().manual_seed(99)
    results = []
    kinds = [("torch", "float32"), ("torch", "bfloat16"), ("numpy", "float32")]
    for kind, dtype_name in kinds:
        q = (torch.rand(1, 32, HEAD_DIM, generator=gen) * 2 - 1).to(DTYPES[dtype_name])
        k = (torch.rand(1, 8, HEAD_DIM, generator=gen) * 2 - 1).to(DTYPES[dtype_name])
        positions = torch.tensor([DECODE_POSITION])
        if kind == "numpy":
            q, k, positions = q.numpy(), k.numpy(), positions.numpy()
        for src_name, src in (("table", table), ("frequencies", freqs), ("spec", spec)):
            label = f"overhead/{kind}/{dtype_name}/{src_name}"
            progress(f"{label}: preparing")
            numerics = args.numerics if src is spec else None
            python_call = lambda src=src, numerics=numerics: posenc.apply_rope_(  # noqa: E731
                q, k, positions, src, numerics=numerics)
            cpp_src = spec.frequencies(args.numerics) if src is spec else src
            # _time_apply's own cost per call is spread over `iterations` calls.
            cpp_iterations = 2000 if args.quick else 20000
            cpp_call = lambda cpp_src=cpp_src, it=cpp_iterations: _posenc._time_apply(  # noqa: E731
                q, k, positions, cpp_src, it)
            cpp_samples, py_samples, cpp_cpu, py_cpu = [], [], [], []
            n = timer.calibrate(python_call)
            for _ in range(3 if not args.quick else 1):
                cpp_call()
            for r in range(args.repetitions):
                progress(f"  {label}: repetition {r + 1}/{args.repetitions}")
                # Process CPU time too: on a loaded machine wall time includes time descheduled.
                c0 = time.process_time_ns()
                py_samples.append(Timer.sample(python_call, n))
                c1 = time.process_time_ns()
                cpp_samples.append(cpp_call())
                c2 = time.process_time_ns()
                py_cpu.append((c1 - c0) / n)
                cpp_cpu.append((c2 - c1) / cpp_iterations)
            py, cpp = stats(py_samples), stats(cpp_samples)
            py["calls_per_sample"] = n
            cpp["calls_per_sample"] = cpp_iterations
            py["cpu_median_ns"] = statistics.median(py_cpu)
            cpp["cpu_median_ns"] = statistics.median(cpp_cpu)
            overhead = py["median_ns"] - cpp["median_ns"]
            results.append({
                "kind": kind, "dtype": dtype_name, "source": src_name, "tokens": 1, "q_heads": 32,
                "k_heads": 8, "head_dim": HEAD_DIM, "python": py, "cpp": cpp,
                "overhead_ns": overhead, "overhead_cpu_ns": py["cpu_median_ns"] - cpp["cpu_median_ns"],
                "goal_ns": OVERHEAD_GOAL_NS,
                "goal_met": overhead <= OVERHEAD_GOAL_NS,
            })
    return results


def git_commit():
    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def goals(cases, overhead):
    prefill = {}
    for c in cases:
        if c["phase"] != "prefill":
            continue
        # The goal compares posenc in place with a table, one thread, against eager torch with its
        # default threads (what a user gets without asking).
        s = c["speedup"]["posenc/table/threads:1"]
        prefill[f'{c["case"]}/{c["dtype"]}'] = {
            "speedup": s, "goal": PREFILL_SPEEDUP_GOAL,
            "goal_met": all(v >= PREFILL_SPEEDUP_GOAL for v in s.values())}
    worst = max(o["overhead_ns"] for o in overhead) if overhead else None
    return {"prefill_speedup": prefill,
            "decode_overhead": {"worst_ns": worst, "goal_ns": OVERHEAD_GOAL_NS,
                                "goal_met": worst is not None and worst <= OVERHEAD_GOAL_NS}}


def fmt_ns(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} us"
    return f"{ns:.0f} ns"


def print_table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("|---|---|" + "---:|" * (len(head) - 2))
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    print()


def time_heads(cols):
    return [c.replace("/threads:", " t") for c in cols]


def time_cells(case, cols):
    return [f'{fmt_ns(t["median_ns"])} ({fmt_ns(t["min_ns"])}-{fmt_ns(t["max_ns"])})'
            for t in (case["timings"][col] for col in cols)]


def speedup_heads(posenc_cols, threads):
    return [f"{p.replace('posenc/', '').replace('/threads:', ' t')} vs torch t{n}"
            for p in posenc_cols for n in threads]


def speedup_cells(case, posenc_cols, threads):
    return [f'{case["speedup"][p][f"vs_torch/threads:{n}"]:.2f}x' for p in posenc_cols for n in threads]


def print_markdown(report):
    print(f'posenc {report["posenc_version"]} (commit {report["commit"]}), torch {report["torch"]["version"]} '
          f'(default threads {report["torch"]["default_threads"]}), numpy {report["numpy_version"]}, '
          f'python {report["python_version"]}, numerics {report["numerics"]}, '
          f'{report["repetitions"]} repetitions')
    print(f'load average before: {report["load_before"]}, after: {report["load_after"]}')
    print()
    threads = report["torch"]["timed_threads"]
    torch_cols = [f"torch/threads:{n}" for n in threads]
    posenc_cols = ["posenc/table/threads:1", "posenc/table/threads:2", "posenc/spec/threads:1",
                   "posenc/spec/threads:2"]
    print("Median time per call of q+k (min-max):")
    print()
    print_table(["case", "dtype"] + time_heads(torch_cols + posenc_cols),
                [[c["case"], c["dtype"]] + time_cells(c, torch_cols + posenc_cols)
                 for c in report["cases"]])
    print("Speedup of posenc over eager torch (ratio of the medians above):")
    print()
    print_table(["case", "dtype"] + speedup_heads(posenc_cols, threads),
                [[c["case"], c["dtype"]] + speedup_cells(c, posenc_cols, threads)
                 for c in report["cases"]])
    fused_cols = ["posenc/table/threads:1", "posenc/table/threads:2"]
    print("Fused RoPE + KV-cache append (q 32 heads, k and v 8, a vLLM cache), median time per call "
          "(min-max) and speedup over eager torch (rotation + reshape_and_cache):")
    print()
    print_table(["case", "dtype"] + time_heads(torch_cols + fused_cols) + speedup_heads(fused_cols, threads),
                [[c["case"], c["dtype"]] + time_cells(c, torch_cols + fused_cols)
                 + speedup_cells(c, fused_cols, threads) for c in report["fused"]])
    print("Decode overhead (q 32 heads + k 8 heads, 1 token): apply_rope_ from Python minus the C++ call:")
    print()
    print("| input | dtype | cos/sin from | Python call | C++ call | overhead | goal <= 5 us | "
          "overhead in CPU time |")
    print("|---|---|---|---:|---:|---:|---|---:|")
    for o in report["overhead"]:
        print(f'| {o["kind"]} | {o["dtype"]} | {o["source"]} | {fmt_ns(o["python"]["median_ns"])} | '
              f'{fmt_ns(o["cpp"]["median_ns"])} | {fmt_ns(o["overhead_ns"])} | '
              f'{"met" if o["goal_met"] else "missed"} | {fmt_ns(o["overhead_cpu_ns"])} |')
    print()
    g = report["goals"]
    for key, v in g["prefill_speedup"].items():
        vals = ", ".join(f"{k}: {s:.2f}x" for k, s in v["speedup"].items())
        print(f'goal prefill {key} posenc table t1 >= {v["goal"]:g}x ({vals}): '
              f'{"met" if v["goal_met"] else "missed"}')
    d = g["decode_overhead"]
    print(f'goal decode overhead <= {d["goal_ns"]:g} ns (worst {d["worst_ns"]:.0f} ns): '
          f'{"met" if d["goal_met"] else "missed"}')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    ap.add_argument("--quick", action="store_true",
                    help=f"a smoke run: {QUICK_PREFILL_TOKENS}-token prefill, 1 repetition, short samples")
    ap.add_argument("--repetitions", type=int, default=None, help="samples per variant (default 7; --quick 1)")
    ap.add_argument("--min-sample-ms", type=float, default=None,
                    help="a sample lasts at least this long (default 200; --quick 2)")
    ap.add_argument("--warmup-ms", type=float, default=None, help="warm-up per variant (default 100; --quick 5)")
    ap.add_argument("--numerics", default="hf", choices=["hf", "precise", "ggml"],
                    help="posenc's numerics (default hf: transformers' cos/sin)")
    args = ap.parse_args(argv)
    for name, full, quick in (("repetitions", 7, 1), ("min_sample_ms", 200.0, 2.0), ("warmup_ms", 100.0, 5.0)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.repetitions < 1:
        ap.error(f"--repetitions ({args.repetitions}) must be at least 1")
    if args.min_sample_ms <= 0:
        ap.error(f"--min-sample-ms ({args.min_sample_ms}) must be positive")
    if args.warmup_ms < 0:
        ap.error(f"--warmup-ms ({args.warmup_ms}) must not be negative")

    spec = posenc.RopeSpec.preset("llama-2-7b")
    default_threads = torch.get_num_threads()
    torch_threads = {"default": default_threads, "timed": sorted({default_threads, 1, 2})}
    load_before = list(os.getloadavg())
    progress(f"load average before: {load_before}")
    t0 = time.time()
    cases = rope_cases(args, spec, torch_threads)
    fused = fused_cases(args, spec, torch_threads)
    overhead = overhead_cases(args, spec)
    load_after = list(os.getloadavg())
    progress(f"load average after: {load_after} ({time.time() - t0:.0f} s)")
    report = {
        "bench": "python_bench", "quick": args.quick, "commit": git_commit(),
        "posenc_version": posenc.__version__, "python_version": platform.python_version(),
        "numpy_version": np.__version__,
        "torch": {"version": torch.__version__, "default_threads": default_threads,
                  "timed_threads": torch_threads["timed"]},
        "cpu_count": os.cpu_count(), "machine": platform.machine(), "numerics": args.numerics,
        "repetitions": args.repetitions, "min_sample_ms": args.min_sample_ms,
        "load_before": load_before, "load_after": load_after,
        "cases": cases, "fused": fused, "overhead": overhead, "goals": goals(cases, overhead),
    }
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
    else:
        print_markdown(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
