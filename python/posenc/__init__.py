"""posenc: transformer positional encodings (RoPE and its context extensions) for Python.

The C++ library (the posenc command's) behind a PyTorch-style API:

    spec = posenc.RopeSpec.from_hf_config("Llama-3.1-8B/config.json")  # or a dict, .from_gguf, .preset
    spec.frequencies("hf").inv_freq            # numpy float64, transformers' float32 values
    posenc.apply_rope_(q, k, positions, spec)   # rotate q and k in place (torch or numpy)
    q2, k2 = posenc.apply_rope(q, k, positions, spec)        # new tensors; differentiable
    rotary = posenc.RotaryEmbedding(config)     # drop-in for transformers' LlamaRotaryEmbedding
    posenc.rope_append_kv_cache_(q, k, v, key_cache, value_cache, positions, spec,
                                 slot_mapping=slots)   # fused RoPE + paged KV-cache append

Numerics: "precise" (float64 formulas, exactly rounded), "hf" (what transformers computes with
torch's float32 ops, bit for bit) or "ggml" (llama.cpp's CPU arithmetic). Bad input raises
ValueError or TypeError naming the argument, its value and what was expected.
"""
from ._posenc import __version__, CosSinTable, Frequencies
from ._posenc import RopeSpec as _RopeSpec
from .kv_cache import append_positions, rope_append_kv_cache_
from .ops import apply_rope, apply_rope_, cos_sin_cache, rerotate_keys_
from .spec import RopeSpec, compare, doctor, mrope_positions, torch_capability


def __getattr__(name):
    # RotaryEmbedding is a torch.nn.Module: torch is imported only when it is asked for, so the
    # rest of the package works with numpy alone.
    if name == "RotaryEmbedding":
        from .rotary import RotaryEmbedding
        return RotaryEmbedding
    raise AttributeError(f"module 'posenc' has no attribute {name!r}")


__all__ = [
    "RopeSpec", "Frequencies", "CosSinTable", "RotaryEmbedding", "apply_rope", "apply_rope_",
    "rerotate_keys_", "rope_append_kv_cache_", "append_positions", "cos_sin_cache", "compare",
    "doctor", "mrope_positions", "torch_capability",
    "__version__",
]
