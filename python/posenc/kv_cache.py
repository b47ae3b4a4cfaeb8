"""The fused RoPE + paged KV-cache append (the C++ posenc::rope_append_kv_cache): one call rotates
q in place, rotates k, and writes the rotated k and v of every token into a key and a value
cache, in one pass over k and v; the CPU analogue of vLLM's rotary_embedding + reshape_and_cache
and of FlashInfer's apply_rope + append_paged_kv_cache.

What lands in the cache is, bit for bit, apply_rope's k (rounded to k's dtype) and v, each then
converted to the cache's dtype: the cache tensors' own dtype (float32, float16, bfloat16), or
fp8 e4m3 bits in uint8 tensors (torch.float8_e4m3fn where torch has it), value / scale rounded
to nearest even and saturated to +-448. Bad input (a slot out of the cache, two tokens on one
slot, pages or positions that do not fit, shapes, dtypes, read-only outputs) raises ValueError or
TypeError naming the argument, before anything is written.
"""
import sys

from . import _posenc
from ._tensors import bf16_flag, positions_arg, threads_arg

_modules = sys.modules


def _requires_grad(*tensors):
    torch = _modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return None
    for name, t in tensors:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            return name
    return None


def rope_append_kv_cache_(q, k, v, key_cache, value_cache, positions, spec, *, slot_mapping=None,
                          layout="vllm", kv_indptr=None, kv_indices=None, kv_last_page_len=None,
                          batch_indices=None, kv_positions=None, k_scale=1.0, v_scale=1.0,
                          rotate=True, k_in_place=False, numerics=None, seq_len=None,
                          head_size=None, threads=1, dtype=None):
    """Rotates q in place (q may be None), rotates k and appends k and v to a paged KV cache.
    Returns (q, key_cache, value_cache).

    q [tokens, heads_q, head_dim], k and v [tokens, kv_heads, head_dim] (or 2-D [tokens,
    heads * head_dim] with head_size=; any strides with a contiguous last dim, e.g. views of one
    packed qkv tensor); positions [tokens] (or [axes, tokens] for an M-RoPE spec). spec: a
    RopeSpec, Frequencies or CosSinTable, as for apply_rope.

    layout="vllm": caches [num_blocks, block_size, kv_heads, head_dim] and slot_mapping [tokens]
    (slot = block * block_size + offset). layout="nhd" ([pages, page_size, kv_heads, head_dim])
    or "hnd" ([pages, kv_heads, page_size, head_dim]): FlashInfer's paged addressing, kv_indptr
    [batch + 1], kv_indices, kv_last_page_len [batch] (the cache after the append) and, per token,
    batch_indices and kv_positions (its position in its request's KV sequence).

    k_scale, v_scale: fp8 caches only (stored = value / scale; rounded to float32, the kernel's
    scale, as vLLM keeps them). rotate=False writes k as given
    (pre-RoPE caching; q must be None then); k_in_place=True also stores the rotated k back into
    k. Inference only: tensors that require grad are refused (run under torch.no_grad())."""
    grad = _requires_grad(("q", q), ("k", k), ("v", v))
    if grad is not None:
        raise ValueError(f"{grad} requires grad: rope_append_kv_cache_ writes a KV cache for "
                         "inference; call it under torch.no_grad() (apply_rope_ is differentiable)")
    if not isinstance(layout, str):
        raise TypeError(f"layout: expected a str (\"vllm\", \"nhd\" or \"hnd\"), got "
                        f"{type(layout).__name__}")
    for name, value in (("rotate", rotate), ("k_in_place", k_in_place)):
        if not isinstance(value, bool):
            raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    indices = [None if a is None else positions_arg(a)
               for a in (slot_mapping, kv_indptr, kv_indices, kv_last_page_len, batch_indices,
                         kv_positions)]
    _posenc._append_kv_cache(q, k, v, key_cache, value_cache, positions_arg(positions), spec,
                             layout, *indices, float(k_scale), float(v_scale), rotate, k_in_place,
                             numerics, seq_len, head_size, threads_arg(threads), bf16_flag(dtype))
    return q, key_cache, value_cache


def append_positions(append_indptr, kv_indptr, kv_last_page_len, page_size):
    """FlashInfer's get_batch_indices_positions: (batch_indices, kv_positions) of tokens appended
    at the end of each request, from append_indptr [batch + 1] (each request's new tokens) and the
    cache after the append (kv_indptr, kv_last_page_len, page_size). int32 numpy arrays."""
    return _posenc._append_positions(positions_arg(append_indptr), positions_arg(kv_indptr),
                                     positions_arg(kv_last_page_len), page_size)
