"""Rotation of torch tensors and numpy arrays: apply_rope, apply_rope_, rerotate_keys_, and the
cos/sin cache engines keep.

Shapes: [tokens, heads, head_dim]; [tokens, heads * head_dim] with head_size=; [batch, seq, heads,
head_dim] or [batch, heads, seq, head_dim] with positions [batch, seq] (or [seq] for every row;
seq_dim=1 or 2 when the shape alone cannot tell). Any strides with a contiguous last dim (q and
k may be views of one packed qkv tensor). dtypes: torch float32/float16/bfloat16 (float64 too,
rotated in double: what gradcheck needs), numpy float32/float16 and uint16 with
dtype="bfloat16". Positions int32 or int64. k may be None; q and k may have different head
counts. Nothing is copied: the in-place forms write the caller's memory.
"""
import numpy as np

from . import _posenc
from ._tensors import bf16_flag, empty_like, is_tensor, positions_arg, threads_arg, torch_module


def _needs_grad(q, k):
    if not is_tensor(q):
        return False
    torch = torch_module()
    return (q.requires_grad or (k is not None and k.requires_grad)) and torch.is_grad_enabled()


def _call(q, k, q_out, k_out, positions, spec, inverse, opts):
    numerics, seq_len, head_size, seq_dim, threads, bf16 = opts
    _posenc._apply(q, k, q_out, k_out, positions, spec, inverse, numerics, seq_len, head_size,
                   seq_dim, threads, bf16)


def _rotated(q, k, positions, spec, inverse, opts):
    q_out = empty_like(q)
    k_out = None if k is None else empty_like(k)
    _call(q, k, q_out, k_out, positions, spec, inverse, opts)
    return q_out, k_out


def _grad_rotated(g, positions, spec, inverse, opts):
    """The backward of a rotation is the opposite rotation of the gradient."""
    if g is None:
        return None
    if g.dim() > 0 and g.stride(-1) != 1:
        g = g.contiguous()
    out, _ = _rotated(g, None, positions, spec, not inverse, opts)
    return out


_functions = {}


def _autograd():
    """The torch.autograd.Functions, defined on first use so that numpy users need no torch."""
    if _functions:
        return _functions
    torch = torch_module()

    class Rope(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, positions, spec, inverse, opts):
            ctx.rope = (positions, spec, inverse, opts)
            q_out, k_out = _rotated(q, k, positions, spec, inverse, opts)
            return (q_out,) if k is None else (q_out, k_out)

        @staticmethod
        def backward(ctx, gq, gk=None):
            positions, spec, inverse, opts = ctx.rope
            return (_grad_rotated(gq, positions, spec, inverse, opts),
                    _grad_rotated(gk, positions, spec, inverse, opts), None, None, None, None)

    class RopeInplace(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, positions, spec, inverse, opts):
            ctx.rope = (positions, spec, inverse, opts)
            _call(q, k, None, None, positions, spec, inverse, opts)
            if k is None:
                ctx.mark_dirty(q)
                return (q,)
            ctx.mark_dirty(q, k)
            return q, k

        backward = Rope.backward

    _functions.update(rope=Rope, inplace=RopeInplace)
    return _functions


def _opts(numerics, seq_len, head_size, seq_dim, threads, dtype):
    return (numerics, seq_len, head_size, seq_dim, threads_arg(threads), bf16_flag(dtype))


def apply_rope(q, k, positions, spec, *, inverse=False, numerics=None, seq_len=None,
               head_size=None, seq_dim=None, threads=1, dtype=None):
    """Rotated copies of q and k: returns (q_rot, k_rot), k_rot None when k is None.

    spec: a RopeSpec (numerics default "precise"; seq_len default max(positions) + 1 for the
    methods that depend on it, as transformers' forward does), a Frequencies or a CosSinTable.
    inverse=True rotates back. Differentiable for torch tensors that require grad (the backward
    is the inverse rotation)."""
    positions = positions_arg(positions)
    opts = _opts(numerics, seq_len, head_size, seq_dim, threads, dtype)
    if _needs_grad(q, k):
        out = _autograd()["rope"].apply(q, k, positions, spec, inverse, opts)
        return (out[0], None) if k is None else out
    return _rotated(q, k, positions, spec, inverse, opts)


