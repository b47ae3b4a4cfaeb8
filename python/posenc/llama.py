"""A small Llama 2 in PyTorch whose q and k are rotated by posenc (posenc.apply_rope, through
autograd), reading and writing the llama2.ts v1 files `posenc eval` reads.

    from posenc.llama import LlamaConfig, Llama, load_tokenizer
    model = Llama.load("tinystories_260k_v1.bin")      # or Llama(LlamaConfig(...)): random init
    model.set_rope("yarn", factor=4)                    # or a posenc.RopeSpec (either layout)
    logits = model(tokens)                              # int64 [B, S] -> float32 [B, S, vocab]
    model.save("out.bin")
    tok = load_tokenizer("tinystories_260k_v1.bin")     # the C++ tokenizer `posenc eval` uses

The architecture is the C++ forward pass's (include/posenc/llama/llama.h): RMSNorm (eps 1e-5),
grouped-query attention, SwiGLU, output tied to the embedding (or a separate output matrix),
softmax scale softmax_scale_multiplier / sqrt(head_dim) and the attention factor in cos/sin,
both from posenc's Frequencies. `cpp_logits` runs the C++ forward pass on this model's weights,
`perplexity` `posenc eval`'s protocol (include/posenc/llama/perplexity.h).
"""
import dataclasses
import io
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from . import _posenc
from ._posenc import CosSinTable, RopeSpec
from .ops import apply_rope

_VERSION = 1
_F16_VERSION = 2  # byte 0 of a file whose weights are float16, else the same layout (docs/eval.md)
_DTYPES = {"float32": (_VERSION, "<f4"), "float16": (_F16_VERSION, "<f2")}
_HEADER_BYTES = 256
_NORM_EPS = 1e-5  # llama::kRmsNormEps
# Attention above this many scores (batch x heads x S x S) is recomputed in the backward pass
# instead of kept: batch 4 of 2048 would keep 1.3 GB of probabilities over stories260K's layers.
_CHECKPOINT_SCORES = 1 << 26


@dataclasses.dataclass
class LlamaConfig:
    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    seq_len: int  # the context the model was trained with (L)
    tied_output: bool = True
    rope_theta: float = 10000.0  # the v1 format stores none: llama2.c uses 10000

    def __post_init__(self):
        for name in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"LlamaConfig: {name} ({v!r}) must be a positive int")
        if self.dim % self.n_heads:
            raise ValueError(f"LlamaConfig: dim ({self.dim}) must be divisible by n_heads ({self.n_heads})")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"LlamaConfig: n_heads ({self.n_heads}) must be divisible by "
                             f"n_kv_heads ({self.n_kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"LlamaConfig: head_dim = dim / n_heads ({self.head_dim}) must be even for RoPE")

    @property
    def head_dim(self):
        return self.dim // self.n_heads


class Tokenizer:
    """The model file's tokenizer, run by the C++ code `posenc eval` uses (llama::Tokenizer):
    encode(text) gives the ids eval gives for the same bytes (no BOS)."""

    def __init__(self, cpp_model, pieces, scores):
        self._cpp = cpp_model
        self.pieces = pieces  # bytes per token id
        self.scores = scores  # float per token id

    def encode(self, text):
        """Token ids of text (str, encoded as UTF-8, or bytes as they are), no BOS."""
        if isinstance(text, str):
            text = text.encode("utf-8")
        if not isinstance(text, (bytes, bytearray)):
            raise TypeError(f"text: expected str or bytes, got {type(text).__name__}")
        return self._cpp.encode(bytes(text))

    def decode(self, ids):
        return self._cpp.decode([int(i) for i in ids]).decode("utf-8", errors="replace")

    @property
    def bos_id(self):
        return self._cpp.bos_id

    @property
    def eos_id(self):
        return self._cpp.eos_id

    @property
    def vocab_size(self):
        return len(self.pieces)


def _read_header(data, name):
    if len(data) < _HEADER_BYTES:
        raise ValueError(f"model file {name}: {len(data)} bytes, shorter than the 256-byte header")
    (type_len,) = struct.unpack_from("<i", data, 1)
    fields = struct.unpack_from("<7i", data, 5 + type_len)
    tied = data[5 + type_len + 28]
    dim, hidden, seq_len, vocab, layers, heads, kv_heads = fields
    return LlamaConfig(dim, hidden, layers, heads, kv_heads, vocab, seq_len, tied_output=tied == 1)


