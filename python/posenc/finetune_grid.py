"""python3 -m posenc.finetune_grid: the fine-tuning experiment of docs/finetune.md, one command.

    python3 -m posenc.finetune_grid --out DIR [--models stories260K,austen-128d]
        [--methods none,linear,ntk,yarn,yarn-paper,control] [--steps 25,50,100,200,400]
        [--tokens-per-step 2048] [--lr 5e-4] [--warmup 20] [--seed 1] [--threads 1] [--jobs 2]
        [--max-tokens 8192] [--quick] [--plan]

For each model (trained context L) and method, `python3 -m posenc.finetune` fine-tunes at 4L on
Emma and Sense and Sensibility (the control: method none at L, with 4x the windows per step, so
every run sees the same tokens per step), and evaluates on Pride and Prejudice with posenc eval's
protocol at L, 2L, 4L and 8L (with the run's RoPE: factor 4 for the scaled methods) at step 0 and
every --eval-every steps (the greatest common divisor of --steps) up to the last. Each run writes
DIR/MODEL/METHOD.json (finetune's --json) and its model; a run whose JSON exists is skipped
(resumable). --jobs runs go at once (each on --threads threads): the runs are independent, so
two one-thread runs use two cores fully, where one two-thread run spends much of a second core
waiting and spinning (docs/finetune.md, "Speed"). Then DIR/results.json, DIR/MODEL.svg
(perplexity against steps, one panel per context) and DIR/tables.md (the tables of
docs/finetune.md).
"""
import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import time
from functools import reduce

from . import svg_plot

METHODS = ["none", "linear", "ntk", "yarn", "yarn-paper", "control"]
SCALED = {"linear", "ntk", "yarn", "yarn-paper"}


def _repo_root():
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.environ.get("POSENC_SOURCE_DIR"), os.getcwd(), here):
        while d and d != os.path.dirname(d):
            if os.path.isdir(os.path.join(d, "models", "austen-128d")) and os.path.isdir(os.path.join(d, "python")):
                return d
            d = os.path.dirname(d)
    return os.getcwd()


def _models(root, shared):
    return {
        "stories260K": os.path.join(shared, "models", "stories260K", "tinystories_260k_v1.bin"),
        "austen-128d": os.path.join(root, "models", "austen-128d", "austen_128d_f16.bin"),
    }


def _die(msg):
    print(f"posenc.finetune_grid: error: {msg}", file=sys.stderr)
    sys.exit(2)


