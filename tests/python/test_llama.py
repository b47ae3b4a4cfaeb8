"""posenc.llama: the PyTorch Llama against the C++ forward pass of `posenc eval` (two
implementations, one answer), its v1 files, both RoPE layouts, gradients through posenc's RoPE."""
import numpy as np
import pytest
import torch

import posenc
from posenc import _posenc
from posenc.llama import Llama, LlamaConfig, load_tokenizer

from conftest import SHARED

MODEL = SHARED / "models" / "stories260K" / "tinystories_260k_v1.bin"
PRIDE = SHARED / "data" / "austen" / "prideprejudice.txt"


@pytest.fixture(scope="module")
def model():
    return Llama.load(MODEL)


@pytest.fixture(scope="module")
def pride_ids(model):
    ids = model.tokenizer.encode(PRIDE.read_bytes()[:40000])
    return [model.tokenizer.bos_id] + ids[1:2048]


def rel_err(a, b):
    """max |a - b| / max |b|: the measure of tests/llama/llama_test.cc."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def torch_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids], dtype=torch.int64))[0].numpy()


@pytest.mark.parametrize("method,factor,n", [
    ("none", None, 512),
    ("yarn", 4.0, 2048),
    ("yarn-paper", 4.0, 1024),
    ("linear", 2.0, 1024),
    ("ntk", 2.0, 1024),
    ("llama3", 4.0, 1024),
])
def test_logits_equal_the_cpp_forward_pass(model, pride_ids, method, factor, n):
    model.set_rope(method, factor=factor)
    try:
        ids = pride_ids[:n]
        py = torch_logits(model, ids)
        cpp = model.cpp_logits(ids)
        assert py.shape == cpp.shape == (n, model.cfg.vocab_size)
        assert py.dtype == np.float32
        assert rel_err(py, cpp) < 1e-5
    finally:
        model.set_rope("none")


def test_the_scaled_method_changes_the_logits(model, pride_ids):
    """The yarn comparison above is not vacuous: yarn at s = 4 differs from plain RoPE."""
    ids = pride_ids[:1024]
    plain = torch_logits(model, ids)
    model.set_rope("yarn", factor=4.0)
    try:
        assert rel_err(torch_logits(model, ids), plain) > 1e-2
    finally:
        model.set_rope("none")


def test_method_parameters_reach_both_passes(model, pride_ids):
    """beta_fast, beta_slow, truncate and extrapolation_factor (eval's --beta-fast ...) change
    YaRN's frequencies in the torch model and in the C++ pass alike; llama3's factors too."""
    ids = pride_ids[:1024]
    for method, params in (("yarn", {"beta_fast": 4.0, "beta_slow": 0.5, "truncate": False,
                                     "extrapolation_factor": 0.5}),
                           ("llama3", {"low_freq_factor": 0.5, "high_freq_factor": 8.0})):
        model.set_rope(method, factor=4.0)
        default = model.rope_spec.frequencies().inv_freq
        try:
            model.set_rope(method, factor=4.0, **params)
            assert model.rope_settings["params"] == params
            assert not np.array_equal(model.rope_spec.frequencies().inv_freq, default), method
            assert rel_err(torch_logits(model, ids), model.cpp_logits(ids)) < 1e-5
        finally:
            model.set_rope("none")


def test_cpp_logits_equal_posenc_eval_model(pride_ids):
    """cpp_logits on the Python copy of the weights = the C++ pass on the file itself."""
    m = Llama.load(MODEL)
    cpp_file = _posenc._LlamaModel.load(str(MODEL))
    ids = np.asarray(pride_ids[:300], dtype=np.int32)
    np.testing.assert_array_equal(m.cpp_logits(ids), cpp_file.logits(ids, cpp_file.rope_spec("none")))


def test_save_writes_the_file_it_loaded(model, tmp_path):
    assert model.to_bytes() == MODEL.read_bytes()
    out = tmp_path / "copy.bin"
    model.save(out)
    assert out.read_bytes() == MODEL.read_bytes()
    again = Llama.load(out)
    for (n1, p1), (n2, p2) in zip(model.named_parameters(), again.named_parameters()):
        assert n1 == n2
        assert torch.equal(p1, p2), n1


def test_float16_files_load_here_and_in_cpp(model, pride_ids, tmp_path):
    """save(dtype="float16") writes format version 2: every weight rounded to float16 once;
    Llama.load widens it back exactly, and the C++ loader reads the same values."""
    out = tmp_path / "half.bin"
    model.save(out, dtype="float16")
    data = out.read_bytes()
    assert data[0] == 2 and data[1:256] == MODEL.read_bytes()[1:256]
    half = Llama.load(out)
    for (n1, p1), (n2, p2) in zip(model.named_parameters(), half.named_parameters()):
        assert n1 == n2
        assert torch.equal(p1.detach().half().float(), p2.detach()), n1
    assert half.to_bytes("float16") == data  # float16 -> float32 -> float16 is exact
    ids = np.asarray(pride_ids[:200], dtype=np.int32)
    cpp_file = _posenc._LlamaModel.load(str(out))
    np.testing.assert_array_equal(half.cpp_logits(ids), cpp_file.logits(ids, cpp_file.rope_spec("none")))
    assert rel_err(torch_logits(half, list(ids)), cpp_file.logits(ids, cpp_file.rope_spec("none"))) < 1e-5
    big = tiny(vocab_size=512)
    with torch.no_grad():
        big.norm.fill_(1e5)
    big.tokenizer = model.tokenizer
    with pytest.raises(ValueError, match="beyond float16's range"):
        big.to_bytes("float16")


def test_half_split_layout_with_permuted_weights(model, pride_ids):
    """Both layouts: the interleaved model equals a half-split one whose q and k rows are permuted
    within each head (pair (2i, 2i+1) -> (i, i + d/2), as HF's conversion does)."""
    cfg = model.cfg
    d = cfg.head_dim
    half = Llama.load(MODEL)
    perm = torch.tensor([2 * i for i in range(d // 2)] + [2 * i + 1 for i in range(d // 2)])
    with torch.no_grad():
        for layer in half.layers:
            for lin, heads in ((layer.wq, cfg.n_heads), (layer.wk, cfg.n_kv_heads)):
                w = lin.weight.view(heads, d, cfg.dim)
                lin.weight.copy_(w[:, perm, :].reshape(heads * d, cfg.dim))
    for scaling in (None, {"rope_type": "linear", "factor": 2.0}):
        hf = {"hidden_size": cfg.dim, "num_attention_heads": cfg.n_heads, "rope_theta": 10000.0,
              "max_position_embeddings": cfg.seq_len}
        if scaling:
            hf["rope_scaling"] = scaling
        spec = posenc.RopeSpec.from_hf_config(hf)
        assert spec.layout == "half-split"
        half.set_rope(spec)
        model.set_rope(scaling["rope_type"] if scaling else "none", factor=scaling and scaling["factor"])
        try:
            ids = pride_ids[:600]
            ref = torch_logits(model, ids)
            got = torch_logits(half, ids)
            assert rel_err(got, ref) < 1e-5
            # the C++ pass runs the half-split spec on the permuted weights too
            assert rel_err(half.cpp_logits(ids), ref) < 1e-5
            # and without the permutation the layouts differ: the check can fail
            half.set_rope(model.rope_spec)
            assert rel_err(torch_logits(half, ids), ref) > 1e-3
        finally:
            model.set_rope("none")


def tiny(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(dim=16, hidden_dim=24, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=40, seq_len=16)
    cfg.update(kw)
    return Llama(LlamaConfig(**cfg))


def test_random_init_is_seeded():
    a, b, c = tiny(1), tiny(1), tiny(2)
    for (_, pa), (_, pb), (_, pc) in zip(a.named_parameters(), b.named_parameters(), c.named_parameters()):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.layers[0].wq.weight, c.layers[0].wq.weight)


@pytest.mark.parametrize("method", ["none", "yarn", "dynamic"])
def test_gradients_through_posenc_rope(method):
    """gradcheck in float64 of the logits against q's and k's projection weights: the backward
    of posenc's rotation (the inverse rotation of the gradient) is the exact derivative."""
    m = tiny(3).double()
    m.set_rope(method, factor=None if method == "none" else 2.0)
    tokens = torch.tensor([[1, 5, 7, 9, 11, 3, 2, 30, 31, 4, 8, 6, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]])
    wq, wk = m.layers[0].wq.weight, m.layers[1].wk.weight

    def f(q_w, k_w):
        return torch.nn.utils.stateless.functional_call(
            m, {"layers.0.wq.weight": q_w, "layers.1.wk.weight": k_w}, (tokens,))

    q_w = wq.detach().clone().requires_grad_(True)
    k_w = wk.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(f, (q_w, k_w), eps=1e-6, atol=1e-7)


def test_training_step_moves_every_weight():
    m = tiny(4)
    m.set_rope("yarn", factor=2.0)
    tokens = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(0))
    loss = torch.nn.functional.cross_entropy(m(tokens).reshape(-1, 40), tokens.roll(-1, 1).reshape(-1))
    loss.backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_positions_argument(model, pride_ids):
    """model(tokens, positions=...): 0..S-1 given equals the default; a shift of every position
    leaves every q.k (a function of position differences) as it was; rows with their own
    positions."""
    ids = torch.tensor([pride_ids[:64]], dtype=torch.int64)
    with torch.no_grad():
        base = model(ids)
        same = model(ids, positions=torch.arange(64))
        shifted = model(ids, positions=torch.arange(64) + 100)
        batched = model(ids.repeat(2, 1), positions=torch.stack([torch.arange(64), torch.arange(64) + 7]))
    assert torch.equal(base, same)
    # A shift of every position leaves every q.k (a function of position differences) as it was.
    assert rel_err(shifted.numpy(), base.numpy()) < 1e-5
    assert rel_err(batched[1].numpy(), base[0].numpy()) < 1e-5


def test_tokenizer_is_eval_s(model):
    tok = load_tokenizer(MODEL)
    ids = tok.encode("Once upon a time")
    assert [tok.pieces[i].decode() for i in ids] == ["\u2581Once", "\u2581upon", "\u2581a", "\u2581time"]
    assert tok.encode(b"Once upon a time") == ids
    assert tok.decode(ids) == " Once upon a time"
    assert tok.bos_id == 1 and tok.vocab_size == 512
    text = PRIDE.read_bytes()[:5000]
    assert tok.encode(text) == _posenc._LlamaModel.load(str(MODEL)).encode(text)


def test_errors(model, tmp_path):
    with pytest.raises(ValueError, match="rope-magic"):
        model.set_rope("rope-magic")
    with pytest.raises(ValueError, match="attention_factor .* not to method ntk"):
        model.set_rope("ntk", factor=2.0, attention_factor=1.0)
    with pytest.raises(ValueError, match="factor .* must be positive"):
        model.set_rope("yarn", factor=-1.0)
    with pytest.raises(ValueError, match=r"beta_fast \(16\) applies to yarn, yarn-paper and dynamic-yarn, not to method linear"):
        model.set_rope("linear", factor=2.0, beta_fast=16)
    with pytest.raises(ValueError, match=r"beta_fast \(1\) must be greater than beta_slow \(2\)"):
        model.set_rope("yarn", factor=2.0, beta_fast=1, beta_slow=2)
    with pytest.raises(TypeError, match="truncate: expected True or False"):
        model.set_rope("yarn", factor=2.0, truncate=1)
    with pytest.raises(TypeError, match="beta_fast: expected a number"):
        model.set_rope("yarn", factor=2.0, beta_fast="16")
    with pytest.raises(ValueError, match="beta_fast go with a method name"):
        model.set_rope(model.rope_spec, beta_fast=16)
    spec = posenc.RopeSpec.from_hf_config({"hidden_size": 64, "num_attention_heads": 4})
    with pytest.raises(ValueError, match=r"head_dim \(16\) must equal the model's \(8"):
        model.set_rope(spec)
    with pytest.raises(TypeError, match="method name or a posenc.RopeSpec"):
        model.set_rope(3)
    model.set_rope("none")
    with pytest.raises(ValueError, match=r"id 512 is outside the vocabulary \[0, 512\)"):
        model(torch.tensor([[1, 512]]))
    with pytest.raises(ValueError, match=r"id -1 is outside"):
        model(torch.tensor([[-1, 2]]))
    with pytest.raises(TypeError, match="int64 or int32"):
        model(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="no tokenizer"):
        tiny().save(tmp_path / "x.bin")
    with pytest.raises(ValueError, match=r"dtype \('bfloat16'\) must be \"float32\" or \"float16\""):
        model.save(tmp_path / "x.bin", dtype="bfloat16")
    with pytest.raises(ValueError, match="format version"):
        Llama.load(PRIDE)
    bad = tmp_path / "short.bin"
    bad.write_bytes(MODEL.read_bytes()[:-10])
    with pytest.raises(ValueError, match="truncated"):
        Llama.load(bad)
    with pytest.raises(ValueError, match="n_heads"):
        LlamaConfig(dim=10, hidden_dim=4, n_layers=1, n_heads=3, n_kv_heads=1, vocab_size=4, seq_len=4)
    with pytest.raises(ValueError, match="head_dim"):
        LlamaConfig(dim=6, hidden_dim=4, n_layers=1, n_heads=2, n_kv_heads=1, vocab_size=4, seq_len=4)
