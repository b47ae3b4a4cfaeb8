#!/usr/bin/env python3
"""Runs `posenc bench --json` over every case and prints docs/benchmarks.md's results table.

Usage (from the repository root, after a release build):
    python3 bench/bench_table.py [--posenc build/release/cli/posenc] [--repetitions 5] [--runs 1]
        [--filter REGEX] [--threads 1,2] [--json-out run.json]

One table, one row per case: the median time of --repetitions samples, GB/s, the ratios to the
in-place stream, memcpy and the scalar loop measured in the same process, and for the fused cases
the speed-up over rotate-then-copy and the ratio to the fused call's own traffic streamed with no
arithmetic (ratio_to_append_stream). With --runs N > 1 `posenc bench` runs N times, one process
after another: each number is then the median of the N runs' medians, and a column gives the
range of ratio_to_stream over the runs (on a shared machine the cases larger than the L3 move
between runs more than within one). The header says what ran where: the commit, the SIMD target,
the load average (/proc/loadavg) before and after, and the command. Standard library only.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time


def load_average():
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def commit():
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    """The CPU's name with its family and model numbers: a guest's name alone ("AMD EPYC") does
    not tell a Zen 4 (family 25) from a Zen 5 (family 26)."""
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "cpu family", "model") and key not in fields:
                    fields[key] = value.strip()
                if not line.strip() and fields:
                    break  # the first processor's block is enough
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown"
    if "cpu family" in fields and "model" in fields:
        name += f" (CPU family {fields['cpu family']}, model {fields['model']})"
    return name


def fmt_time(seconds):
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e9:.0f} ns"


def fmt_ratio(value):
    # Two decimals, except below 0.05, where two significant digits keep a slow case (an ASan
    # build, a debug build) from printing as 0.00. GB/s too.
    if value is None:
        return "-"
    return f"{value:.2f}" if abs(value) >= 0.05 else f"{value:.2g}"


def table(records, ranges=None):
    """records: one dict per case; ranges: case name -> (min, max) of ratio_to_stream, or None."""
    head = ("| case | time | GB/s | ratio_to_stream | " +
            ("ratio_to_stream over the runs | " if ranges else "") +
            "ratio_to_memcpy | ratio_to_scalar | speedup_over_separate | ratio_to_append_stream | "
            "threads used |")
    lines = [head, "|---|" + "---:|" * (head.count("|") - 2)]
    for r in records:
        spread = ""
        if ranges:
            lo, hi = ranges[r["name"]]
            spread = f"{fmt_ratio(lo)}-{fmt_ratio(hi)} | "
        lines.append(
            f"| {r['name']} | {fmt_time(r['seconds_median'])} | {fmt_ratio(r['bytes_per_second'] / 1e9)} | "
            f"{fmt_ratio(r.get('ratio_to_stream'))} | {spread}{fmt_ratio(r.get('ratio_to_memcpy'))} | "
            f"{fmt_ratio(r.get('ratio_to_scalar'))} | "
            f"{fmt_ratio(r.get('speedup_over_separate'))} | "
            f"{fmt_ratio(r.get('ratio_to_append_stream'))} | {r.get('threads_used', '-')} |")
    return "\n".join(lines)


def median(values):
    v = sorted(values)
    m = len(v) // 2
    return v[m] if len(v) % 2 else 0.5 * (v[m - 1] + v[m])


def combine(runs):
    """The runs' records merged case by case: every number the median over the runs."""
    fields = ["seconds_median", "bytes_per_second", "ratio_to_stream", "ratio_to_memcpy",
              "ratio_to_scalar", "speedup_over_separate", "ratio_to_append_stream"]
    merged, ranges = [], {}
    for i, first in enumerate(runs[0]):
        same = [run[i] for run in runs]
        if any(r["name"] != first["name"] for r in same):
            sys.exit("bench_table: the runs listed different cases")
        out = dict(first)
        for f in fields:
            values = [r.get(f) for r in same]
            out[f] = None if any(v is None for v in values) else median(values)
        stream = [r["ratio_to_stream"] for r in same]
        ranges[first["name"]] = (min(stream), max(stream))
        merged.append(out)
    return merged, ranges


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--posenc", default="build/release/cli/posenc",
                        help="the posenc binary (default: %(default)s)")
    parser.add_argument("--repetitions", type=int, default=5,
                        help="samples per timing, each number is their median (default: 5)")
    parser.add_argument("--runs", type=int, default=1,
                        help="posenc bench processes, one after another; each number is the "
                        "median over them (default: 1)")
    parser.add_argument("--filter", default="", help="regular expression on case names")
    parser.add_argument("--threads", default="1,2", help="thread counts (default: 1,2)")
    parser.add_argument("--json-out", help="also write the raw records here")
    args = parser.parse_args()
    if args.repetitions < 1:
        parser.error(f"--repetitions ({args.repetitions}) must be at least 1")
    if args.runs < 1:
        parser.error(f"--runs ({args.runs}) must be at least 1")
    if not os.access(args.posenc, os.X_OK):
        parser.error(f"--posenc: {args.posenc} is not an executable (build first: "
                     "cmake --preset release && cmake --build build/release)")

    command = [args.posenc, "bench", "--json", "--repetitions", str(args.repetitions),
               "--threads", args.threads]
    if args.filter:
        command += ["--filter", args.filter]
    before = load_average()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    t0 = time.monotonic()
    runs = []
    for k in range(args.runs):
        if args.runs > 1:
            sys.stderr.write(f"bench_table: run {k + 1} of {args.runs}\n")
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stderr)
            sys.exit(f"bench_table: {' '.join(command)} exited with {run.returncode}")
        runs.append(json.loads(run.stdout))
    elapsed = time.monotonic() - t0
    after = load_average()
    records, ranges = combine(runs) if args.runs > 1 else (runs[0], None)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"command": command, "load_before": before, "load_after": after,
                       "records": records, "runs": runs}, f, indent=1)
    targets = sorted({r.get("target", "?") for r in records})
    print(f"Measured {started} at commit {commit()} on {os.cpu_count()} cores of {cpu_model()}, "
          f"kernels on {', '.join(targets)}; load average (1, 5, 15 min) {before} before and "
          f"{after} after the {elapsed:.0f} s " +
          ("run" if args.runs == 1 else f"of {args.runs} runs") + ". Command:\n")
    print("```sh")
    print("python3 bench/bench_table.py --repetitions " + str(args.repetitions) +
          (f" --runs {args.runs}" if args.runs > 1 else "") +
          (f" --filter '{args.filter}'" if args.filter else "") +
          (f" --threads {args.threads}" if args.threads != "1,2" else ""))
    print("# runs: " + " ".join(command))
    print("```\n")
    if args.runs > 1:
        print(f"Each number the median over {args.runs} runs of the median of "
              f"{args.repetitions} samples.\n")
    else:
        print(f"Medians of {args.repetitions} samples per number.\n")
    print(table(records, ranges))


if __name__ == "__main__":
    main()
