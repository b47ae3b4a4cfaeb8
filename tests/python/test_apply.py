"""posenc.apply_rope / apply_rope_ / rerotate_keys_ / cos_sin_cache against a float64 numpy
rotation (rope_reference.py), in every dtype, shape and layout the API takes; zero copy; autograd."""
import os
import warnings

import numpy as np
import pytest
import torch

import posenc
from conftest import SHARED
from rope_reference import assert_close, precise_cos_sin, rotate

CONFIGS = SHARED / "testdata" / "hf-configs"
SPECS = {
    "llama-2-7b": lambda: posenc.RopeSpec.preset("llama-2-7b"),                 # half-split, 128
    "deepseek-v3": lambda: posenc.RopeSpec.from_hf_config(CONFIGS / "deepseek-v3.json"),  # interleaved yarn
    "pythia-410m": lambda: posenc.RopeSpec.from_hf_config(CONFIGS / "pythia-410m.json"),  # 16 of 64 dims
    "phi-3": lambda: posenc.RopeSpec.from_hf_config(CONFIGS / "phi-3-mini-128k-instruct.json"),  # longrope, 96
}
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.fixture(scope="module", params=sorted(SPECS))
def spec(request):
    return SPECS[request.param]()


def to_f64(x):
    if isinstance(x, np.ndarray) and x.dtype == np.uint16:  # bfloat16 bits
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64).numpy()
    return x.astype(np.float64)


def reference(spec, x, positions, inverse=False):
    """x [tokens, heads, head_dim] (any dtype), positions [tokens]: float64 result, magnitude."""
    f = spec.frequencies("precise", int(np.max(positions)) + 1 if spec.depends_on_seq_len else None)
    c, s = precise_cos_sin(f.inv_freq, f.attention_factor, positions)
    return rotate(to_f64(x), c, s, spec.rotary_dim, spec.rotary_offset, spec.layout, inverse)


def make(shape, dtype, lib, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float32)
    if lib == "torch":
        return t.to(TORCH_DTYPES[dtype])
    if dtype == "bfloat16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    return t.numpy().astype(np.float16 if dtype == "float16" else np.float32)


CASES = [(lib, dt) for lib in ("torch", "numpy") for dt in ("float32", "float16", "bfloat16")]


@pytest.mark.parametrize("lib,dtype", CASES)
def test_tokens_heads_dim(spec, lib, dtype):
    tokens, d = 37, spec.head_dim
    q, k = make((tokens, 8, d), dtype, lib, 1), make((tokens, 2, d), dtype, lib, 2)  # GQA
    positions = np.random.default_rng(3).integers(0, 5000, tokens)
    bf = "bfloat16" if lib == "numpy" and dtype == "bfloat16" else None
    q_ref, q_mag = reference(spec, q, positions)
    k_ref, k_mag = reference(spec, k, positions)
    q_new, k_new = posenc.apply_rope(q, k, positions, spec, dtype=bf)
    assert type(q_new) is type(q) and q_new.shape == q.shape and q_new.dtype == q.dtype
    assert_close(to_f64(q_new), q_ref, q_mag, dtype)
    assert_close(to_f64(k_new), k_ref, k_mag, dtype)
    # In place: the same memory, the same values as the copy, bit for bit.
    q_ptr = q.data_ptr() if lib == "torch" else q.ctypes.data
    posenc.apply_rope_(q, k, positions, spec, dtype=bf)
    assert (q.data_ptr() if lib == "torch" else q.ctypes.data) == q_ptr
    assert np.array_equal(to_f64(q), to_f64(q_new)) and np.array_equal(to_f64(k), to_f64(k_new))
    # Inverse against the reference's inverse.
    back, _ = posenc.apply_rope(q, k, positions, spec, inverse=True, dtype=bf)
    inv_ref, inv_mag = reference(spec, q, positions, inverse=True)
    assert_close(to_f64(back), inv_ref, inv_mag, dtype)


