"""A float64 numpy rotation, written from the formulas (docs/design.md §1), for the Python tests.

For each token t at position p, head h and pair i, with (a, b) the pair's dims
(half-split: off + i, off + i + n; interleaved: off + 2i, off + 2i + 1):
    y_a = x_a c - x_b s,  y_b = x_b c + x_a s,   c, s = af cos(p w_i), af sin(p w_i)
and the transpose for the inverse. Dims outside the rotary range are copied.
"""
import numpy as np


def pair_dims(rotary_dim, offset, layout):
    n = rotary_dim // 2
    i = np.arange(n)
    if layout == "interleaved":
        return offset + 2 * i, offset + 2 * i + 1
    return offset + i, offset + i + n


def precise_cos_sin(inv_freq, attention_factor, positions):
    """[tokens, n] cos and sin in float64 from the frequencies: np.cos of the double angle."""
    angle = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq)[None, :]
    return attention_factor * np.cos(angle), attention_factor * np.sin(angle)


def rotate(x, cos, sin, rotary_dim, offset, layout, inverse=False):
    """x [tokens, heads, head_dim] float64; cos/sin [tokens, n]. Returns (y, magnitude) where
    magnitude[t, h, d] = |x_a| + |x_b| of the pair d belongs to (0 outside the rotary dims): the
    scale of the rounding error a float32 rotation may make there."""
    x = np.asarray(x, dtype=np.float64)
    a, b = pair_dims(rotary_dim, offset, layout)
    c = cos[:, None, :]
    s = -sin[:, None, :] if inverse else sin[:, None, :]
    y = x.copy()
    xa, xb = x[..., a], x[..., b]
    y[..., a] = xa * c - xb * s
    y[..., b] = xb * c + xa * s
    mag = np.zeros_like(x)
    mag[..., a] = np.abs(xa) + np.abs(xb)
    mag[..., b] = mag[..., a]
    return y, mag


# Tolerances per storage dtype, |got - ref| <= rel * |ref| + k32 * magnitude + floor:
#   float32: cos/sin rounded to float32 (2^-24 relative each), two products and a sum rounded
#            (3 x 2^-24): 5 x 2^-24 of |x_a| + |x_b| bounds it; nothing from the storage.
#   float16: the float32 result rounded to float16 once more: 2^-11 relative (half an ulp), plus
#            float16's smallest subnormal step near zero.
#   bfloat16: likewise 2^-8 relative (bfloat16 keeps 8 significand bits).
TOLERANCE = {
    "float32": (0.0, 5 * 2.0**-24, 0.0),
    "float16": (2.0**-11, 5 * 2.0**-24, 2.0**-24),
    "bfloat16": (2.0**-8, 5 * 2.0**-24, 2.0**-133),
}


def assert_close(got, ref, mag, dtype):
    rel, k32, floor = TOLERANCE[dtype]
    got = np.asarray(got, dtype=np.float64)
    err = np.abs(got - ref)
    bound = rel * np.abs(ref) + k32 * mag + floor
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), (
        f"{dtype}: error {err[worst]:.3e} above the bound {bound[worst]:.3e} at {worst} "
        f"(got {got[worst]!r}, reference {ref[worst]!r})")


# --- M-RoPE: which position axis each frequency slot reads (../shared/docs/rope-in-engines.md
# 1.1), written from the formulas; positions are [axes, tokens].

def contiguous_slot_axis(sections):
    """Qwen2-VL / Qwen2.5-VL mrope_section [s_t, s_h, s_w]: j < s_t -> 0, < s_t + s_h -> 1, else 2."""
    return np.concatenate([np.full(s, a) for a, s in enumerate(sections)]).astype(np.int64)


def interleaved_slot_axis(sections):
    """Qwen3-VL mrope_interleaved: j % 3 == 1 and j < 3 s_h -> h; j % 3 == 2 and j < 3 s_w -> w;
    else t."""
    n = int(sum(sections))
    out = np.zeros(n, dtype=np.int64)
    for j in range(n):
        if j % 3 == 1 and j < 3 * sections[1]:
            out[j] = 1
        elif j % 3 == 2 and j < 3 * sections[2]:
            out[j] = 2
    return out


def mrope_cos_sin(inv_freq, attention_factor, axis_positions, slot_axis):
    """[tokens, n] cos and sin in float64: slot j at position axis_positions[slot_axis[j], t]."""
    p = np.asarray(axis_positions, dtype=np.float64)  # [axes, tokens]
    angle = p[np.asarray(slot_axis), :].T * np.asarray(inv_freq)[None, :]
    return attention_factor * np.cos(angle), attention_factor * np.sin(angle)
