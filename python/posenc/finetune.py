"""python3 -m posenc.finetune: fine-tune a llama2.ts v1 model at a longer context with a RoPE
scaling method (the YaRN paper's recipe), and write the result as a model `posenc eval` and
`posenc generate` read, with the RoPE it was trained with in OUT.json beside OUT.bin.

    python3 -m posenc.finetune --model M.bin --train TEXT [TEXT ...] --ctx N --method METHOD
        [--factor S] [--attention-factor A] [--beta-fast B] [--beta-slow B] [--mscale M]
        [--mscale-all-dim M] [--extrapolation-factor E] [--truncate true|false]
        [--low-freq-factor F] [--high-freq-factor F] --steps K --batch B --lr LR --warmup W --seed SEED
        -o OUT.bin [--eval TEXT --eval-ctx N,N,... --eval-every K] [--threads T]
        [--attention fused|torch] [--json]

AdamW (betas 0.9, 0.95, no weight decay), learning rate warmed up linearly over W steps then
constant, gradients clipped to norm 1; each step trains on B windows of N tokens drawn from the
texts by the seed (first token BOS, as `posenc eval`'s windows). Progress on stderr, --json a
summary on stdout. docs/python.md describes every flag and the sidecar.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

from . import _posenc

SIDECAR_FORMAT = "posenc-rope-sidecar/1"
# The method parameters beyond the factor, as `posenc eval` names them: (key, flag, positive,
# boolean, read by) from include/posenc/core/method_params.h's table; alpha (ntk-alpha's) is not
# among the methods here.
METHOD_PARAMS = [row for row in _posenc._method_params() if row[0] != "alpha"]


class Refusal(Exception):
    """Bad input, found before training starts: the message names the flag and the value."""


def sidecar_path(model_path):
    """OUT.json for OUT.bin (the extension replaced, as eval and generate look for it)."""
    root, _ = os.path.splitext(os.fspath(model_path))
    return root + ".json"


def _positive_int(flag):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} ({text}) must be an integer") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{flag} ({text}) must be at least 1")
        return v
    return parse


def _number(flag, lo=None, lo_open=True):
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} ({text}) must be a number") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{flag} ({text}) must be finite")
        if lo is not None and (v <= lo if lo_open else v < lo):
            raise argparse.ArgumentTypeError(
                f"{flag} ({text}) must be {'greater than' if lo_open else 'at least'} {lo:g}")
        return v
    return parse


def _bool(flag):
    def parse(text):
        if text not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"{flag} ({text}) must be true or false")
        return text == "true"
    return parse


def _contexts(text):
    items = text.split(",")
    out = []
    for item in items:
        try:
            v = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--eval-ctx ({text}) must be integers separated by commas, e.g. 512,1024") from None
        if v < 2:
            raise argparse.ArgumentTypeError(f"--eval-ctx ({v}) must be at least 2")
        out.append(v)
    return out


def parser():
    p = argparse.ArgumentParser(
        prog="python3 -m posenc.finetune",
        description="Fine-tune a llama2.ts v1 model (e.g. stories260K) at context N with a RoPE "
                    "scaling method; writes OUT.bin and OUT.json (its RoPE, which posenc eval and "
                    "generate then use).")
    p.add_argument("--model", required=True, help="the model file (v1 format)")
    p.add_argument("--train", required=True, nargs="+", metavar="TEXT",
                   help="training texts (UTF-8), each tokenized whole by the model's tokenizer")
    p.add_argument("--ctx", required=True, type=int, help="window length N in tokens (at least 2)")
    p.add_argument("--method", required=True,
                   help="none, linear, ntk, yarn, yarn-paper, dynamic, dynamic-yarn, llama3 "
                        "(posenc eval --method's names)")
    p.add_argument("--factor", type=_number("--factor", 0.0),
                   help="scaling factor s (default max(1, N / trained context), as posenc eval; "
                        "not with none or dynamic-yarn)")
    for key, flag, positive, boolean, read_by in METHOD_PARAMS:
        kind = _bool(flag) if boolean else _number(flag, 0.0) if positive else _number(flag)
        p.add_argument(flag, dest=key, type=kind, metavar="true|false" if boolean else "NUMBER",
                       help=f"{read_by}: as posenc eval {flag} (default: the method's; refused by "
                            "a method that does not read it)")
    p.add_argument("--steps", required=True, type=_positive_int("--steps"), help="optimizer steps")
    p.add_argument("--batch", type=_positive_int("--batch"), default=1, help="windows per step (default 1)")
    p.add_argument("--lr", required=True, type=_number("--lr", 0.0), help="peak learning rate")
    p.add_argument("--warmup", type=int, default=0,
                   help="steps of linear warm-up from 0 to --lr (default 0: --lr from the first step)")
    p.add_argument("--seed", type=int, default=0, help="seed of the windows (default 0)")
    p.add_argument("--threads", type=_positive_int("--threads"), default=1,
                   help="torch threads (torch.set_num_threads; default 1)")
    p.add_argument("--attention", choices=["fused", "torch"], default="fused",
                   help="posenc's fused causal attention (default) or torch's matmul and softmax "
                        "(the reference; slower, more memory)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.bin",
                   help="the fine-tuned model; its RoPE goes to OUT.json beside it")
    p.add_argument("--eval", metavar="TEXT", help="evaluate on this text with posenc eval's protocol")
    p.add_argument("--eval-ctx", type=_contexts, help="contexts of --eval, e.g. 512,1024,2048")
    p.add_argument("--eval-every", type=_positive_int("--eval-every"),
                   help="evaluate every K steps (and before the first and after the last; "
                        "default: only before and after)")
    p.add_argument("--eval-max-tokens", type=_positive_int("--eval-max-tokens"), default=131072,
                   help="tokens of --eval used at most per context (posenc eval --max-tokens; default 131072)")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    return p


def method_params(args):
    """The method parameter flags given: {key: value} (method_params.h's keys)."""
    return {key: getattr(args, key) for key, *_ in METHOD_PARAMS if getattr(args, key) is not None}


def _text(value):
    return ("true" if value else "false") if isinstance(value, bool) else f"{value:g}"


def _read(flag, path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise Refusal(f"{flag}: cannot read {path}: {e.strerror}") from None


def check(args):
    """Every refusal that needs no model: numbers and flags that go together."""
    if args.ctx < 2:
        raise Refusal(f"--ctx ({args.ctx}) must be at least 2")
    if args.warmup < 0:
        raise Refusal(f"--warmup ({args.warmup}) must not be negative")
    if args.warmup > args.steps:
        raise Refusal(f"--warmup ({args.warmup}) must be at most --steps ({args.steps})")
    if args.seed < 0:
        raise Refusal(f"--seed ({args.seed}) must not be negative")
    eval_flags = [f for f, v in (("--eval-ctx", args.eval_ctx), ("--eval-every", args.eval_every)) if v is not None]
    if args.eval is None and eval_flags:
        raise Refusal(f"{', '.join(eval_flags)} without --eval: give the text to evaluate on")
    if args.eval is not None and args.eval_ctx is None:
        raise Refusal("--eval needs --eval-ctx (the contexts to evaluate at, e.g. 512,2048)")
    if os.path.abspath(args.output) == os.path.abspath(args.model):
        raise Refusal(f"-o ({args.output}) must not be the input --model")
    if not args.output.endswith(".bin"):
        raise Refusal(f"-o ({args.output}) must end in .bin: the RoPE sidecar goes to the same name with .json")


def run(args, log=sys.stderr):
    check(args)
    import torch
    from .llama import Llama

    from . import _blas  # torch and its BLAS, N threads each
    _blas.set_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    try:
        model = Llama.load(args.model)
    except (ValueError, OSError) as e:
        raise Refusal(f"--model: {e}") from None
    model.attention = args.attention
    L = model.cfg.seq_len
    factor = args.factor
    try:
        probe = _posenc._llama_rope_spec(model.cfg.dim, model.cfg.n_heads, L, model.cfg.rope_theta,
                                         args.method, 1.0)
    except ValueError as e:
        raise Refusal(f"--method: {e}") from None
    params = method_params(args)
    reads_factor = _posenc._reads_factor(probe)
    if factor is not None and not reads_factor:
        raise Refusal(f"--factor ({factor:g}) has no effect on --method {args.method} (it has no factor, "
                      "or derives its own): drop --factor")
    if factor is None and reads_factor:
        factor = max(1.0, args.ctx / L)
    try:  # the errors name the flags (--beta-fast); then the same through Llama.set_rope
        _posenc._llama_rope_spec(model.cfg.dim, model.cfg.n_heads, L, model.cfg.rope_theta,
                                 args.method, 1.0 if factor is None else factor, params,
                                 flag_names=True)
    except ValueError as e:
        raise Refusal(f"--method {args.method}: {e}") from None
    model.set_rope(args.method, factor=factor, **params)
    del probe

    tok = model.tokenizer
    texts = []
    for path in args.train:
        ids = tok.encode(_read("--train", path))
        if len(ids) < args.ctx + 1:
            raise Refusal(f"--train {path}: {len(ids)} tokens, shorter than one window of --ctx {args.ctx} "
                          f"(a window needs ctx + 1 = {args.ctx + 1} tokens: the inputs and the next token)")
        texts.append(np.asarray(ids, dtype=np.int64))
    eval_ids = None
    if args.eval is not None:
        eval_ids = np.asarray(tok.encode(_read("--eval", args.eval)), dtype=np.int32)
        need = max(args.eval_ctx)
        if len(eval_ids) < need:
            raise Refusal(f"--eval-ctx {need} needs {need} tokens for one window, but --eval "
                          f"{args.eval} has {len(eval_ids)} tokens")
        if args.eval_max_tokens < need:
            raise Refusal(f"--eval-max-tokens ({args.eval_max_tokens}) must be at least the largest "
                          f"--eval-ctx ({need})")

    # Windows: a text with probability proportional to its number of windows, then a start.
    starts = np.array([len(t) - args.ctx for t in texts], dtype=np.int64)  # starts per text
    weights = torch.tensor(starts, dtype=torch.float64)
    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)

    def windows():
        which = torch.multinomial(weights, args.batch, replacement=True, generator=gen).tolist()
        rows = []
        for t in which:
            s = int(torch.randint(0, int(starts[t]) + 1, (1,), generator=gen))
            rows.append(texts[t][s:s + args.ctx + 1])
        w = torch.from_numpy(np.stack(rows))
        x, y = w[:, :-1].clone(), w[:, 1:]
        x[:, 0] = tok.bos_id  # as eval's windows
        return x, y

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    evals = []

    def evaluate(step):
        if eval_ids is None:
            return
        cpp = model.cpp_model()
        for c in args.eval_ctx:
            r = model.perplexity(eval_ids, c, max_tokens=args.eval_max_tokens, threads=args.threads, cpp=cpp)
            evals.append({"step": step, "ctx": c, "perplexity": r["perplexity"], "nll": r["nll"],
                          "windows": r["windows"], "tokens_scored": r["tokens_scored"]})
            print(f"finetune: eval step {step} ctx {c}: ppl {r['perplexity']:.4f} "
                  f"({r['windows']} windows, {r['seconds']:.1f} s)", file=log, flush=True)

    print(f"finetune: {args.model} ({sum(p.numel() for p in model.parameters())} parameters), "
          f"{len(texts)} texts ({', '.join(str(len(t)) for t in texts)} tokens), ctx {args.ctx}, "
          f"--method {args.method}" + (f" --factor {factor:g}" if factor is not None else "")
          + "".join(f" {flag} {_text(params[key])}" for key, flag, *_ in METHOD_PARAMS if key in params)
          + f", {args.steps} steps x {args.batch} windows, {args.threads} threads", file=log, flush=True)
    evaluate(0)
    losses = []
    train_s = 0.0
    for step in range(1, args.steps + 1):
        lr = args.lr * min(1.0, step / args.warmup) if args.warmup else args.lr
        for g in opt.param_groups:
            g["lr"] = lr
        t0 = time.perf_counter()
        x, y = windows()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        dt = time.perf_counter() - t0
        train_s += dt
        losses.append(float(loss))
        if not math.isfinite(losses[-1]):
            raise RuntimeError(f"finetune: the loss at step {step} is {losses[-1]} (lr {lr:g}): lower --lr")
        rate = step * args.batch * args.ctx / train_s
        left = train_s / step * (args.steps - step)
        print(f"finetune: step {step}/{args.steps} loss {losses[-1]:.4f} lr {lr:.3g} grad norm {grad_norm:.3f} "
              f"{rate:.0f} tokens/s, {left:.0f} s left", file=log, flush=True)
        if args.eval_every and step % args.eval_every == 0 and step != args.steps:
            evaluate(step)
    evaluate(args.steps)

    model.save(args.output)
    sidecar = {
        "format": SIDECAR_FORMAT,
        "method": args.method,
        "factor": factor,
        **{key: params.get(key) for key, *_ in METHOD_PARAMS},
        "trained_context": args.ctx,
        "fine_tune": {"base_model": os.path.basename(args.model),
                      "train": [os.path.basename(t) for t in args.train], "steps": args.steps,
                      "batch": args.batch, "lr": args.lr, "warmup": args.warmup, "seed": args.seed,
                      "threads": args.threads},
    }
    with open(sidecar_path(args.output), "w") as f:
        f.write(json.dumps(sidecar, indent=2) + "\n")
    tokens = args.steps * args.batch * args.ctx
    return {
        "model": args.model, "output": args.output, "sidecar": sidecar_path(args.output),
        "train": args.train, "train_tokens": [len(t) for t in texts], "ctx": args.ctx,
        "method": args.method, "factor": factor, **{key: params.get(key) for key, *_ in METHOD_PARAMS},
        "steps": args.steps, "batch": args.batch, "lr": args.lr, "warmup": args.warmup,
        "seed": args.seed, "threads": args.threads, "tokens_trained": tokens,
        "train_seconds": train_s, "tokens_per_second": tokens / train_s if train_s > 0 else 0.0,
        "losses": losses, "first_loss": losses[0], "final_loss": losses[-1], "evals": evals,
    }


def main(argv=None):
    p = parser()
    args = p.parse_args(argv)
    try:
        summary = run(args)
    except Refusal as e:
        print(f"posenc.finetune: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary, indent=2, allow_nan=False if all(
            math.isfinite(e["perplexity"]) for e in summary["evals"]) else True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