def test_shapes_give_one_answer(spec):
    """[T,H,D], [T,H*D] with head_size, [B,S,H,D], [B,H,S,D] (positions [B,S] or shared [S])."""
    b, s, h, d = 2, 9, 4, spec.head_dim
    x = make((b, s, h, d), "float32", "torch", 5)
    positions = torch.tensor(np.random.default_rng(6).integers(0, 3000, (b, s)))
    flat, _ = posenc.apply_rope(x.reshape(b * s, h, d), None, positions.reshape(-1), spec)
    bshd, _ = posenc.apply_rope(x, None, positions, spec)
    assert torch.equal(bshd.reshape(b * s, h, d), flat)
    bhsd, _ = posenc.apply_rope(x.transpose(1, 2).contiguous(), None, positions, spec)
    assert torch.equal(bhsd.transpose(1, 2), bshd)
    two_d, _ = posenc.apply_rope(x.reshape(b * s, h * d), None, positions.reshape(-1), spec, head_size=d)
    assert torch.equal(two_d.reshape(b * s, h, d), flat)
    shared, _ = posenc.apply_rope(x, None, positions[0], spec)
    ref, _ = posenc.apply_rope(x, None, positions[0].expand(b, s), spec)
    assert torch.equal(shared, ref)
    # A [B, H, S, D] view (transposed, not copied) with seq_dim given explicitly.
    view = x.transpose(1, 2)
    out, _ = posenc.apply_rope(view, None, positions, spec, seq_dim=2)
    assert torch.equal(out.transpose(1, 2), bshd)


def test_packed_qkv_rotated_in_place_through_views():
    spec = posenc.RopeSpec.preset("llama-3.1-8b")
    tokens, hq, hk, d = 11, 8, 2, 128
    qkv = torch.randn(tokens, (hq + 2 * hk) * d)
    before = qkv.clone()
    heads = qkv.view(tokens, hq + 2 * hk, d)
    q, k, v = heads[:, :hq], heads[:, hq:hq + hk], heads[:, hq + hk:]
    assert not q.is_contiguous()
    positions = torch.arange(100, 100 + tokens, dtype=torch.int32)
    ptr = qkv.data_ptr()
    out = posenc.apply_rope_(q, k, positions, spec)
    assert out[0] is q and out[1] is k and qkv.data_ptr() == ptr
    bv = before.view(tokens, hq + 2 * hk, d)
    expect_q, _ = posenc.apply_rope(bv[:, :hq].contiguous(), None, positions, spec)
    expect_k, _ = posenc.apply_rope(bv[:, hq:hq + hk].contiguous(), None, positions, spec)
    assert torch.equal(heads[:, :hq], expect_q) and torch.equal(heads[:, hq:hq + hk], expect_k)
    assert torch.equal(v, bv[:, hq + hk:])  # v untouched


def test_partial_rotary_leaves_other_dims_bit_for_bit():
    spec = SPECS["pythia-410m"]()
    x = make((5, 3, spec.head_dim), "bfloat16", "torch", 7)
    y, _ = posenc.apply_rope(x, None, torch.arange(5), spec)
    assert torch.equal(y[..., spec.rotary_dim:], x[..., spec.rotary_dim:])
    assert not torch.equal(y[1:, :, :spec.rotary_dim], x[1:, :, :spec.rotary_dim])


def test_positions_int32_int64_list_and_table_agree(spec):
    x = make((6, 2, spec.head_dim), "float32", "torch", 8)
    p = [0, 5, 4095, 17, 3, 2000]
    ref, _ = posenc.apply_rope(x, None, torch.tensor(p, dtype=torch.int64), spec)
    for positions in (torch.tensor(p, dtype=torch.int32), np.array(p, dtype=np.int32), p, tuple(p)):
        out, _ = posenc.apply_rope(x, None, positions, spec)
        assert torch.equal(out, ref)
    if not spec.depends_on_seq_len:
        table = posenc.CosSinTable(spec, 4096)
        out, _ = posenc.apply_rope(x, None, p, table)
        assert torch.equal(out, ref)  # the table holds the same values as the on-the-fly rows