def _int_list(flag, text):
    try:
        v = [int(x) for x in text.split(",")]
    except ValueError:
        _die(f"{flag} ({text}) must be a comma-separated list of integers")
    if not v or any(x < 1 for x in v) or v != sorted(set(v)):
        _die(f"{flag} ({text}) must list increasing positive integers")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m posenc.finetune_grid", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="results directory (runs found there are skipped)")
    p.add_argument("--models", default="stories260K,austen-128d")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--steps", default="25,50,100,200,400", help="evaluation steps (besides 0)")
    p.add_argument("--tokens-per-step", type=int, default=2048,
                   help="tokens per optimizer step: windows of 4L per step = this / 4L")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="threads per run (finetune --threads)")
    p.add_argument("--jobs", type=int, default=2, help="runs at once (default 2: one per core)")
    p.add_argument("--max-tokens", type=int, default=8192,
                   help="evaluation tokens per context (posenc eval --max-tokens)")
    p.add_argument("--shared", default=None, help="the shared directory (default: ../shared of the repository)")
    p.add_argument("--quick", action="store_true",
                   help="the test suite's version: stories260K, linear, yarn and control, 4 steps on "
                        "the first 30 KB of each novel, L = 64, 2 steps of 256 tokens")
    p.add_argument("--base-context", type=int, default=None,
                   help="L: the context the grid scales from (default: the model's trained context; "
                        "--quick: 64)")
    p.add_argument("--plan", action="store_true",
                   help="print the runs with their training and evaluation tokens, and exit")
    a = p.parse_args(argv)
    root = _repo_root()
    a.shared = a.shared or os.path.join(root, "..", "shared")
    models = _models(root, a.shared)
    if a.quick:
        a.models, a.methods, a.steps, a.max_tokens, a.warmup = "stories260K", "linear,yarn,control", "1,2", 1024, 1
        a.tokens_per_step, a.base_context = 256, a.base_context or 64
    a.models = a.models.split(",")
    a.methods = a.methods.split(",")
    for m in a.models:
        if m not in models:
            _die(f"--models: unknown model {m!r}; expected some of {', '.join(models)}")
        if not os.path.exists(models[m]):
            _die(f"--models {m}: {models[m]} does not exist")
    for m in a.methods:
        if m not in METHODS:
            _die(f"--methods: unknown method {m!r}; expected some of {', '.join(METHODS)}")
    a.steps = _int_list("--steps", a.steps)
    if a.base_context is not None and a.base_context < 2:
        _die(f"--base-context ({a.base_context}) must be at least 2")
    for flag in ("tokens_per_step", "threads", "jobs", "max_tokens"):
        if getattr(a, flag) < 1:
            _die(f"--{flag.replace('_', '-')} ({getattr(a, flag)}) must be at least 1")
    if a.warmup < 0 or a.warmup > a.steps[-1]:
        _die(f"--warmup ({a.warmup}) must be in [0, {a.steps[-1]}] (the last of --steps)")
    if not a.lr > 0:
        _die(f"--lr ({a.lr}) must be positive")
    a.model_paths = models
    return a


def _trained_context(path):
    with open(path, "rb") as f:
        head = f.read(64)
    n = int.from_bytes(head[1:5], "little")
    return int.from_bytes(head[5 + n + 8:5 + n + 12], "little")


# Tokens/s measured on this machine (2 cores shared with other jobs, load 4.9-9.3; one thread;
# docs/finetune.md, "Speed"; medians of 5), for --plan's estimate: training (finetune's step,
# fused attention, at the grid's ctx x batch) by (model, ctx), and evaluation (posenc eval's
# protocol by the C++ code, --max-tokens 8192) by (model, ctx). A finished run's own time
# replaces the estimate.
_TRAIN_RATES = {("stories260K", 2048): 3342, ("stories260K", 512): 6100,
                ("austen-128d", 1024): 2409, ("austen-128d", 256): 5713}
_EVAL_RATES = {("stories260K", 512): 49256, ("stories260K", 1024): 41723, ("stories260K", 2048): 27513,
               ("stories260K", 4096): 15333, ("austen-128d", 256): 46305, ("austen-128d", 512): 41436,
               ("austen-128d", 1024): 30931, ("austen-128d", 2048): 22977}
_START_SECONDS = 3.0  # interpreter, torch and the model, per run


