"""Train a small Llama from scratch on text files and save it as a llama2.ts v1/v2 model file.

    python3 -m posenc.pretrain --train A.txt [B.txt ...] --tokenizer M.bin -o OUT.bin
        [--heldout C.txt] [--dim 128 --layers 4 --heads 4 --kv-heads 2 --hidden 344 --ctx 256]
        [--steps 2000 --batch 16 --lr 3e-3 --warmup 100 --seed 1 --threads 2] [--dtype float16]
        [--max-tokens N] [--json]

The model is posenc.llama's Llama (RMSNorm, grouped-query attention, SwiGLU, output tied to the
embedding; RoPE base 10000, interleaved pairs); the vocabulary is copied from --tokenizer (a v1
file: stories260K's 512 pieces). Each step draws --batch windows of --ctx + 1 tokens from the
training texts (a text chosen in proportion to its length, then a start; by the seed), replaces
the window's first token by BOS as `posenc eval` does, and minimises the next-token loss over
every position: AdamW (0.9, 0.95), no weight decay, linear warm-up, cosine decay to lr / 10,
gradients clipped at 1. Deterministic for a seed and a thread count. docs/finetune.md.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np


def _die(msg):
    print(f"posenc.pretrain: error: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m posenc.pretrain", description=__doc__.splitlines()[0])
    p.add_argument("--train", nargs="+", required=True, help="training text files (UTF-8)")
    p.add_argument("--heldout", help="text whose perplexity at --ctx is reported (posenc eval's protocol)")
    p.add_argument("--tokenizer", required=True, help="v1 model file whose vocabulary the new model uses")
    p.add_argument("-o", "--output", required=True, help="model file to write")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--hidden", type=int, default=344)
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtype", choices=["float16", "float32"], default="float16",
                   help="weight type of the file (float16: format version 2)")
    p.add_argument("--max-tokens", type=int, default=131072,
                   help="held-out tokens evaluated (windows of --ctx, as posenc eval --max-tokens)")
    p.add_argument("--eval-every", type=int, default=0, help="held-out perplexity every K steps (0: at the end)")
    p.add_argument("--attention", choices=["fused", "torch"], default="fused",
                   help="posenc's fused causal attention (default) or torch's (the reference)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    a = p.parse_args(argv)
    for name in ("dim", "layers", "heads", "kv_heads", "hidden", "steps", "batch", "threads", "max_tokens"):
        if getattr(a, name) < 1:
            _die(f"--{name.replace('_', '-')} ({getattr(a, name)}) must be at least 1")
    if a.ctx < 2:
        _die(f"--ctx ({a.ctx}) must be at least 2")
    if a.warmup < 0 or a.eval_every < 0:
        _die(f"--warmup ({a.warmup}) and --eval-every ({a.eval_every}) must not be negative")
    if not a.lr > 0:
        _die(f"--lr ({a.lr}) must be positive")
    if a.dim % a.heads:
        _die(f"--dim ({a.dim}) must be divisible by --heads ({a.heads})")
    if a.heads % a.kv_heads:
        _die(f"--heads ({a.heads}) must be divisible by --kv-heads ({a.kv_heads})")
    if (a.dim // a.heads) % 2:
        _die(f"head dim = --dim / --heads ({a.dim // a.heads}) must be even for RoPE")
    return a


def lr_at(step, a):
    """Learning rate of step `step` (0-based): linear warm-up, then cosine to lr / 10."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def heldout_perplexity(model, tokens, ctx, max_tokens, threads):
    """posenc eval's protocol on the model's weights (posenc.llama's C++ perplexity)."""
    return model.perplexity(tokens, ctx, max_tokens=max_tokens, threads=threads)["perplexity"]


_F16_VERSION = 2  # byte 0 of a model file whose weights are float16 (docs/eval.md)


def _weights_offset(data):
    (type_len,) = struct.unpack_from("<i", data, 1)
    (vocab,) = struct.unpack_from("<i", data, 5 + type_len + 12)
    at = 256
    for _ in range(vocab):
        at += 8 + struct.unpack_from("<i", data, at + 4)[0]
    return at


def to_float16_bytes(v1):
    """A v1 file's bytes (float32 weights) as format version 2: the same header and vocabulary,
    the weights rounded to float16 (nearest even), byte 0 = 2."""
    at = _weights_offset(v1)
    w = np.frombuffer(v1, dtype="<f4", offset=at)
    if not np.all(np.isfinite(w)) or np.abs(w).max(initial=0) > 65504:
        raise ValueError("float16: a weight is not finite or beyond float16's range (65504); save as float32")
    return bytes([_F16_VERSION]) + bytes(v1[1:at]) + w.astype("<f2").tobytes()


def to_float32_bytes(data):
    """Format version 2 bytes widened to version 1 (exactly); version 1 bytes as they are."""
    if data[:1] != bytes([_F16_VERSION]):
        return bytes(data)
    at = _weights_offset(data)
    w = np.frombuffer(data, dtype="<f2", offset=at).astype("<f4")
    return b"\x01" + bytes(data[1:at]) + w.tobytes()