def test_threads_change_nothing():
    spec = posenc.RopeSpec.preset("llama-2-7b")
    q = make((300, 32, 128), "float32", "torch", 9)
    one, _ = posenc.apply_rope(q, None, torch.arange(300), spec, threads=1)
    two, _ = posenc.apply_rope(q, None, torch.arange(300), spec, threads=2)
    assert torch.equal(one, two)


def test_threads_above_the_hardware_warn_and_are_capped():
    spec = posenc.RopeSpec.preset("llama-2-7b")
    q = make((300, 4, 128), "float32", "torch", 11)
    one, _ = posenc.apply_rope(q, None, torch.arange(300), spec, threads=1)
    hw = len(os.sched_getaffinity(0))  # posenc counts the CPUs this process may run on
    # 256 is also the most threads asked for at all (kMaxThreads); past it the request is refused,
    # whatever the machine.
    with pytest.raises(ValueError, match=r"threads \(257\) must be in \[1, 256\]"):
        posenc.apply_rope(q, None, torch.arange(300), spec, threads=257)
    if hw >= 256:
        return  # no request is then both above the hardware's threads and allowed: nothing to cap
    with pytest.warns(RuntimeWarning, match=rf"threads \(256\) is more than this machine's {hw} "
                      rf"hardware threads; running {hw}"):
        many, _ = posenc.apply_rope(q, None, torch.arange(300), spec, threads=256)
    assert torch.equal(one, many)
    with pytest.warns(RuntimeWarning, match=r"threads \(256\)"):
        posenc.apply_rope_(q, None, torch.arange(300), spec, threads=256)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        posenc.apply_rope(q, None, torch.arange(300), spec, threads=hw)  # no warning


def test_dynamic_uses_the_largest_position_by_default():
    spec = posenc.RopeSpec.from_hf_config({
        "model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
        "max_position_embeddings": 2048, "rope_scaling": {"rope_type": "dynamic", "factor": 4.0}})
    x = make((3, 1, 64), "float32", "torch", 10)
    p = torch.tensor([0, 10, 6000])
    out, _ = posenc.apply_rope(x, None, p, spec)
    explicit, _ = posenc.apply_rope(x, None, p, spec.frequencies("precise", seq_len=6001))
    assert torch.equal(out, explicit)
    at_init, _ = posenc.apply_rope(x, None, p, spec, seq_len=0)
    assert not torch.equal(out, at_init)


def test_rerotate_keys_moves_a_cache_to_new_frequencies():
    spec = posenc.RopeSpec.from_hf_config({
        "model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
        "max_position_embeddings": 1024, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})
    old, new = spec.frequencies("precise", 1500), spec.frequencies("precise", 3000)
    k = make((20, 2, 64), "float32", "torch", 11)
    p = torch.arange(1480, 1500)
    cached, _ = posenc.apply_rope(k, None, p, old)
    direct, _ = posenc.apply_rope(k, None, p, new)
    out = posenc.rerotate_keys_(cached, p, old, new)
    assert out is cached
    _, mag = reference(spec, k, p.numpy())
    assert_close(cached.numpy(), direct.double().numpy(), 2 * mag, "float32")  # two rotations' rounding


def test_cos_sin_cache_layout_and_values(spec):
    f = spec.frequencies("precise")
    cache = posenc.cos_sin_cache(spec, 512)
    assert cache.shape == (512, spec.rotary_dim) and cache.dtype == torch.float32
    c, s = precise_cos_sin(f.inv_freq, f.attention_factor, np.arange(512))
    n = spec.rotary_dim // 2
    got = cache.double().numpy()
    assert np.all(np.abs(got[:, :n] - c) <= 2.0**-24 * np.maximum(np.abs(c), 2.0**-126) * 2)
    assert np.all(np.abs(got[:, n:] - s) <= 2.0**-24 * np.maximum(np.abs(s), 2.0**-126) * 2)
    exact = posenc.cos_sin_cache(spec, 512, dtype=torch.float64)
    assert torch.equal(exact.float(), cache)  # float32 entries: the float64 ones rounded once
    assert torch.equal(posenc.cos_sin_cache(spec, 512, dtype=torch.bfloat16), cache.bfloat16())
    assert np.array_equal(posenc.cos_sin_cache(spec, 512, dtype=np.float32), cache.numpy())