def _read_vocab(data, vocab_size):
    pieces, scores, at = [], [], _HEADER_BYTES
    for _ in range(vocab_size):
        score, length = struct.unpack_from("<fi", data, at)
        at += 8
        pieces.append(bytes(data[at:at + length]))
        scores.append(score)
        at += length
    return pieces, scores, at


def load_tokenizer(path):
    """The tokenizer of a v1 model file (it is stored in the file), as `posenc eval` runs it."""
    path = os.fspath(path)
    cpp = _posenc._LlamaModel.load(path)  # checks the whole file, errors name the byte offset
    with open(path, "rb") as f:
        data = f.read()
    pieces, scores, _ = _read_vocab(data, cpp.config["vocab_size"])
    return Tokenizer(cpp, pieces, scores)


def _rmsnorm(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + _NORM_EPS))


def _attention(q, k, v, scale):
    """Causal softmax(q k^T * scale) v over [B, heads, S, hd] tensors, by blocks of queries that
    read only the keys up to the block's end. Blocks keep each score tensor near 1 MiB floats:
    on this machine a larger tensor costs more in page faults (torch frees and maps it afresh
    each time) than its arithmetic, and the causal half is never computed (3x faster at 1024)."""
    b, h, s, _ = q.shape
    block = max(16, min(s, (1 << 18) // max(1, b * h * s)))
    out = []
    for i in range(0, s, block):
        j = min(s, i + block)
        scores = torch.matmul(q[:, :, i:j], k[:, :, :j].transpose(2, 3)) * scale
        mask = torch.ones(j - i, j, dtype=torch.bool, device=q.device).triu(i + 1)
        out.append(torch.matmul(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), v[:, :, :j]))
    return out[0] if len(out) == 1 else torch.cat(out, dim=2)


class _CausalAttention(torch.autograd.Function):
    """posenc's fused causal attention (include/posenc/llama/attention.h) with its backward pass:
    q [B, S, H, hd], k and v [B, S, KV, hd] (query head h reads kv head h // (H / KV)), float32
    or float64, head dim contiguous; returns [B, S, H, hd]. Saved for backward: q, k, v, the
    output and the log-sum-exp per query [B, H, S]; no S x S tensor is stored or formed."""

    @staticmethod
    def forward(ctx, q, k, v, scale, threads):
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
        b, s, h, _ = q.shape
        out = torch.empty(q.shape, dtype=q.dtype)
        lse = torch.empty((b, h, s), dtype=q.dtype)
        _posenc._causal_attention(q, k, v, out, lse, float(scale), threads)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale, ctx.threads = float(scale), threads
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dout = dout if dout.stride(-1) == 1 else dout.contiguous()
        dq = torch.empty(q.shape, dtype=q.dtype)
        dk = torch.empty(k.shape, dtype=k.dtype)
        dv = torch.empty(v.shape, dtype=v.dtype)
        _posenc._causal_attention_backward(q, k, v, out, dout, lse, dq, dk, dv, ctx.scale, ctx.threads)
        return dq, dk, dv, None, None


def causal_attention(q, k, v, scale, threads=None):
    """Causal softmax(q k^T * scale) v by posenc's fused kernel, through autograd: q [B, S, H, hd],
    k and v [B, S, KV, hd] with KV dividing H (grouped-query attention: head h reads kv head
    h // (H / KV)), float32 or float64; returns [B, S, H, hd]. threads: default torch's
    (torch.get_num_threads()); the result is the same bits on any number of threads."""
    return _CausalAttention.apply(q, k, v, scale, torch.get_num_threads() if threads is None else threads)


_ATTENTION = ("fused", "torch")


class _Block(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, kv = cfg.dim, cfg.n_kv_heads * cfg.head_dim
        self.attention_norm = torch.nn.Parameter(torch.ones(h))
        self.wq = torch.nn.Linear(h, h, bias=False)
        self.wk = torch.nn.Linear(h, kv, bias=False)
        self.wv = torch.nn.Linear(h, kv, bias=False)
        self.wo = torch.nn.Linear(h, h, bias=False)
        self.ffn_norm = torch.nn.Parameter(torch.ones(h))
        self.w1 = torch.nn.Linear(h, cfg.hidden_dim, bias=False)  # gate
        self.w2 = torch.nn.Linear(cfg.hidden_dim, h, bias=False)  # down
        self.w3 = torch.nn.Linear(h, cfg.hidden_dim, bias=False)  # up

    def forward(self, x, cfg, positions, rope, scale, threads, attention):
        b, s, _ = x.shape
        hn = _rmsnorm(x, self.attention_norm)
        q = self.wq(hn).view(b, s, cfg.n_heads, cfg.head_dim)
        k = self.wk(hn).view(b, s, cfg.n_kv_heads, cfg.head_dim)
        v = self.wv(hn).view(b, s, cfg.n_kv_heads, cfg.head_dim)
        q, k = apply_rope(q, k, positions, rope, seq_dim=1, threads=threads)
        if attention == "fused":
            a = causal_attention(q, k, v, scale)
            x = x + self.wo(a.reshape(b, s, cfg.dim))
            hn = _rmsnorm(x, self.ffn_norm)
            return x + self.w2(F.silu(self.w1(hn)) * self.w3(hn))
        group = cfg.n_heads // cfg.n_kv_heads
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if group > 1:  # query head h reads key/value head h // group, as the C++ pass does
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
        if torch.is_grad_enabled() and b * cfg.n_heads * s * s > _CHECKPOINT_SCORES:
            a = checkpoint(_attention, q, k, v, scale, use_reentrant=False)
        else:
            a = _attention(q, k, v, scale)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, cfg.dim))
        hn = _rmsnorm(x, self.ffn_norm)
        return x + self.w2(F.silu(self.w1(hn)) * self.w3(hn))