def save_model(model, path, dtype="float16"):
    """model.save (kept for callers of this module; posenc.llama writes both versions)."""
    model.save(path, dtype)


def load_model(path):
    """posenc.llama.Llama.load, which reads both versions."""
    from posenc.llama import Llama
    return Llama.load(path)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    from posenc.llama import Llama, LlamaConfig, load_tokenizer

    from . import _blas  # torch and its BLAS, N threads each
    _blas.set_threads(a.threads)
    torch.manual_seed(a.seed)
    tok = load_tokenizer(a.tokenizer)
    texts = []
    for path in a.train:
        try:
            with open(path, encoding="utf-8") as f:
                ids = tok.encode(f.read())
        except OSError as e:
            _die(f"--train {path}: {e.strerror}")
        if len(ids) < a.ctx + 1:
            _die(f"--train {path}: {len(ids)} tokens, shorter than one window of --ctx + 1 ({a.ctx + 1})")
        texts.append(torch.tensor(ids, dtype=torch.int64))
    held = None
    if a.heldout:
        try:
            with open(a.heldout, encoding="utf-8") as f:
                held = tok.encode(f.read())
        except OSError as e:
            _die(f"--heldout {a.heldout}: {e.strerror}")
    cfg = LlamaConfig(dim=a.dim, hidden_dim=a.hidden, n_layers=a.layers, n_heads=a.heads,
                      n_kv_heads=a.kv_heads, vocab_size=tok.vocab_size, seq_len=a.ctx)
    torch.manual_seed(a.seed)  # Llama(cfg) draws its initial weights from torch's generator
    model = Llama(cfg, tokenizer=tok)
    model.threads = 1
    model.attention = a.attention
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(a.seed)
    sizes = torch.tensor([len(t) - a.ctx for t in texts], dtype=torch.float64)
    bos = tok.bos_id
    history, t0, last = [], time.monotonic(), 0.0
    evals = []
    for step in range(a.steps):
        which = torch.multinomial(sizes, a.batch, replacement=True, generator=gen)
        rows = []
        for i in which.tolist():
            o = int(torch.randint(0, len(texts[i]) - a.ctx, (1,), generator=gen))
            rows.append(texts[i][o : o + a.ctx + 1])
        w = torch.stack(rows)
        x, y = w[:, :-1].clone(), w[:, 1:]
        x[:, 0] = bos
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        history.append(float(loss))
        now = time.monotonic()
        if now - last > 10 or step + 1 == a.steps:
            last = now
            rate = (step + 1) * a.batch * a.ctx / (now - t0)
            left = (a.steps - step - 1) * (now - t0) / (step + 1)
            print(f"step {step + 1}/{a.steps} loss {float(loss):.4f} lr {lr_at(step, a):.2e} "
                  f"{rate:,.0f} tokens/s, {left:.0f} s left", file=sys.stderr, flush=True)
        if held is not None and a.eval_every and (step + 1) % a.eval_every == 0 and step + 1 < a.steps:
            model.eval()
            ppl = heldout_perplexity(model, held, a.ctx, a.max_tokens, a.threads)
            model.train()
            evals.append({"step": step + 1, "perplexity": ppl})
            print(f"step {step + 1}: held-out perplexity at {a.ctx}: {ppl:.3f}", file=sys.stderr, flush=True)
    seconds = time.monotonic() - t0
    save_model(model, a.output, a.dtype)
    result = {
        "output": a.output, "dtype": a.dtype, "bytes": os.path.getsize(a.output),
        "config": {"dim": a.dim, "hidden": a.hidden, "layers": a.layers, "heads": a.heads,
                   "kv_heads": a.kv_heads, "vocab": tok.vocab_size, "ctx": a.ctx},
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": a.steps, "batch": a.batch, "lr": a.lr, "warmup": a.warmup, "seed": a.seed,
        "threads": a.threads, "train_tokens": sum(len(t) for t in texts),
        "tokens_seen": a.steps * a.batch * a.ctx, "seconds": seconds,
        "tokens_per_second": a.steps * a.batch * a.ctx / seconds,
        "first_loss": history[0], "final_loss": sum(history[-20:]) / len(history[-20:]),
        "losses": history,
    }
    if held is not None:
        model.eval()
        # The file's weights (float16 rounded) are what posenc eval reads: score those.
        saved = load_model(a.output)
        evals.append({"step": a.steps, "perplexity": heldout_perplexity(saved, held, a.ctx, a.max_tokens, a.threads)})
        result["heldout_perplexity"] = evals
        print(f"held-out perplexity at {a.ctx} ({a.heldout}, the saved {a.dtype} weights): "
              f"{evals[-1]['perplexity']:.3f}", file=sys.stderr)
    print(f"wrote {a.output} ({result['bytes']:,} bytes, {result['parameters']:,} parameters) after "
          f"{seconds:.0f} s, {result['tokens_per_second']:,.0f} tokens/s", file=sys.stderr)
    if a.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
