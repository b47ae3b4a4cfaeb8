"""posenc.apply_rope / apply_rope_ / rerotate_keys_ with multi-axis (M-RoPE) positions: [axes,
tokens] for [tokens, heads, head_dim], [axes, batch, seq] (or [axes, seq]) for 4-D, against the
float64 reference (rope_reference.py's slot maps, written from the formulas) and against the
cos/sin of posenc.RotaryEmbedding, transformers' layout; and posenc.mrope_positions."""
import json

import numpy as np
import pytest
import torch

import posenc
from rope_reference import (assert_close, contiguous_slot_axis, interleaved_slot_axis,
                            mrope_cos_sin, precise_cos_sin, rotate)

# Qwen2-VL's contiguous sections and Qwen3-VL's interleaved ones, on a 32-dim head (16 slots).
CONFIGS = {
    "qwen2-vl": ({"model_type": "qwen2_vl", "head_dim": 32, "rope_theta": 1000000.0,
                  "max_position_embeddings": 32768,
                  "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]}},
                 contiguous_slot_axis([4, 6, 6])),
    "qwen3-vl": ({"model_type": "qwen3_vl", "head_dim": 32, "rope_theta": 5000000.0,
                  "max_position_embeddings": 262144,
                  "rope_scaling": {"rope_type": "default", "mrope_section": [6, 5, 5],
                                   "mrope_interleaved": True}},
                 interleaved_slot_axis([6, 5, 5])),
}


@pytest.fixture(params=sorted(CONFIGS))
def vl(request):
    config, slots = CONFIGS[request.param]
    return posenc.RopeSpec.from_hf_config(config), slots, config


def positions(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 30000, size=shape).astype(np.int64)


def reference(spec, slots, x, pos, inverse=False):
    f = spec.frequencies("precise")
    c, s = mrope_cos_sin(f.inv_freq, f.attention_factor, pos, slots)
    return rotate(np.asarray(x, dtype=np.float64), c, s, spec.rotary_dim, spec.rotary_offset,
                  spec.layout, inverse)


def test_three_dim_matches_the_reference(vl):
    spec, slots, _ = vl
    rng = np.random.default_rng(1)
    q = rng.standard_normal((9, 3, 32)).astype(np.float32)
    k = rng.standard_normal((9, 2, 32)).astype(np.float32)
    pos = positions((3, 9))
    q2, k2 = posenc.apply_rope(q, k, pos, spec)
    for got, x in ((q2, q), (k2, k)):
        ref, mag = reference(spec, slots, x, pos)
        assert_close(got, ref, mag, "float32")


def test_float64_is_the_reference(vl):
    spec, slots, _ = vl
    q = torch.randn(7, 2, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    pos = positions((3, 7), seed=3)
    got, _ = posenc.apply_rope(q, None, torch.from_numpy(pos), spec)
    ref, _ = reference(spec, slots, q.numpy(), pos)
    # np.cos of the double angle p w is off by up to p x 2^-53 rad (p < 30000); posenc reduces
    # the angle exactly.
    np.testing.assert_allclose(got.numpy(), ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_four_dim_batch_rows_and_shared(vl, dtype):
    spec, slots, _ = vl
    td = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    q = torch.randn(2, 5, 3, 32, generator=torch.Generator().manual_seed(4)).to(td)
    pos = positions((3, 2, 5), seed=5)  # [axes, batch, seq]: each batch row its own ids
    got, _ = posenc.apply_rope(q, None, torch.from_numpy(pos), spec)
    for b in range(2):
        ref, mag = reference(spec, slots, q[b].to(torch.float64).numpy(), pos[:, b, :])
        assert_close(got[b].to(torch.float64).numpy(), ref, mag, dtype)
    shared = pos[:, 0, :]  # [axes, seq]: one row for every batch row
    got, _ = posenc.apply_rope(q, None, torch.from_numpy(shared), spec)
    for b in range(2):
        ref, mag = reference(spec, slots, q[b].to(torch.float64).numpy(), shared)
        assert_close(got[b].to(torch.float64).numpy(), ref, mag, dtype)


def test_heads_before_seq_and_in_place(vl):
    spec, slots, _ = vl
    q = torch.randn(2, 3, 6, 32, generator=torch.Generator().manual_seed(6))  # [batch, heads, seq, d]
    pos = positions((3, 2, 6), seed=7)
    want, _ = posenc.apply_rope(q, None, torch.from_numpy(pos), spec, seq_dim=2)
    for b in range(2):
        ref, mag = reference(spec, slots, q[b].transpose(0, 1).to(torch.float64).numpy(),
                             pos[:, b, :])
        assert_close(want[b].transpose(0, 1).numpy(), ref, mag, "float32")
    posenc.apply_rope_(q, None, torch.from_numpy(pos), spec, seq_dim=2)
    assert torch.equal(q, want)


def test_matches_rotary_embedding_cos_sin(vl, tmp_path):
    """q cos + rotate_half(q) sin with RotaryEmbedding's cos/sin (transformers' layout and hf
    numerics), as Qwen2-VL's apply_multimodal_rotary_pos_emb computes it in float32."""
    spec, _, config = vl
    path = tmp_path / "vl.json"
    path.write_text(json.dumps(config))
    rotary = posenc.RotaryEmbedding(str(path), numerics="hf")
    ids = torch.from_numpy(positions((3, 2, 8), seed=8))
    q = torch.randn(2, 8, 4, 32, generator=torch.Generator().manual_seed(9))  # [batch, seq, heads, d]
    cos, sin = rotary(q, ids)  # [batch, seq, d]
    half = q.shape[-1] // 2
    rot = torch.cat((-q[..., half:], q[..., :half]), dim=-1)
    want = q * cos[:, :, None, :] + rot * sin[:, :, None, :]
    got, _ = posenc.apply_rope(q, None, ids, spec, numerics="hf")
    mag = (q.abs() + rot.abs()).to(torch.float64)
    err = (got.to(torch.float64) - want.to(torch.float64)).abs()
    assert torch.all(err <= 3 * 2.0**-24 * mag + 1e-30), float((err / mag).max())


def test_text_only_equals_one_axis_rope(vl):
    spec, _, config = vl
    plain = dict(config, rope_scaling={"rope_type": "default"}, model_type="qwen2")
    one = posenc.RopeSpec.from_hf_config(plain)
    q = np.random.default_rng(10).standard_normal((6, 2, 32)).astype(np.float32)
    p = np.arange(100, 106, dtype=np.int64)
    got, _ = posenc.apply_rope(q, None, np.stack([p, p, p]), spec)
    want, _ = posenc.apply_rope(q, None, p, one)
    assert np.array_equal(got, want)


def test_inverse_undoes_forward(vl):
    spec, _, _ = vl
    q = torch.randn(5, 2, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(11))
    pos = torch.from_numpy(positions((3, 5), seed=12))
    fwd, _ = posenc.apply_rope(q, None, pos, spec)
    back, _ = posenc.apply_rope(fwd, None, pos, spec, inverse=True)
    torch.testing.assert_close(back, q, rtol=0, atol=1e-12)


def test_rerotate_keys_takes_axis_positions(vl):
    spec, _, config = vl
    rs = {key: v for key, v in config["rope_scaling"].items() if key != "type"}
    rs.update(rope_type="linear", factor=2.0)
    other = posenc.RopeSpec.from_hf_config(dict(config, rope_scaling=rs))
    k = np.random.default_rng(13).standard_normal((6, 2, 32)).astype(np.float32)
    pos = positions((3, 6), seed=14)
    old, new = spec.frequencies("precise"), other.frequencies("precise")
    cached, _ = posenc.apply_rope(k, None, pos, old)
    posenc.rerotate_keys_(cached, pos, old, new)
    want, _ = posenc.apply_rope(k, None, pos, new)
    np.testing.assert_allclose(cached, want, rtol=0, atol=1e-5)


def test_wrong_axis_count_is_refused(vl):
    spec, _, _ = vl
    q = np.zeros((4, 2, 32), dtype=np.float32)
    for bad in (np.zeros((2, 4), np.int64), np.zeros(4, np.int64), np.zeros((3, 1, 4), np.int64)):
        with pytest.raises(ValueError, match=r"must be \[3, tokens\] for the spec's 3-axis map"):
            posenc.apply_rope(q, None, bad, spec)
    q4 = np.zeros((2, 4, 2, 32), dtype=np.float32)
    for bad in (np.zeros((2, 4), np.int64), np.zeros((4, 2, 4), np.int64)):
        with pytest.raises(ValueError, match=r"must be \[3, batch, seq\] or \[3, seq\]"):
            posenc.apply_rope(q4, None, bad, spec)
    one_axis = posenc.RopeSpec.from_hf_config({"model_type": "qwen2", "head_dim": 32,
                                               "rope_theta": 10000.0})
    with pytest.raises(ValueError, match=r"hold 12 entries; expected one per token"):
        posenc.apply_rope(q, None, np.zeros((3, 4), np.int64), one_axis)


# --- posenc.mrope_positions -----------------------------------------------------------------

QWEN25 = {"model_type": "qwen2_5_vl",
          "vision_config": {"spatial_merge_size": 1, "tokens_per_second": 2}}


def test_mrope_positions_transformers_golden():
    """transformers' test_qwen2_vl_video_temporal_scaling: tokens_per_second 2, second_per_grid_ts
    2.0, grid (2, 2, 2) after one text token, under the 5.3 rule: t = [1,1,1,1,5,5,5,5], the next
    text at 3."""
    ids, deltas = posenc.mrope_positions(QWEN25, "text:1,video:2x2x2@2,text:1", rule="hf-5.3")
    assert ids.dtype == np.int64 and ids.shape == (3, 1, 10) and deltas.shape == (1, 1)
    assert ids[0, 0, 1:9].tolist() == [1, 1, 1, 1, 5, 5, 5, 5]
    assert ids[:, 0, 9].tolist() == [3, 3, 3]
    assert deltas[0, 0] == ids.max() + 1 - 10


def test_mrope_positions_feed_apply_rope(tmp_path):
    path = tmp_path / "qwen25.json"
    path.write_text(json.dumps(dict(QWEN25, head_dim=32, rope_theta=1000000.0,
                                    rope_scaling={"type": "mrope", "mrope_section": [4, 6, 6]})))
    ids, _ = posenc.mrope_positions(path, "text:3,image:1x2x2,text:2")
    assert ids[:, 0, :].tolist() == [[0, 1, 2, 3, 3, 3, 3, 5, 6],
                                     [0, 1, 2, 3, 3, 4, 4, 5, 6],
                                     [0, 1, 2, 3, 4, 3, 4, 5, 6]]
    spec = posenc.RopeSpec.from_hf_config(path)
    q = np.random.default_rng(15).standard_normal((1, 9, 2, 32)).astype(np.float32)
    got, _ = posenc.apply_rope(q, None, ids, spec)  # [3, 1, seq]: shared by the batch
    ref, mag = reference(spec, contiguous_slot_axis([4, 6, 6]), q[0], ids[:, 0, :])
    assert_close(got[0], ref, mag, "float32")


def test_mrope_positions_errors():
    with pytest.raises(ValueError, match=r"rule \('hf-6'\) must be \"hf-4\.5\""):
        posenc.mrope_positions(QWEN25, "text:1", rule="hf-6")
    with pytest.raises(ValueError, match=r"image:1x3x2"):
        posenc.mrope_positions(dict(QWEN25, vision_config={"spatial_merge_size": 2}),
                               "image:1x3x2")
    with pytest.raises(ValueError, match=r"model_type"):
        posenc.mrope_positions({"model_type": "llama"}, "text:1")
    with pytest.raises(TypeError, match=r"layout"):
        posenc.mrope_positions(QWEN25, 5)


def test_doctor_layout():
    config = dict(CONFIGS["qwen2-vl"][0])
    found = {f["id"]: f for f in posenc.doctor(config, layout="text:2,video:20x28x28@1,text:1")["findings"]}
    # The video's t reaches 2 + 19 = 21 > 2 + 14 - 1: hf-4.5 resumes at 22, hf-5.3 at 16.
    assert "(t, h, w) = (22, 22, 22) under hf-4.5" in found["mrope-position-rule"]["detail"]
    assert "(t, h, w) = (16, 16, 16) under hf-5.3" in found["mrope-position-rule"]["detail"]