# Autograd: the backward of a rotation is the inverse rotation.

def test_gradcheck_float64():
    spec = posenc.RopeSpec.from_hf_config(CONFIGS / "deepseek-v3.json")
    q = torch.randn(2, 3, 4, spec.head_dim, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 3, 1, spec.head_dim, dtype=torch.float64, requires_grad=True)
    p = torch.tensor([[0, 1, 7], [100, 2, 3]])
    assert torch.autograd.gradcheck(lambda a, b: posenc.apply_rope(a, b, p, spec), (q, k))
    assert torch.autograd.gradcheck(lambda a: posenc.apply_rope(a, None, p, spec, inverse=True)[0], (q,))
    # In place on a non-leaf: the graph sees the op (mark_dirty).
    assert torch.autograd.gradcheck(lambda a: posenc.apply_rope_(a * 1.0, None, p, spec)[0], (q,))


def test_float32_gradient_is_the_inverse_rotation():
    spec = posenc.RopeSpec.preset("llama-2-7b")
    q = torch.randn(4, 2, 128, requires_grad=True)
    p = torch.arange(4) * 1000
    y, _ = posenc.apply_rope(q, None, p, spec)
    g = torch.randn_like(y)
    y.backward(g)
    expect, _ = posenc.apply_rope(g, None, p, spec, inverse=True)
    assert torch.equal(q.grad, expect)


