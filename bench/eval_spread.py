#!/usr/bin/python3
"""Measures the spread of `posenc eval`'s forward-pass time between methods: an interleaved A/B.

Usage (from the repository root, after a release build):
  /usr/bin/python3 bench/eval_spread.py [--posenc build/release/cli/posenc]
      [--methods none,yarn,dynamic,dynamic-yarn] [--contexts 512,2048,8192] [--rounds 6]
      [--threads 2] [--max-tokens 131072] [--text ../shared/data/austen/emma.txt]

bench/eval_speed.py's table cannot resolve a 10% difference on a shared machine: methods of
identical work spread by 10-20% there. This runs one process per method (POSENC_PROFILE=1, so the
forward pass's own wall and CPU seconds are read, not the process's), each round every context
and every method, the methods in an order rotated from round to round, and prints the median of
the rounds per cell with the slowest method's fraction of the fastest (wall and CPU), then each
method's time over the same round's time of the first method (which cancels the machine's drift
between rounds), and the load average before and after. Standard library only. A benchmark, not a
test.
"""
import argparse
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_speed import loadavg, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--posenc", default="build/release/cli/posenc")
    ap.add_argument("--model", default="../shared/models/stories260K/tinystories_260k_v1.bin")
    ap.add_argument("--text", default="../shared/data/austen/emma.txt")
    ap.add_argument("--methods", default="none,yarn,dynamic,dynamic-yarn")
    ap.add_argument("--contexts", default="512,2048,8192")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=131072)
    a = ap.parse_args()
    methods = [m for m in a.methods.split(",") if m]
    try:
        contexts = [int(c) for c in a.contexts.split(",") if c]
    except ValueError:
        ap.error(f"--contexts ({a.contexts!r}) must be a comma-separated list of integers")
    if a.rounds < 1:
        ap.error(f"--rounds ({a.rounds}) must be at least 1")
    if not methods or not contexts:
        ap.error("--methods and --contexts must each name at least one")

    env = dict(os.environ, POSENC_PROFILE="1")
    samples = {}  # (ctx, method) -> [(wall s, cpu s)]
    before, t0 = loadavg(), time.time()
    for r in range(a.rounds):
        order = methods[r % len(methods):] + methods[:r % len(methods)]
        for ctx in contexts:
            for m in order:
                p = run([a.posenc, "eval", "--model", a.model, "--text", a.text, "--ctx", str(ctx),
                         "--method", m, "--threads", str(a.threads), "--max-tokens",
                         str(a.max_tokens)], env)
                t = re.search(r"; total ([0-9.]+)/([0-9.]+)", p.stderr)
                if t is None:
                    sys.exit(f"no POSENC_PROFILE total in posenc eval's stderr:\n{p.stderr}")
                samples.setdefault((ctx, m), []).append((float(t.group(1)), float(t.group(2))))
            print(f"round {r + 1}/{a.rounds} ctx {ctx} done, load {loadavg()}", file=sys.stderr)
    after = loadavg()

    print(f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))}, `/usr/bin/python3 "
          f"bench/eval_spread.py --methods {','.join(methods)} --contexts "
          f"{','.join(map(str, contexts))} --rounds {a.rounds} --threads {a.threads} "
          f"--max-tokens {a.max_tokens}`, text {a.text}; /proc/loadavg {before} before, "
          f"{after} after.\n")
    print(f"Forward pass, wall s / CPU s (all threads), medians of {a.rounds} rounds:\n")
    print("| ctx | " + " | ".join(methods) + " | slowest / fastest (wall, CPU) |")
    print("|---|" + "---:|" * (len(methods) + 1))
    for ctx in contexts:
        med = {m: tuple(statistics.median(f) for f in zip(*samples[(ctx, m)])) for m in methods}
        wall = [v[0] for v in med.values()]
        cpu = [v[1] for v in med.values()]
        cells = " | ".join(f"{med[m][0]:.3f} / {med[m][1]:.3f}" for m in methods)
        print(f"| {ctx} | {cells} | {min(wall) / max(wall):.2f}, {min(cpu) / max(cpu):.2f} |")

    # The guest's speed drifts between minutes more than methods differ: a method's time over
    # the same round's time of the first method (seconds apart) cancels the drift.
    base = methods[0]
    print(f"\nForward pass wall time over the same round's {base}, median of {a.rounds} rounds "
          f"(each round's ratios in brackets):\n")
    print("| ctx | " + " | ".join(methods[1:]) + " | slowest / fastest |")
    print("|---|" + "---:|" * len(methods))
    for ctx in contexts:
        ratios = {m: [s[0] / b[0] for s, b in zip(samples[(ctx, m)], samples[(ctx, base)])]
                  for m in methods[1:]}
        med = {m: statistics.median(r) for m, r in ratios.items()}
        cells = " | ".join(f"{med[m]:.3f} [{', '.join(f'{x:.2f}' for x in ratios[m])}]"
                           for m in methods[1:])
        rel = [1.0] + list(med.values())
        print(f"| {ctx} | {cells} | {min(rel) / max(rel):.2f} |")


if __name__ == "__main__":
    main()
