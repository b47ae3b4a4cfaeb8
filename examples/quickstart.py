"""The README's Python example: a model's RoPE from its config, q and k rotated in place with
transformers' float32 numerics, and the drop-in rotary module. Run from the repository root:
    PYTHONPATH=build/release/python python3 examples/quickstart.py
"""
import torch

import posenc

spec = posenc.RopeSpec.from_hf_config("examples/configs/llama-2-7b-yarn16.json")
freqs = spec.frequencies("hf")  # transformers' float32 values, bit for bit
print(f"{spec.rope_type} x{spec.factor:g}: attention factor {freqs.attention_factor:.7f}, "
      f"inv_freq[63] {freqs.inv_freq[63]:.7e}")

torch.manual_seed(0)
q = torch.randn(4, 32, 128)  # [tokens, heads, head_dim]; float16 and bfloat16 alike
k = torch.randn(4, 8, 128)  # fewer key heads (GQA)
positions = torch.tensor([0, 1, 4096, 65535])
q_before = q.clone()
posenc.apply_rope_(q, k, positions, spec, numerics="hf")  # in place, nothing copied
print(f"|q| scaled by {float(q.norm() / q_before.norm()):.5f}: rotated, times the attention factor")

rotary = posenc.RotaryEmbedding(spec)  # a drop-in for transformers' LlamaRotaryEmbedding
cos, sin = rotary(q, positions[None])
print(f"cos {tuple(cos.shape)} {cos.dtype}, cos[0, 1, 0] = {cos[0, 1, 0]:.7f}")