def estimate_seconds(r, a):
    """(training, evaluation) seconds of run r at the measured rates, or None without a rate."""
    every = reduce(math.gcd, a.steps)
    points = a.steps[-1] // every + 1
    train = _TRAIN_RATES.get((r["model"], r["ctx"]))
    evals = [_EVAL_RATES.get((r["model"], k * r["L"])) for k in (1, 2, 4, 8)]
    if train is None or None in evals:
        return None
    tokens = a.steps[-1] * r["batch"] * r["ctx"]
    ev = sum(points * (a.max_tokens // (k * r["L"])) * k * r["L"] / rate
             for k, rate in zip((1, 2, 4, 8), evals))
    return tokens / train, ev


def _texts(a, out):
    d = os.path.join(a.shared, "data", "austen")
    names = {"train": ["emma.txt", "sensesensibility.txt"], "eval": "prideprejudice.txt"}
    if not a.quick:
        return [os.path.join(d, n) for n in names["train"]], os.path.join(d, names["eval"])
    td = os.path.join(out, "texts")
    os.makedirs(td, exist_ok=True)
    paths = []
    for n in names["train"] + [names["eval"]]:
        with open(os.path.join(d, n), "rb") as f:
            data = f.read(30000)
        with open(os.path.join(td, n), "wb") as f:
            f.write(data)
        paths.append(os.path.join(td, n))
    return paths[:2], paths[2]


def run_plan(a, out):
    train, held = _texts(a, out)
    runs = []
    every = reduce(math.gcd, a.steps)
    for model in a.models:
        src = a.model_paths[model]
        L = a.base_context or _trained_context(src)
        for method in a.methods:
            # The control sees the same tokens: 4x the windows of a quarter of the length.
            ctx = L if method == "control" else 4 * L
            batch = max(1, a.tokens_per_step // (4 * L)) * (4 if method == "control" else 1)
            runs.append({
                "model": model, "method": method, "source": src, "L": L, "ctx": ctx, "batch": batch,
                "json": os.path.join(out, model, method + ".json"),
                "bin": os.path.join(out, model, method + ".bin"),
                "args": ["--train", *train, "--ctx", str(ctx),
                         "--method", "none" if method == "control" else method,
                         *(["--factor", "4"] if method in SCALED else []),
                         "--steps", str(a.steps[-1]), "--batch", str(batch), "--lr", repr(a.lr),
                         "--warmup", str(a.warmup), "--seed", str(a.seed), "--threads", str(a.threads),
                         "--eval", held, "--eval-ctx", ",".join(str(L * k) for k in (1, 2, 4, 8)),
                         "--eval-every", str(every), "--eval-max-tokens", str(a.max_tokens), "--json"],
            })
    return runs


def run_one(r, out):
    os.makedirs(os.path.dirname(r["json"]), exist_ok=True)
    cmd = [sys.executable, "-m", "posenc.finetune", "--model", r["source"], "-o", r["bin"], *r["args"]]
    log = r["json"].replace(".json", ".log")
    t0 = time.monotonic()
    with open(log, "w") as lf:
        lf.write(" ".join(cmd) + "\n")
        lf.flush()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=lf, text=True)
    if p.returncode != 0:
        _die(f"{r['model']} {r['method']}: posenc.finetune exited with {p.returncode}; see {log}")
    summary = json.loads(p.stdout)
    summary["grid"] = {k: r[k] for k in ("model", "method", "L", "ctx", "batch")}
    summary["grid"]["wall_seconds"] = time.monotonic() - t0
    with open(r["json"] + ".tmp", "w") as f:
        json.dump(summary, f, indent=1)
    os.replace(r["json"] + ".tmp", r["json"])  # written last: its presence means the run is done
    return summary


def collect(runs, steps):
    """{model: {"L": L, "methods": {method: {"ctx": {k: {step: ppl}}, "tokens_per_second": ...}}}}"""
    res = {}
    for r in runs:
        if not os.path.exists(r["json"]):
            continue
        with open(r["json"]) as f:
            s = json.load(f)
        m = res.setdefault(r["model"], {"L": r["L"], "methods": {}})
        cell = {"ctx": {}, "tokens_per_second": s["tokens_per_second"], "train_seconds": s["train_seconds"],
                "batch": r["batch"], "train_ctx": r["ctx"], "final_loss": s["final_loss"],
                "wall_seconds": s["grid"]["wall_seconds"]}
        for e in s["evals"]:
            k = e["ctx"] // r["L"]
            cell["ctx"].setdefault(str(k), {})[str(e["step"])] = e["perplexity"]
        m["methods"][r["method"]] = cell
    return res


def _ppl(cell, k, step):
    return cell["ctx"].get(str(k), {}).get(str(step))


def _steps_to(cell, k, target, steps):
    """The first evaluated step (every --eval-every steps, not only the tabled ones) at which the
    perplexity at k x L is at most target."""
    evaluated = sorted(int(st) for st in cell["ctx"].get(str(k), {}))
    for st in evaluated:
        if st <= steps[-1] and _ppl(cell, k, st) <= target:
            return str(st)
    return f"> {steps[-1]}"


def tables(res, steps):
    out = []
    last = steps[-1]
    for model, m in res.items():
        L, methods = m["L"], m["methods"]
        out.append(f"### {model} (L = {L}, fine-tuned at {4 * L})\n")
        out.append(f"Perplexity on Pride and Prejudice at 4x = {4 * L} against steps:\n")
        out.append("| method | " + " | ".join(str(s) for s in [0] + steps) + " |")
        out.append("|---|" + "---:|" * (len(steps) + 1))
        for name, c in methods.items():
            out.append(f"| {name} | " + " | ".join(_f(_ppl(c, 4, s)) for s in [0] + steps) + " |")
        out.append(f"\nAfter {last} steps, every context:\n")
        out.append("| method | " + " | ".join(f"{k}x = {k * L}" for k in (1, 2, 4, 8)) + " | 8x / 4x | tokens/s |")
        out.append("|---|" + "---:|" * 6)
        for name, c in methods.items():
            p4, p8 = _ppl(c, 4, last), _ppl(c, 8, last)
            ratio = f"{p8 / p4:.2f}" if p4 and p8 else "-"
            out.append(f"| {name} | " + " | ".join(_f(_ppl(c, k, last)) for k in (1, 2, 4, 8))
                       + f" | {ratio} | {c['tokens_per_second']:,.0f} |")
        ctrl = methods.get("control")
        if ctrl:
            t4, t1 = _ppl(ctrl, 4, last), _ppl(ctrl, 1, last)
            out.append(f"\nSteps to reach the control's perplexity (control after {last} steps: "
                       f"{_f(t4)} at 4x, {_f(t1)} at 1x), evaluated at 4x (the first evaluated "
                       f"step that reaches it, not only the tabled ones); and at 8x after {last} steps:\n")
            out.append("| method | reaches control 4x (" + _f(t4) + ") | reaches control 1x (" + _f(t1)
                       + f") | 8x at step 0 | 8x after {last} |")
            out.append("|---|---:|---:|---:|---:|")
            for name, c in methods.items():
                if name == "control":
                    continue
                out.append(f"| {name} | {_steps_to(c, 4, t4, steps) if t4 else '-'} | "
                           f"{_steps_to(c, 4, t1, steps) if t1 else '-'} | {_f(_ppl(c, 8, 0))} | {_f(_ppl(c, 8, last))} |")
        pi = methods.get("linear")
        if pi and _ppl(pi, 4, last):
            # The paper's comparison (Table 1): the steps each method needs to reach what PI
            # reaches after the whole run, at the fine-tuned length and at twice it.
            out.append(f"\nSteps to reach PI's (linear's) perplexity after {last} steps (the paper's "
                       f"comparison; the first evaluated step at or below it; speed-up = {last} / steps):\n")
            out.append(f"| method | at 4x (PI: {_f(_ppl(pi, 4, last))}) | speed-up | "
                       f"at 8x (PI: {_f(_ppl(pi, 8, last))}) | speed-up |")
            out.append("|---|---:|---:|---:|---:|")
            for name, c in methods.items():
                if name == "control":
                    continue
                row = [name]
                for k in (4, 8):
                    st = _steps_to(c, k, _ppl(pi, k, last), steps)
                    row += [st, f"{last / int(st):.1f}x" if st.isdigit() and int(st) > 0 else "-"]
                out.append("| " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out) + "\n"


def _f(v):
    return "-" if v is None else f"{v:.2f}"


def figures(res, steps, out):
    paths = []
    for model, m in res.items():
        L = m["L"]
        panels = []
        for k in (1, 2, 4, 8):
            series = []
            for name, c in m["methods"].items():
                pts = c["ctx"].get(str(k), {})
                xs = [s for s in [0] + steps if str(s) in pts]
                series.append((name, xs, [pts[str(s)] for s in xs]))
            panels.append({"title": f"context {k * L} ({k}x)", "series": series})
        path = os.path.join(out, f"{model}.svg")
        svg_plot.write_panels(path, f"{model}: fine-tuned at {4 * L} on Emma + Sense and Sensibility",
                              panels, x_ticks=[0] + steps, subtitle=
                              f"perplexity on Pride and Prejudice (posenc eval's protocol) against steps; "
                              f"control: fine-tuned at {L}, same tokens per step")
        paths.append(path)
    return paths


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    out = a.out
    os.makedirs(out, exist_ok=True)
    runs = run_plan(a, out)
    if a.plan:
        every = reduce(math.gcd, a.steps)
        points = a.steps[-1] // every + 1
        total, known, durations = 0.0, True, []
        for r in runs:
            train = a.steps[-1] * r["batch"] * r["ctx"]
            ev = points * sum((a.max_tokens // (k * r["L"])) * k * r["L"] for k in (1, 2, 4, 8))
            if os.path.exists(r["json"]):
                with open(r["json"]) as f:
                    seconds = json.load(f)["grid"]["wall_seconds"]
                when = f"done in {seconds / 60:.1f} min"
            else:
                est = estimate_seconds(r, a)
                seconds = None if est is None else est[0] + est[1] + _START_SECONDS
                when = ("no measured rate for this shape" if est is None else
                        f"about {seconds / 60:.1f} min ({est[0] / 60:.1f} training, {est[1] / 60:.1f} evaluating)")
            known = known and seconds is not None
            total += seconds or 0.0
            if not os.path.exists(r["json"]):
                durations.append(seconds or 0.0)
            print(f"{r['model']} {r['method']}: ctx {r['ctx']} x batch {r['batch']}, {a.steps[-1]} steps: "
                  f"{train} tokens trained, {ev} tokens evaluated ({points} evaluations); {when}")
        workers = [0.0] * a.jobs  # the runs left, in order, each to the first free job
        for d in durations:
            workers[workers.index(min(workers))] += d
        print(f"whole grid: {total / 3600:.2f} h of runs" + ("" if known else " (runs without a rate not counted)")
              + f"; what is left takes about {max(workers) / 3600:.2f} h with --jobs {a.jobs}"
              + (f" (the rates are for --threads 1, this is --threads {a.threads})" if a.threads != 1 else "")
              + "; rates measured on this machine, docs/finetune.md \"Speed\"")
        return 0
    t0 = time.monotonic()

    def one(i, r):
        print(f"[{i + 1}/{len(runs)}] {r['model']} {r['method']}: ctx {r['ctx']} x batch {r['batch']} ...",
              file=sys.stderr, flush=True)
        s = run_one(r, out)
        print(f"[{i + 1}/{len(runs)}] {r['model']} {r['method']}: {s['grid']['wall_seconds']:.0f} s, "
              f"{s['tokens_per_second']:,.0f} tokens/s training, loss {s['first_loss']:.3f} -> "
              f"{s['final_loss']:.3f}", file=sys.stderr, flush=True)

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futures = []
        for i, r in enumerate(runs):
            if os.path.exists(r["json"]):
                print(f"[{i + 1}/{len(runs)}] {r['model']} {r['method']}: done already, skipped", file=sys.stderr)
            else:
                futures.append(pool.submit(one, i, r))
        for f in futures:
            f.result()  # a failed run's _die (SystemExit) surfaces here
    res = collect(runs, a.steps)
    meta = {"steps": a.steps, "tokens_per_step": a.tokens_per_step, "lr": a.lr, "warmup": a.warmup,
            "seed": a.seed, "threads": a.threads, "jobs": a.jobs, "max_tokens": a.max_tokens, "quick": a.quick,
            "seconds_this_invocation": time.monotonic() - t0,
            "loadavg": open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else None}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"settings": meta, "models": res}, f, indent=1)
    figs = figures(res, a.steps, out)
    with open(os.path.join(out, "tables.md"), "w") as f:
        f.write(tables(res, a.steps))
    print(f"wrote {os.path.join(out, 'results.json')}, {os.path.join(out, 'tables.md')}, {', '.join(figs)}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
