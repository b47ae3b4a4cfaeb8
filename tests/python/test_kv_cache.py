"""posenc.rope_append_kv_cache_ (the fused RoPE + paged KV-cache append) against what it fuses:
posenc.apply_rope of q and k, then k and v converted to the cache dtype (torch's round to nearest
even, or an fp8 e4m3 encoder written here from the OCP definition) and copied to their slots,
bit for bit; vLLM and FlashInfer layouts, torch and numpy, packed qkv views, M-RoPE; and the
refusals, which must leave every output as it was."""
import numpy as np
import pytest
import torch

import posenc

SPEC = posenc.RopeSpec.preset("llama-2-7b")  # half-split, head_dim 128
D = 128
TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def e4m3_values():
    """The 127 finite non-negative E4M3 magnitudes, by code: code c = (e << 3) | m is
    m * 2^-9 for e = 0 and (1 + m / 8) * 2^(e - 7) otherwise; 0x7F is NaN."""
    c = np.arange(127)
    e, m = c >> 3, c & 7
    return np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e - 7))


def to_e4m3(x, scale):
    """float32 x / scale (rounded to float32, as the kernel divides), then to the nearest E4M3
    value, ties to the even code, saturated to 448 (finite inputs)."""
    y = (np.asarray(x, np.float32) / np.float32(scale)).astype(np.float64)
    a = np.minimum(np.abs(y), 448.0)
    vals = e4m3_values()
    hi = np.clip(np.searchsorted(vals, a), 1, 126)
    lo = hi - 1
    dlo, dhi = a - vals[lo], vals[hi] - a
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(a == vals[hi], hi, code)
    return (code | np.where(np.signbit(y), 0x80, 0)).astype(np.uint8)


def as_bits(x):
    """A tensor or array's raw bits as a numpy array (bfloat16/float16 as uint16)."""
    if isinstance(x, torch.Tensor):
        if x.dtype in (torch.float16, torch.bfloat16):
            return x.view(torch.int16).numpy().view(np.uint16)
        return x.numpy().view(np.uint32 if x.dtype == torch.float32 else np.uint8)
    return x.view(np.uint32) if x.dtype == np.float32 else x.view(np.uint16) if x.itemsize == 2 else x


def cache_entry(x, cache_dtype, scale):
    """What the cache must hold for x (a rotated k, or v): its value converted to the cache."""
    if cache_dtype == "fp8":
        return to_e4m3(x.to(torch.float32).numpy(), scale)
    return as_bits(x.to(TORCH[cache_dtype]))


