#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_llama_model (fuzz/corpus/llama/): tiny llama2.ts model files
(format version 1, float32, and version 2, float16), written from the format description
(docs/eval.md, "The file format"; src/llama/model.cc). Run from fuzz/:

    python3 make_llama_corpus.py

Each seed is a complete, valid model, small enough that the fuzz target runs its forward pass:
the tokenizer's required pieces (<unk>, <s>, </s>, the 256 byte-fallback pieces) and a few merges.
"""
import os
import struct


def pieces():
    out = [(0.0, b"<unk>"), (0.0, b"<s>"), (0.0, b"</s>")]
    out += [(0.0, b"<0x%02X>" % i) for i in range(256)]
    # Merges with distinct scores: "\u2581" is the space character of the vocabulary.
    space = "\u2581".encode()
    for score, text in ((-1.0, space + b"a"), (-2.0, b"ab"), (-3.0, space + b"ab"), (-4.0, b"e")):
        out.append((score, text))
    return out


def model(version, dim=4, hidden=6, seq_len=16, layers=1, heads=2, kv_heads=1, tied=True):
    vocab = pieces()
    v = len(vocab)
    head = struct.pack("<Bi", version, 5) + b"llama"
    head += struct.pack("<7i", dim, hidden, seq_len, v, layers, heads, kv_heads)
    head += struct.pack("<B", 1 if tied else 0)
    head += b"\0" * (256 - len(head))
    body = b"".join(struct.pack("<fi", s, len(t)) + t for s, t in vocab)
    kv = kv_heads * (dim // heads)
    count = (v * dim + layers * dim + layers * dim * dim + 2 * layers * kv * dim +
             layers * dim * dim + layers * dim + 3 * layers * hidden * dim + dim +
             (0 if tied else v * dim))
    # Deterministic, varied weights in [-0.5, 0.5): a linear congruential sequence.
    x, values = 12345, []
    for _ in range(count):
        x = (1103515245 * x + 12345) % (1 << 31)
        values.append(x / (1 << 31) - 0.5)
    fmt = "<%d%s" % (count, "e" if version == 2 else "f")
    return head + body + struct.pack(fmt, *values)


def main():
    os.makedirs("corpus/llama", exist_ok=True)
    seeds = {
        "tiny-v1.bin": model(1),
        "tiny-v2-f16.bin": model(2),
        "tiny-v1-untied-gqa.bin": model(1, dim=8, hidden=4, heads=4, kv_heads=2, tied=False,
                                        layers=2),
    }
    for name, data in seeds.items():
        with open(os.path.join("corpus/llama", name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