def test_in_place_on_a_leaf_that_requires_grad_is_refused_as_torch_does():
    q = torch.randn(2, 1, 128, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        posenc.apply_rope_(q, None, [0, 1], posenc.RopeSpec.preset("llama-2-7b"))


# Errors: ValueError / TypeError naming the argument, the value and what was expected.

@pytest.fixture(scope="module")
def llama():
    return posenc.RopeSpec.preset("llama-2-7b")


@pytest.mark.parametrize("make_args,error,pattern", [
    (lambda: (torch.empty(2, 4, 128, device="meta"), None, [0, 1]), ValueError, r"q: a meta tensor; posenc runs on CPU"),
    (lambda: (torch.zeros(2, 4, 128, dtype=torch.int32), None, [0, 1]), TypeError, r"q: dtype int32 is not supported; expected float32, float16 or bfloat16"),
    (lambda: (torch.zeros(2, 4, 128, dtype=torch.complex64), None, [0, 1]), TypeError, r"q: dtype torch.complex64 is not supported"),
    (lambda: (np.zeros((2, 4, 128), dtype=np.uint16), None, [0, 1]), TypeError, r'pass dtype="bfloat16"'),
    (lambda: (np.zeros((2, 4, 128), dtype=">f4"), None, [0, 1]), ValueError, r"q: a big-endian array; expected native byte order"),
    (lambda: (torch.zeros(2, 128, 4).transpose(1, 2), None, [0, 1]), ValueError, r"q: the last dim must be contiguous \(stride 1\), got stride 4"),
    (lambda: (torch.zeros(3, 4, 128), None, [0, 1]), ValueError, r"positions \[2\] hold 2 entries; expected one per token of q \[3, 4, 128\] \(3\)"),
    (lambda: (torch.zeros(2, 4, 128), torch.zeros(2, 4, 64), [0, 1]), ValueError, r"k: head_dim \(64\) must hold rotary_offset \+ rotary_dim \(0 \+ 128\)"),
    (lambda: (torch.zeros(2, 4, 256), None, [0, 1]), ValueError, r"q: head_dim \(256\) must equal the spec's head_dim \(128\)"),
    (lambda: (torch.zeros(2, 4, 128), torch.zeros(3, 4, 128), [0, 1]), ValueError, r"k \[3, 4, 128\] has 3 tokens; q has 2"),
    (lambda: (torch.zeros(2, 4, 128), torch.zeros(2, 4, 128, dtype=torch.float16), [0, 1]), TypeError, r"k: dtype float16 differs from q's \(float32\)"),
    (lambda: (torch.zeros(2, 512), None, [0, 1]), ValueError, r"pass head_size="),
    (lambda: ([[0.0] * 128], None, [0]), TypeError, r"q: expected a torch.Tensor or a numpy.ndarray, got list"),
    (lambda: (torch.zeros(2, 4, 128), None, [0.5, 1.0]), TypeError, r"positions: expected integers, got float64"),
    (lambda: (torch.zeros(2, 4, 128), None, torch.tensor([0.0, 1.0])), TypeError, r"positions: dtype float32 is not supported; expected int32 or int64"),
    (lambda: (torch.zeros(2, 3, 3, 128), None, torch.zeros(2, 3, dtype=torch.int64)), ValueError, r"ambiguous: dims 1 and 2 both have 3 entries; pass seq_dim="),
    (lambda: (torch.zeros(2, 5, 128), None, [0, 1]), None, None),  # a valid call, for contrast
])
def test_errors(llama, make_args, error, pattern):
    q, k, positions = make_args()
    if error is None:
        posenc.apply_rope(q, k, positions, llama)
        return
    with pytest.raises(error, match=pattern):
        posenc.apply_rope(q, k, positions, llama)


def test_more_errors(llama):
    q = torch.zeros(2, 4, 128)
    with pytest.raises(ValueError, match=r"q and k are the same tensor"):
        posenc.apply_rope_(q, q, [0, 1], llama)
    ro = np.zeros((2, 4, 128), dtype=np.float32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match=r"q: a read-only array cannot be written"):
        posenc.apply_rope_(ro, None, [0, 1], llama)
    posenc.apply_rope(ro, None, [0, 1], llama)  # reading it is fine
    with pytest.raises(ValueError, match=r"threads \(0\) must be in \[1, 256\]"):
        posenc.apply_rope(q, None, [0, 1], llama, threads=0)
    with pytest.raises(ValueError, match=r"numerics.*foo"):
        posenc.apply_rope(q, None, [0, 1], llama, numerics="foo")
    with pytest.raises(ValueError, match=r'dtype \(\'fp8\'\) must be None or "bfloat16"'):
        posenc.apply_rope(q, None, [0, 1], llama, dtype="fp8")
    with pytest.raises(ValueError, match=r"head_size \(100\) must be positive and divide the last dim \(512\)"):
        posenc.apply_rope(torch.zeros(2, 512), None, [0, 1], llama, head_size=100)
    with pytest.raises(ValueError, match=r"seq_len \(-1\) must not be negative"):
        posenc.apply_rope(q, None, [0, 1], llama, seq_len=-1)
    with pytest.raises(TypeError, match=r"spec: expected a posenc.RopeSpec, Frequencies or CosSinTable, got dict"):
        posenc.apply_rope(q, None, [0, 1], {"rope_theta": 10000})
    with pytest.raises(ValueError, match=r"numerics \(hf\) differs from the table's \(precise\)"):
        posenc.apply_rope(q, None, [0, 1], posenc.CosSinTable(llama, 8), numerics="hf")
    with pytest.raises(TypeError, match=r"old: expected posenc.Frequencies"):
        posenc.rerotate_keys_(q, [0, 1], llama, llama.frequencies())
    with pytest.raises(ValueError, match=r"max_positions \(-3\) must not be negative"):
        posenc.cos_sin_cache(llama, -3)
    with pytest.raises(ValueError, match=r"k_out is required"):
        posenc._posenc._apply(q, q.clone(), q.clone(), None, [0, 1], llama, False, None, None, None, None, 1, False)