def apply_rope_(q, k, positions, spec, *, inverse=False, numerics=None, seq_len=None,
                head_size=None, seq_dim=None, threads=1, dtype=None):
    """apply_rope in place: q and k (and every view of their memory) are rotated, nothing is
    copied. Returns (q, k). Under autograd it is an in-place op as torch's are."""
    # Straight to _posenc._apply, without _opts/_call's tuple and frames: a third of this
    # wrapper's own per-call cost at decode (bench/python_bench.py measures the overhead).
    positions = positions_arg(positions)
    threads = threads_arg(threads)
    bf16 = bf16_flag(dtype)
    if _needs_grad(q, k):
        opts = (numerics, seq_len, head_size, seq_dim, threads, bf16)
        out = _autograd()["inplace"].apply(q, k, positions, spec, inverse, opts)
        return (out[0], None) if k is None else out
    _posenc._apply(q, k, None, None, positions, spec, inverse, numerics, seq_len, head_size, seq_dim,
                   threads, bf16)
    return q, k


def rerotate_keys_(k, positions, old, new, *, head_size=None, seq_dim=None, threads=1, dtype=None):
    """Re-rotates cached keys in place from the angles of `old` to those of `new` (both
    Frequencies, e.g. spec.frequencies("hf", seq_len=n) before and after a dynamic method's
    length grew): k <- R(new) R(old)^T k in one pass. Returns k."""
    for name, f in (("old", old), ("new", new)):
        if not isinstance(f, _posenc.Frequencies):
            raise TypeError(f"{name}: expected posenc.Frequencies (spec.frequencies(numerics, seq_len)), "
                            f"got {type(f).__name__}")
    _posenc._rerotate(k, positions_arg(positions), old, new, head_size, seq_dim,
                      threads_arg(threads), bf16_flag(dtype))
    return k


def cos_sin_cache(spec, max_positions, numerics="precise", dtype=None, seq_len=None):
    """The [max_positions, rotary_dim] cache of vLLM, FlashInfer and SGLang: row p holds
    attention_factor * cos(p w_i) for every pair i, then the sines. dtype: a torch dtype
    (default torch.float32 when torch is installed) or a numpy one; float32 entries are rounded
    once from the convention's value, float64 ones are the convention's value."""
    torch = torch_module()
    if dtype is None:
        try:
            import torch  # noqa: F811 (the default dtype needs it)
            dtype = torch.float32
        except ImportError:
            dtype = np.float32
    if isinstance(max_positions, bool) or not isinstance(max_positions, (int, np.integer)):
        raise TypeError(f"max_positions: expected an int, got {type(max_positions).__name__}")
    freqs = spec.frequencies(numerics, seq_len) if isinstance(spec, _posenc.RopeSpec) else spec
    if not isinstance(freqs, _posenc.Frequencies):
        raise TypeError(f"spec: expected a RopeSpec or Frequencies, got {type(spec).__name__}")
    if torch is not None and isinstance(dtype, torch.dtype):
        if dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            raise TypeError(f"dtype: {dtype} is not supported; expected a floating dtype")
        table = torch.from_numpy(_posenc._cos_sin_cache(freqs, int(max_positions), dtype == torch.float64))
        return table if dtype in (torch.float32, torch.float64) else table.to(dtype)
    np_dtype = np.dtype(dtype)
    if np_dtype not in (np.float32, np.float64, np.float16):
        raise TypeError(f"dtype: {np_dtype} is not supported; expected float16, float32 or float64")
    table = _posenc._cos_sin_cache(freqs, int(max_positions), np_dtype == np.float64)
    return table if np_dtype != np.float16 else table.astype(np.float16)
