"""posenc.llama.causal_attention (the fused kernel, include/posenc/llama/attention.h) against
torch's matmul and softmax in float64: the output and the gradients of q, k and v, grouped-query
attention, B > 1, S = 1, S not a multiple of the tile, head dims 8/16/32/64; the bits on 1 and 2
threads; the binding's refusals; the model with attention="fused" against attention="torch".

Tolerances, relative to max(1, max |reference|): float64 1e-12 (sums of at most S x group <= 420
rounded products of O(1) terms, 420 x 1.1e-16 = 4.6e-14, with margin); float32 against the
float64 reference 2e-5 (the same bound with float's 6e-8); the float32 model 1e-5 on the logits
(the C++ comparison's bound) and 1e-4 on the weights' gradients (sums over 2 x 64 tokens of
products of the attention's float32 gradients)."""
import math

import pytest
import torch

from posenc import _posenc
from posenc.llama import Llama, LlamaConfig, causal_attention


def reference(q, k, v, scale):
    """softmax(q k^T scale, causal) v by torch, k and v repeated for the query heads."""
    group = q.shape[2] // k.shape[2]
    qt = q.transpose(1, 2)
    kt = k.transpose(1, 2).repeat_interleave(group, dim=1)
    vt = v.transpose(1, 2).repeat_interleave(group, dim=1)
    s = q.shape[1]
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    p = torch.softmax((qt @ kt.transpose(2, 3) * scale).masked_fill(mask, float("-inf")), dim=-1)
    return (p @ vt).transpose(1, 2)


def inputs(b, s, h, kv, hd, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, s, h, hd, generator=g, dtype=torch.float64)
    k = torch.randn(b, s, kv, hd, generator=g, dtype=torch.float64)
    v = torch.randn(b, s, kv, hd, generator=g, dtype=torch.float64)
    dout = torch.randn(b, s, h, hd, generator=g, dtype=torch.float64)
    return [t.to(dtype) for t in (q, k, v, dout)]


def rel(a, b):
    return float((a.double() - b.double()).abs().max() / max(1.0, float(b.abs().max())))


def grads(fn, q, k, v, dout, scale):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, scale)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    return out.detach(), dq, dk, dv


SHAPES = [(1, 1, 2, 1, 8), (2, 37, 4, 2, 8), (1, 70, 8, 4, 32), (2, 19, 2, 2, 64), (3, 33, 4, 1, 16),
          (1, 140, 4, 4, 8)]


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B%d_S%d_H%d_KV%d_hd%d" % s)
def test_forward_and_gradients_match_torch_in_float64(shape, dtype, tol):
    q, k, v, dout = inputs(*shape, dtype=dtype)
    scale = 1.3 / math.sqrt(shape[-1])
    got = grads(lambda *a: causal_attention(*a, threads=2), q, k, v, dout, scale)
    want = grads(reference, *(t.double() for t in (q, k, v, dout)), scale)
    assert got[0].dtype == dtype
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        assert g.shape == w.shape, name
        assert rel(g, w) <= tol, name


def test_gradcheck_float64():
    q, k, v, _ = inputs(2, 7, 4, 2, 6, dtype=torch.float64, seed=3)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: causal_attention(a, b, c, 0.4), (q, k, v))


def test_same_bits_on_one_and_two_threads():
    q, k, v, dout = inputs(2, 100, 8, 4, 8, dtype=torch.float32, seed=5)
    one = grads(lambda *a: causal_attention(*a, threads=1), q, k, v, dout, 0.35)
    two = grads(lambda *a: causal_attention(*a, threads=2), q, k, v, dout, 0.35)
    for a, b in zip(one, two):
        assert torch.equal(a, b)


def test_strided_and_non_contiguous_inputs():
    q, k, v, dout = inputs(2, 21, 4, 2, 8, dtype=torch.float64, seed=7)
    want = grads(reference, q, k, v, dout, 0.3)
    wide = torch.cat([q, torch.zeros_like(q)], dim=2)[:, :, :4]  # strided tokens, head dim contiguous: read in place
    transposed = q.transpose(2, 3).contiguous().transpose(2, 3)  # head dim not contiguous: copied
    for qq in (wide, transposed):
        assert torch.equal(qq, q)
        got = grads(causal_attention, qq, k, v, dout, 0.3)
        for g, w in zip(got, want):
            assert rel(g, w) <= 1e-12


def _call(q, k, v, out=None, lse=None):
    out = torch.empty(q.shape, dtype=q.dtype) if out is None else out
    lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], dtype=q.dtype) if lse is None else lse
    _posenc._causal_attention(q, k, v, out, lse, 0.5, 1)


@pytest.mark.parametrize("make,error,message", [
    (lambda q, k, v: _call(q, k.double(), v), TypeError, "k: dtype float64, but q is float32"),
    (lambda q, k, v: _call(q.to(torch.int32), k, v), TypeError, "q: dtype int32 is not supported"),
    (lambda q, k, v: _call(q, k[:, :4], v), ValueError, "k: shape [1, 4, 2, 8], expected [1, 5, 2, 8]"),
    (lambda q, k, v: _call(q[0], k, v, out=torch.empty(5, 4, 8), lse=torch.empty(1, 4, 5)), ValueError, "q: expected 4 dims"),
    (lambda q, k, v: _call(q, torch.zeros(1, 5, 3, 8), torch.zeros(1, 5, 3, 8)), ValueError,
     "k: 3 kv heads must divide q's 4 heads"),
    (lambda q, k, v: _call(q, k, v, lse=torch.empty(1, 5, 4)), ValueError, "lse: shape [1, 5, 4], expected [1, 4, 5]"),
    (lambda q, k, v: _call(q.transpose(2, 3).contiguous().transpose(2, 3), k, v), ValueError,
     "q: the head dim must be contiguous (stride 1)"),
    (lambda q, k, v: _call(q, k, v, out=torch.empty(1, 5, 4, 8, dtype=torch.float64)), TypeError,
     "out: dtype float64, but q is float32"),
])
def test_the_binding_refuses_bad_arguments(make, error, message):
    q, k, v, _ = inputs(1, 5, 4, 2, 8, dtype=torch.float32)
    with pytest.raises(error, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        make(q, k, v)


def test_the_model_with_fused_attention_matches_torch_attention():
    torch.manual_seed(0)
    model = Llama(LlamaConfig(dim=64, hidden_dim=96, n_layers=2, n_heads=4, n_kv_heads=2,
                              vocab_size=300, seq_len=32))
    model.set_rope("yarn", factor=2.0)
    tokens = torch.randint(0, 300, (2, 64))
    out = {}
    for attention in ("fused", "torch"):
        model.attention = attention
        model.zero_grad(set_to_none=True)
        logits = model(tokens)
        logits.square().mean().backward()
        out[attention] = (logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    assert rel(out["fused"][0], out["torch"][0]) < 1e-5
    for name, g in out["torch"][1].items():
        assert rel(out["fused"][1][name], g) < 1e-4, name


def test_an_unknown_attention_is_refused():
    model = Llama(LlamaConfig(dim=16, hidden_dim=32, n_layers=1, n_heads=2, n_kv_heads=1,
                              vocab_size=10, seq_len=8))
    model.attention = "flash"
    with pytest.raises(ValueError, match="attention \\('flash'\\) must be one of fused, torch"):
        model(torch.zeros(1, 4, dtype=torch.int64))