class Llama(torch.nn.Module):
    """Llama 2 (llama2.c's architecture) with posenc's RoPE. Llama(cfg) initialises the weights
    randomly (normal, std 0.02; the residual projections wo and w2 0.02 / sqrt(2 n_layers), as
    llama2.c's train.py), seeded by torch.manual_seed."""

    def __init__(self, cfg, tokenizer=None):
        super().__init__()
        if not isinstance(cfg, LlamaConfig):
            raise TypeError(f"cfg: expected a posenc.llama.LlamaConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.tok_embeddings = torch.nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = torch.nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.norm = torch.nn.Parameter(torch.ones(cfg.dim))
        self.output = None if cfg.tied_output else torch.nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.threads = 1  # posenc's rotation threads (torch's own: torch.set_num_threads)
        # "fused": posenc's causal attention kernel (causal_attention; on torch's thread count);
        # "torch": torch's matmul and softmax by query blocks (_attention), the tests' reference.
        self.attention = "fused"
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * cfg.n_layers) if name.endswith(("wo.weight", "w2.weight")) else 0.02
                torch.nn.init.normal_(p, mean=0.0, std=std)
        self.set_rope("none")

    # RoPE -------------------------------------------------------------------------------------
    def set_rope(self, spec_or_method, factor=None, attention_factor=None, numerics="precise", *,
                 beta_fast=None, beta_slow=None, mscale=None, mscale_all_dim=None,
                 extrapolation_factor=None, truncate=None, low_freq_factor=None,
                 high_freq_factor=None):
        """The RoPE of q and k: a method name ("none", "linear", "ntk", "yarn", "yarn-paper",
        "dynamic", "dynamic-yarn", "llama3", ...: `posenc eval --method`) with its factor
        (default 1) and parameters (None: the method's default; each is refused, ValueError, by a
        method that does not read it, as `posenc eval` refuses the flag of the same name):
        attention_factor (YaRN's, default 0.1 ln s + 1), beta_fast, beta_slow, mscale,
        mscale_all_dim, extrapolation_factor, truncate (yarn family), low_freq_factor,
        high_freq_factor (llama3). Built as `posenc eval` builds it for this model (interleaved
        pairs, base rope_theta, L = cfg.seq_len). Or a posenc.RopeSpec of either layout whose
        head_dim is the model's. Returns self."""
        params = {"attention_factor": attention_factor, "beta_fast": beta_fast,
                  "beta_slow": beta_slow, "mscale": mscale, "mscale_all_dim": mscale_all_dim,
                  "extrapolation_factor": extrapolation_factor, "truncate": truncate,
                  "low_freq_factor": low_freq_factor, "high_freq_factor": high_freq_factor}
        params = {k: v for k, v in params.items() if v is not None}
        if isinstance(spec_or_method, str):
            f = 1.0 if factor is None else factor
            if isinstance(f, bool) or not isinstance(f, (int, float)):
                raise TypeError(f"factor: expected a number, got {type(f).__name__}")
            spec = _posenc._llama_rope_spec(self.cfg.dim, self.cfg.n_heads, self.cfg.seq_len,
                                            float(self.cfg.rope_theta), spec_or_method, float(f),
                                            params)
            self.rope_settings = {"method": spec_or_method, "factor": factor, "params": params}
        elif isinstance(spec_or_method, RopeSpec):
            if factor is not None or params:
                given = ", ".join(["factor"] * (factor is not None) + list(params))
                raise ValueError(f"set_rope: {given} go with a method name; a RopeSpec carries its own")
            spec = spec_or_method
            if spec.head_dim != self.cfg.head_dim:
                raise ValueError(f"set_rope: the spec's head_dim ({spec.head_dim}) must equal the model's "
                                 f"({self.cfg.head_dim} = dim {self.cfg.dim} / {self.cfg.n_heads} heads)")
            self.rope_settings = None  # not expressible as eval's flags
        else:
            raise TypeError(f"set_rope: expected a method name or a posenc.RopeSpec, got {type(spec_or_method).__name__}")
        spec.frequencies(numerics)  # a bad numerics name fails here, not in forward
        self.rope_spec = spec
        self.numerics = numerics
        self._tables = {}
        return self

    def _rope_for(self, n):
        """(CosSinTable for positions 0 .. n-1, softmax scale) at sequence length n."""
        if n not in self._tables:
            seq_len = n if self.rope_spec.depends_on_seq_len else None
            table = CosSinTable(self.rope_spec, n, self.numerics, seq_len)
            scale = table.frequencies.softmax_scale_multiplier / math.sqrt(self.cfg.head_dim)
            if len(self._tables) > 8:
                self._tables.clear()
            self._tables[n] = (table, scale)
        return self._tables[n]

    # forward ----------------------------------------------------------------------------------
    def forward(self, tokens, positions=None):
        """tokens: int64 [B, S] (or [S]); positions: [S] or [B, S] (default 0 .. S-1). Returns
        float32 logits [B, S, vocab] ([S, vocab] for 1-D tokens)."""
        squeeze = tokens.dim() == 1
        if squeeze:
            tokens = tokens.unsqueeze(0)
        if tokens.dim() != 2:
            raise ValueError(f"tokens: expected shape [B, S] or [S], got {list(tokens.shape)}")
        if tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"tokens: expected an int64 or int32 tensor, got {tokens.dtype}")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.cfg.vocab_size):
            bad = int(tokens.min()) if int(tokens.min()) < 0 else int(tokens.max())
            raise ValueError(f"tokens: id {bad} is outside the vocabulary [0, {self.cfg.vocab_size})")
        s = tokens.shape[1]
        if positions is None:
            positions = torch.arange(s, dtype=torch.int64)
        elif not isinstance(positions, torch.Tensor):
            positions = torch.as_tensor(positions, dtype=torch.int64)
        n = int(positions.max()) + 1 if positions.numel() else 1
        if positions.numel() and int(positions.min()) < 0:
            raise ValueError(f"positions: must not be negative, got {int(positions.min())}")
        if self.attention not in _ATTENTION:
            raise ValueError(f"attention ({self.attention!r}) must be one of {', '.join(_ATTENTION)}")
        table, scale = self._rope_for(n)
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, self.cfg, positions, table, scale, self.threads, self.attention)
        x = _rmsnorm(x, self.norm)
        logits = x @ self.tok_embeddings.weight.t() if self.output is None else self.output(x)
        return logits[0] if squeeze else logits

    # files ------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path):
        """A v1 model file, or its float16 form (format version 2, widened exactly to float32);
        checked by the C++ loader first: its errors name the byte offset."""
        path = os.fspath(path)
        tok = load_tokenizer(path)
        with open(path, "rb") as f:
            data = f.read()
        cfg = _read_header(data, path)
        _, _, at = _read_vocab(data, cfg.vocab_size)
        with torch.random.fork_rng():
            model = cls(cfg, tokenizer=tok)
        stored = "<f2" if data[0] == _F16_VERSION else "<f4"
        w = np.frombuffer(data, dtype=stored, offset=at).astype("<f4")
        h, hid, L = cfg.dim, cfg.hidden_dim, cfg.n_layers
        kv = cfg.n_kv_heads * cfg.head_dim

        def take(*shape):
            nonlocal w
            n = int(np.prod(shape))
            t, w = torch.from_numpy(w[:n].reshape(shape).copy()), w[n:]
            return t

        with torch.no_grad():
            model.tok_embeddings.weight.copy_(take(cfg.vocab_size, h))
            for name, shape in (("attention_norm", (h,)), ("wq", (h, h)), ("wk", (kv, h)), ("wv", (kv, h)),
                                ("wo", (h, h)), ("ffn_norm", (h,)), ("w1", (hid, h)), ("w3", (hid, h)),
                                ("w2", (h, hid))):
                stacked = take(L, *shape)  # the file stores each tensor for all layers in turn
                for i, layer in enumerate(model.layers):
                    p = getattr(layer, name)
                    (p if isinstance(p, torch.nn.Parameter) else p.weight).copy_(stacked[i])
            model.norm.copy_(take(h))
            if model.output is not None:
                model.output.weight.copy_(take(cfg.vocab_size, h))
        assert w.size == 0  # the C++ loader checked the size
        return model

    def to_bytes(self, dtype="float32"):
        """The file's bytes (what save writes): format version 1 with float32 weights, or with
        dtype="float16" version 2, the same layout with the weights rounded to float16 (nearest
        even); both are what `posenc eval` reads."""
        if dtype not in _DTYPES:
            raise ValueError(f"dtype ({dtype!r}) must be \"float32\" or \"float16\": the weight types "
                             "of the model files `posenc eval` reads (format versions 1 and 2)")
        version, stored = _DTYPES[dtype]
        if self.tokenizer is None:
            raise ValueError("save: the model has no tokenizer (its vocabulary goes into the file): "
                             "pass Llama(cfg, tokenizer=load_tokenizer(path)) or set model.tokenizer")
        cfg = self.cfg
        if self.tokenizer.vocab_size != cfg.vocab_size:
            raise ValueError(f"save: the tokenizer has {self.tokenizer.vocab_size} pieces, the model "
                             f"vocab_size {cfg.vocab_size}")
        out = io.BytesIO()
        header = struct.pack("<Bi5s7iB", version, 5, b"llama", cfg.dim, cfg.hidden_dim, cfg.seq_len,
                             cfg.vocab_size, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads,
                             1 if cfg.tied_output else 0)
        out.write(header + bytes(_HEADER_BYTES - len(header)))
        for piece, score in zip(self.tokenizer.pieces, self.tokenizer.scores):
            out.write(struct.pack("<fi", score, len(piece)) + piece)

        def put(t):
            w = t.detach().to(torch.float32).contiguous().numpy()
            if stored == "<f2" and (not np.all(np.isfinite(w)) or np.abs(w).max(initial=0) > 65504):
                raise ValueError("save: a weight is not finite or beyond float16's range (65504); "
                                 "save as float32")
            out.write(w.astype(stored).tobytes())

        put(self.tok_embeddings.weight)
        for name in ("attention_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w3", "w2"):
            for layer in self.layers:
                p = getattr(layer, name)
                put(p if isinstance(p, torch.nn.Parameter) else p.weight)
        put(self.norm)
        if self.output is not None:
            put(self.output.weight)
        return out.getvalue()

    def save(self, path, dtype="float32"):
        """Writes the model file `posenc eval` and `posenc generate` read (dtype: see to_bytes)."""
        data = self.to_bytes(dtype)
        with open(os.fspath(path), "wb") as f:
            f.write(data)

    # the C++ implementation on these weights ------------------------------------------------
    def cpp_model(self):
        """This model's weights in the C++ llama::Model (parsed from to_bytes())."""
        return _posenc._LlamaModel.parse(self.to_bytes(), "<posenc.llama model>")

    def _cpp_spec(self, cpp):
        if self.rope_settings is None:
            return self.rope_spec
        r = self.rope_settings
        return cpp.rope_spec(r["method"], 1.0 if r["factor"] is None else float(r["factor"]),
                             r["params"])

    def cpp_logits(self, tokens, threads=1, cpp=None):
        """The C++ forward pass of `posenc eval` (llama::Session, positions 0 .. n-1, this
        model's RoPE): numpy float32 [n, vocab] for 1-D tokens."""
        cpp = cpp or self.cpp_model()
        ids = np.asarray(tokens, dtype=np.int32)
        return cpp.logits(ids, self._cpp_spec(cpp), self.numerics, threads)

    def perplexity(self, tokens, ctx, max_tokens=131072, threads=1, cpp=None):
        """`posenc eval`'s protocol (non-overlapping windows, first token BOS, second half
        scored) on these weights with this RoPE, by the C++ code: a dict with perplexity, nll,
        windows, tokens_scored, ..."""
        cpp = cpp or self.cpp_model()
        ids = np.asarray(tokens, dtype=np.int32)
        return cpp.perplexity(ids, self._cpp_spec(cpp), int(ctx), int(max_tokens), 0, threads, 64,
                              self.numerics)