def make_qkv(tokens, hq, hkv, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(tokens, (hq + 2 * hkv) * D, generator=g).to(TORCH[dtype])
    q = qkv[:, : hq * D].view(tokens, hq, D)
    k = qkv[:, hq * D : (hq + hkv) * D].view(tokens, hkv, D)
    v = qkv[:, (hq + hkv) * D :].view(tokens, hkv, D)
    return qkv, q, k, v


def empty_cache(shape, cache_dtype):
    if cache_dtype == "fp8":
        return torch.full(shape, 0x5A, dtype=torch.uint8)
    return torch.full(shape, 7.0, dtype=TORCH[cache_dtype])


KINDS = [("float32", "float32"), ("float16", "float16"), ("bfloat16", "bfloat16"),
         ("float32", "bfloat16"), ("bfloat16", "fp8"), ("float16", "fp8")]


@pytest.mark.parametrize("dtype,cache_dtype", KINDS)
@pytest.mark.parametrize("k_in_place", [False, True])
def test_vllm_layout_is_apply_rope_then_copy(dtype, cache_dtype, k_in_place):
    tokens, hq, hkv, blocks, block = 37, 4, 2, 8, 16
    qkv, q, k, v = make_qkv(tokens, hq, hkv, dtype, seed=1)
    positions = torch.arange(1000, 1000 + tokens)
    slots = torch.randperm(blocks * block, generator=torch.Generator().manual_seed(2))[:tokens]
    q_want, k_want = posenc.apply_rope(q.clone(), k.clone(), positions, SPEC)
    k0, v0 = k.clone(), v.clone()
    kc = empty_cache((blocks, block, hkv, D), cache_dtype)
    vc = empty_cache((blocks, block, hkv, D), cache_dtype)
    before = as_bits(kc).copy()
    # 0.25: multiplied by its inverse; 0.1 (rounded to float32): a division
    k_scale, v_scale = (0.25, 0.1) if cache_dtype == "fp8" else (1.0, 1.0)
    out = posenc.rope_append_kv_cache_(q, k, v, kc, vc, positions, SPEC, slot_mapping=slots,
                                       k_scale=k_scale, v_scale=v_scale, k_in_place=k_in_place)
    assert out[0] is q and out[1] is kc and out[2] is vc
    assert np.array_equal(as_bits(q), as_bits(q_want))
    assert np.array_equal(as_bits(k), as_bits(k_want if k_in_place else k0))
    assert np.array_equal(as_bits(v), as_bits(v0))
    kflat, vflat = as_bits(kc).reshape(-1, hkv, D), as_bits(vc).reshape(-1, hkv, D)
    assert np.array_equal(kflat[slots.numpy()], cache_entry(k_want, cache_dtype, k_scale))
    assert np.array_equal(vflat[slots.numpy()], cache_entry(v0, cache_dtype, v_scale))
    untouched = np.setdiff1d(np.arange(blocks * block), slots.numpy())
    assert np.array_equal(kflat[untouched], before.reshape(-1, hkv, D)[untouched])


def test_numpy_arrays_and_bfloat16_bits():
    tokens, hkv = 9, 2
    _, q, k, v = make_qkv(tokens, 2, hkv, "bfloat16", seed=3)
    positions = np.arange(tokens, dtype=np.int32)
    q_want, k_want = posenc.apply_rope(q.clone(), k.clone(), torch.from_numpy(positions), SPEC)
    qn, kn, vn = (as_bits(t.contiguous()).copy() for t in (q, k, v))
    kc = np.zeros((4, 4, hkv, D), np.uint16)
    vc = np.zeros_like(kc)
    posenc.rope_append_kv_cache_(qn, kn, vn, kc, vc, positions, SPEC, dtype="bfloat16",
                                 slot_mapping=list(range(15, 15 - tokens, -1)))
    assert np.array_equal(qn, as_bits(q_want))
    slots = np.arange(15, 15 - tokens, -1)
    assert np.array_equal(kc.reshape(-1, hkv, D)[slots], as_bits(k_want))
    assert np.array_equal(vc.reshape(-1, hkv, D)[slots], as_bits(v.contiguous()))


@pytest.mark.parametrize("layout", ["nhd", "hnd"])
def test_flashinfer_layouts(layout):
    # Two requests: the first had 5 tokens cached and appends 7, the second appends 4 to nothing.
    page, hkv = 4, 2
    appended = [7, 4]
    lengths = [5 + 7, 4]
    pages_of = [[3, 0, 5], [2]]  # page ids per request: ceil(12 / 4) = 3, ceil(4 / 4) = 1
    kv_indptr = np.array([0, 3, 4], np.int32)
    kv_indices = np.array([p for ps in pages_of for p in ps], np.int32)
    kv_last_page_len = np.array([(n - 1) % page + 1 for n in lengths], np.int32)
    append_indptr = np.array([0, 7, 11], np.int32)
    batch_indices, kv_positions = posenc.append_positions(append_indptr, kv_indptr,
                                                          kv_last_page_len, page)
    assert batch_indices.tolist() == [0] * 7 + [1] * 4
    assert kv_positions.tolist() == list(range(5, 12)) + list(range(4))
    tokens = sum(appended)
    _, q, k, v = make_qkv(tokens, 4, hkv, "float16", seed=4)
    positions = torch.from_numpy(kv_positions.astype(np.int64))  # RoPE position = KV position
    q_want, k_want = posenc.apply_rope(q.clone(), k.clone(), positions, SPEC)
    shape = (6, page, hkv, D) if layout == "nhd" else (6, hkv, page, D)
    kc, vc = torch.zeros(shape, dtype=torch.float16), torch.zeros(shape, dtype=torch.float16)
    posenc.rope_append_kv_cache_(q, k, v, kc, vc, positions, SPEC, layout=layout,
                                 kv_indptr=kv_indptr, kv_indices=kv_indices,
                                 kv_last_page_len=kv_last_page_len, batch_indices=batch_indices,
                                 kv_positions=kv_positions)
    assert torch.equal(q, q_want)
    for t in range(tokens):
        b, p = int(batch_indices[t]), int(kv_positions[t])
        pg, e = pages_of[b][p // page], p % page
        got_k = kc[pg, e] if layout == "nhd" else kc[pg, :, e]
        got_v = vc[pg, e] if layout == "nhd" else vc[pg, :, e]
        assert torch.equal(got_k, k_want[t]) and torch.equal(got_v, v[t])


def test_mrope_positions():
    spec = posenc.RopeSpec.preset("qwen2-vl-7b")
    d, tokens, hkv = spec.head_dim, 12, 2
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(tokens, h, d, generator=g) for h in (4, hkv, hkv))
    positions = torch.stack([torch.arange(tokens), torch.arange(tokens) // 4,
                             torch.arange(tokens) % 4])
    q_want, k_want = posenc.apply_rope(q.clone(), k.clone(), positions, spec)
    kc, vc = torch.zeros(2, 8, hkv, d), torch.zeros(2, 8, hkv, d)
    posenc.rope_append_kv_cache_(q, k, v, kc, vc, positions, spec, slot_mapping=torch.arange(tokens))
    assert torch.equal(q, q_want)
    assert torch.equal(kc.reshape(-1, hkv, d)[:tokens], k_want)


def test_without_rotation_k_is_cached_as_given():
    _, q, k, v = make_qkv(5, 2, 1, "float32", seed=6)
    kc, vc = torch.zeros(1, 8, 1, D), torch.zeros(1, 8, 1, D)
    posenc.rope_append_kv_cache_(None, k, v, kc, vc, torch.arange(5), SPEC,
                                 slot_mapping=torch.arange(5), rotate=False)
    assert torch.equal(kc[0, :5], k) and torch.equal(vc[0, :5], v)
    with pytest.raises(ValueError, match="rotate is false"):  # q would be left unrotated
        posenc.rope_append_kv_cache_(q, k, v, kc, vc, torch.arange(5), SPEC,
                                     slot_mapping=torch.arange(5), rotate=False)


def call(**over):
    _, q, k, v = make_qkv(4, 2, 1, "float32", seed=7)
    args = dict(q=q, k=k, v=v, key_cache=torch.zeros(2, 4, 1, D), value_cache=torch.zeros(2, 4, 1, D),
                positions=torch.arange(4), spec=SPEC, slot_mapping=torch.tensor([0, 1, 2, 3]))
    args.update(over)
    snapshot = {n: args[n].clone() for n in ("q", "k", "key_cache", "value_cache")
                if isinstance(args[n], torch.Tensor)}
    pos = [args.pop(n) for n in ("q", "k", "v", "key_cache", "value_cache", "positions", "spec")]
    return pos, args, snapshot


@pytest.mark.parametrize("over,error,words", [
    (dict(slot_mapping=torch.tensor([0, 1, 1, 3])), ValueError, "slot"),
    (dict(slot_mapping=torch.tensor([0, -1, 2, 3])), ValueError, "-1"),
    (dict(slot_mapping=torch.tensor([0, 1, 2, 8])), ValueError, "8"),
    (dict(slot_mapping=torch.tensor([0, 1, 2])), ValueError, "slot_mapping"),
    (dict(slot_mapping=None), ValueError, "slot_mapping is required"),
    (dict(kv_indptr=np.array([0, 1], np.int32)), ValueError, "kv_indptr"),
    (dict(layout="paged"), ValueError, "paged"),
    (dict(key_cache=torch.zeros(8, 1, D)), ValueError, "key_cache"),
    (dict(value_cache=torch.zeros(2, 4, 1, D, dtype=torch.float16)), TypeError, "value_cache"),
    (dict(key_cache=torch.zeros(2, 4, 2, D), value_cache=torch.zeros(2, 4, 2, D)), ValueError, "heads"),
    (dict(key_cache=torch.zeros(2, 4, 1, D, dtype=torch.int32),
          value_cache=torch.zeros(2, 4, 1, D, dtype=torch.int32)), TypeError, "cache dtype"),
    (dict(k_scale=2.0), ValueError, "scale"),
    (dict(v_scale=1e300), ValueError, "v_scale"),
    (dict(positions=torch.arange(3)), ValueError, "positions"),
    (dict(threads=0), ValueError, "threads"),
])
def test_bad_input_is_refused_before_anything_is_written(over, error, words):
    pos, kw, snapshot = call(**over)
    with pytest.raises(error, match=words):
        posenc.rope_append_kv_cache_(*pos, **kw)
    q, k = pos[0], pos[1]
    assert torch.equal(q, snapshot["q"]) and torch.equal(k, snapshot["k"])
    for name, i in (("key_cache", 3), ("value_cache", 4)):
        if name in snapshot and pos[i].shape == snapshot[name].shape:
            assert torch.equal(pos[i], snapshot[name])


def test_read_only_cache_and_autograd_are_refused():
    _, q, k, v = make_qkv(2, 1, 1, "float32", seed=8)
    kc = np.zeros((1, 4, 1, D), np.float32)
    vc = np.zeros_like(kc)
    kc.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        posenc.rope_append_kv_cache_(None, k.numpy(), v.numpy(), kc, vc, np.arange(2), SPEC,
                                     slot_mapping=np.arange(2))
    with pytest.raises(ValueError, match="requires grad"):
        posenc.rope_append_kv_cache_(q.requires_grad_(), k, v, torch.zeros(1, 4, 1, D),
                                     torch.zeros(1, 4, 1, D), torch.arange(2), SPEC,
                                     slot_mapping=torch.arange(2))
