#!/usr/bin/python3
"""Times `posenc eval` for every method at ctx 512, 2048 and 8192, and `posenc generate` at
positions 512 and 4096, and writes both tables into docs/eval.md (between the eval_speed markers)
with /proc/loadavg before and after. Standard library only. A benchmark, not a test.

Usage (from the repository root, after a release build):
  /usr/bin/python3 bench/eval_speed.py [--posenc build/release/cli/posenc] [--threads 2]
      [--max-tokens 131072] [--gen-tokens 64] [--repetitions 3] [--docs docs/eval.md] [--no-write]

Per cell: tokens/s of wall time (eval's tokens_per_second) and tokens per CPU second (the
forward pass's CPU time of all threads, from POSENC_PROFILE=1), which depends much less on the
load of a shared machine; for generate, tokens/s of wall time and milliseconds of CPU per decoded
token (generate's own count, all threads). Methods at one context run in one process, one after another,
in an order rotated from one repetition to the next (so that no method always runs first or last);
every cell is the median of its repetitions, interleaved in time with the other methods' so that
a burst of load on a shared machine falls on all of them.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

METHODS = ["none", "linear", "ntk", "yarn", "yarn-paper", "dynamic", "dynamic-yarn", "llama3"]
CONTEXTS = [512, 2048, 8192]
POSITIONS = [512, 4096]
BEGIN, END = "<!-- eval_speed begin -->", "<!-- eval_speed end -->"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p


def rotated(rep):
    k = (3 * rep) % len(METHODS)
    return METHODS[k:] + METHODS[:k]


def medians(samples):
    """(method, key) -> list of tuples: the median of each field."""
    return {key: tuple(statistics.median(field) for field in zip(*v))
            for key, v in samples.items()}


def eval_speed(a, model, text):
    samples = {}  # (method, ctx) -> [(tokens/s wall, tokens per cpu s)]
    env = dict(os.environ, POSENC_PROFILE="1")
    for rep in range(a.repetitions):
        for ctx in CONTEXTS:
            p = run([a.posenc, "eval", "--model", model, "--text", text, "--ctx", str(ctx),
                     "--method", ",".join(rotated(rep)), "--threads", str(a.threads),
                     "--max-tokens", str(a.max_tokens), "--json"], env)
            cpu = [float(m.group(1)) for m in re.finditer(r"; total [0-9.]+/([0-9.]+)", p.stderr)]
            results = json.loads(p.stdout)["results"]
            assert len(cpu) == len(results), p.stderr
            for r, c in zip(results, cpu):
                samples.setdefault((r["method"], ctx), []).append(
                    (r["tokens_per_second"], r["tokens_run"] / c if c else 0))
            print(f"eval ctx {ctx} repetition {rep + 1}/{a.repetitions} done, load {loadavg()}",
                  file=sys.stderr)
    return medians(samples)


def generate_speed(a, model, text):
    samples = {}  # (method, position) -> [(tokens/s wall, tokens, ms of CPU a token)]
    for rep in range(a.repetitions):
        for pos in POSITIONS:
            for m in rotated(rep):
                cmd = [a.posenc, "generate", "--model", model, "--prompt-file", text,
                       "--prompt-tokens", str(pos - 1), "--tokens", str(a.gen_tokens),
                       "--method", m, "--threads", str(a.threads)]
                if m not in ("none", "dynamic-yarn"):
                    cmd += ["--factor", str(max(1.0, pos / 512))]
                p = run(cmd)
                g = re.search(r"(\d+) tokens generated .* \(([0-9.]+) tokens/s; ([0-9.]+) CPU s",
                              p.stderr)
                n = int(g.group(1))
                samples.setdefault((m, pos), []).append(
                    (float(g.group(2)), n, 1e3 * float(g.group(3)) / n if n else 0))
            print(f"generate at {pos} repetition {rep + 1}/{a.repetitions} done, "
                  f"load {loadavg()}", file=sys.stderr)
    return medians(samples)


def table(header, keys, cells, fmt):
    out = ["| method | " + " | ".join(header) + " |", "|---|" + "---:|" * len(header)]
    for m in METHODS:
        out.append(f"| {m} | " + " | ".join(fmt(cells[(m, k)]) for k in keys) + " |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--posenc", default="build/release/cli/posenc")
    ap.add_argument("--model", default="../shared/models/stories260K/tinystories_260k_v1.bin")
    ap.add_argument("--text", default="../shared/data/austen/prideprejudice.txt")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=131072)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--repetitions", type=int, default=3,
                    help="runs of every cell, interleaved; each cell is their median")
    ap.add_argument("--docs", default="docs/eval.md")
    ap.add_argument("--no-write", action="store_true", help="print the tables only")
    a = ap.parse_args()
    if a.repetitions < 1:
        ap.error(f"--repetitions ({a.repetitions}) must be at least 1")

    before, t0 = loadavg(), time.time()
    ev = eval_speed(a, a.model, a.text)
    mid = loadavg()
    gen = generate_speed(a, a.model, a.text)
    after = loadavg()
    lines = [f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))}, "
             f"`/usr/bin/python3 bench/eval_speed.py --threads {a.threads} --max-tokens "
             f"{a.max_tokens} --gen-tokens {a.gen_tokens} --repetitions {a.repetitions}`, "
             f"{os.cpu_count()} CPUs; /proc/loadavg "
             f"{before} before, {mid} after eval, {after} after generate.", "",
             f"`posenc eval`, tokens/s (wall) / tokens per CPU second (the forward pass, all "
             f"threads), medians of {a.repetitions} interleaved runs:", ""]
    lines += table([f"ctx {c}" for c in CONTEXTS], CONTEXTS, ev,
                   lambda v: f"{v[0]:,.0f} / {v[1]:,.0f}")
    for c in CONTEXTS:
        best = max(ev[(m, c)][0] for m in METHODS)
        worst = min(ev[(m, c)][0] for m in METHODS)
        best_cpu = max(ev[(m, c)][1] for m in METHODS)
        worst_cpu = min(ev[(m, c)][1] for m in METHODS)
        lines.append("")
        lines.append(f"ctx {c}: slowest method {worst / best:.2f} of the fastest (wall), "
                     f"{worst_cpu / best_cpu:.2f} (CPU).")
    lines += ["", f"`posenc generate`, {a.gen_tokens} tokens decoded one at a time after a "
              "prompt of BOS + position-1 tokens of the text (factor max(1, position / 512)), "
              "tokens/s (wall) / ms of CPU per token (the decoding loop, all threads), medians of "
              f"{a.repetitions} interleaved runs:", ""]
    lines += table([f"from position {p}" for p in POSITIONS], POSITIONS, gen,
                   lambda v: f"{v[0]:,.0f} / {v[2]:.2f}" +
                   ("" if v[1] == a.gen_tokens else f" ({v[1]} tokens)"))
    block = "\n".join(lines)
    print(block)
    if a.no_write:
        return
    with open(a.docs) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"{a.docs} has no {BEGIN} ... {END} block to replace")
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(a.docs, "w") as f:
        f.write(head + BEGIN + "\n" + block + "\n" + END + tail)


if __name__ == "__main__":
    main()
