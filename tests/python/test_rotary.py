"""posenc.RotaryEmbedding against transformers' rotary classes, re-implemented here in torch.

The reference below is written from the formulas of transformers' modeling_rope_utils.py (the
rope init functions and `dynamic_rope_update`) and LlamaRotaryEmbedding.forward, with torch's
float32 tensor ops in the order transformers uses them: a Python float meeting a float32 tensor,
`base ** tensor`, `1.0 / tensor`, the int64 0-dim `max(position_ids) + 1` in the dynamic base.
posenc's `hf` numerics claim bit equality with that, so every comparison is exact (torch.equal).
"""
import json
import math
import pathlib

import numpy as np
import pytest
import torch

import posenc

ROOT = pathlib.Path(__file__).resolve().parents[2]
HF_CONFIGS = sorted((ROOT.parent / "shared" / "testdata" / "hf-configs").glob("*.json"))
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# --- the reference: transformers' formulas in torch ------------------------------------------

class Ref:
    """The fields transformers' config classes give the rope init functions."""

    def __init__(self, cfg):
        rs = dict(cfg.get("rope_scaling") or {})
        self.model_type = cfg.get("model_type", "llama")
        self.rope_type = rs.get("rope_type", rs.get("type", "default"))
        self.rs = rs
        self.base = cfg.get("rope_theta", 10000.0)
        self.max_pos = cfg["max_position_embeddings"]
        self.top_original = cfg.get("original_max_position_embeddings")
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        if self.model_type == "deepseek_v3":
            head_dim = cfg["qk_rope_head_dim"]  # DeepseekV3Config: head_dim = qk_rope_head_dim
        prf = cfg.get("partial_rotary_factor", 1.0)
        if self.model_type == "gpt_neox":
            prf = cfg.get("rotary_pct", 0.25)  # GPTNeoXConfig: partial_rotary_factor = rotary_pct
        self.dim = int(head_dim * prf)

    def exponents(self):
        return torch.arange(0, self.dim, 2, dtype=torch.int64).float() / self.dim

    def init(self, seq_len=None):
        """ROPE_INIT_FUNCTIONS[rope_type](config, device, seq_len): (inv_freq, attention_factor)."""
        rs, base, dim = self.rs, self.base, self.dim
        if self.rope_type == "default":
            return 1.0 / (base ** self.exponents()), 1.0
        if self.rope_type == "linear":
            inv = 1.0 / (base ** self.exponents())
            inv /= rs["factor"]
            return inv, 1.0
        if self.rope_type == "dynamic":
            L, s = self.max_pos, rs["factor"]
            seq_len = seq_len if seq_len is not None and seq_len > L else L
            base = base * ((s * seq_len / L) - (s - 1)) ** (dim / (dim - 2))
            return 1.0 / (base ** self.exponents()), 1.0
        if self.rope_type == "yarn":
            return self.yarn()
        if self.rope_type == "longrope":
            return self.longrope(seq_len)
        if self.rope_type == "llama3":
            return self.llama3()
        raise AssertionError(f"no reference for rope_type {self.rope_type}")

    def yarn(self):
        rs, base, dim = self.rs, self.base, self.dim
        s = rs["factor"]
        L = rs.get("original_max_position_embeddings") or self.top_original or self.max_pos

        def mscale_of(scale, m=1):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        attention = rs.get("attention_factor")
        if attention is None:
            m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
            attention = float(mscale_of(s, m) / mscale_of(s, m_all)) if m and m_all else mscale_of(s)
        fast, slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def correction_dim(rotations):
            return (dim * math.log(L / (rotations * 2 * math.pi))) / (2 * math.log(base))

        lo, hi = correction_dim(fast), correction_dim(slow)
        if rs.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - lo) / (hi - lo), 0, 1)
        pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
        extrapolation = 1.0 / pos_freqs
        interpolation = 1.0 / (s * pos_freqs)
        keep = 1 - ramp.float()
        return interpolation * (1 - keep) + extrapolation * keep, attention

    def longrope_original(self):
        return self.top_original or self.max_pos

    def longrope(self, seq_len):
        rs = self.rs
        if self.top_original:  # Phi-3: factor is the ratio of the two contexts
            L = self.top_original
            s = self.max_pos / L
        else:
            L = rs.get("original_max_position_embeddings") or self.max_pos
            s = rs.get("factor") or self.max_pos / L
        attention = rs.get("attention_factor")
        if attention is None:
            attention = 1.0 if s <= 1.0 else math.sqrt(1 + math.log(s) / math.log(L))
        factors = rs["long_factor"] if seq_len and seq_len > L else rs["short_factor"]
        ext = torch.tensor(factors, dtype=torch.float32)
        return 1.0 / (ext * self.base ** self.exponents()), attention

    def llama3(self):
        rs = self.rs
        inv = 1.0 / (self.base ** self.exponents())
        s, lf, hf = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        L = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = L / lf, L / hf
        wavelen = 2 * math.pi / inv
        banded = torch.where(wavelen > low_wavelen, inv / s, inv)
        smooth = (L / wavelen - lf) / (hf - lf)
        smoothed = (1 - smooth) * banded / s + smooth * banded
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, banded), 1.0


class RefRotary:
    """LlamaRotaryEmbedding (and GptOssRotaryEmbedding: no cat) with dynamic_rope_update."""

    def __init__(self, cfg):
        self.ref = Ref(cfg)
        self.rope_type = self.ref.rope_type
        self.max_seq_len_cached = self.original_max_seq_len = self.ref.max_pos
        self.inv_freq, self.attention_scaling = self.ref.init()
        self.original_inv_freq = self.inv_freq

    def update(self, position_ids):
        seq_len = torch.max(position_ids) + 1
        if "dynamic" in self.rope_type:
            if seq_len > self.max_seq_len_cached:  # growth
                self.inv_freq, self.attention_scaling = self.ref.init(seq_len)
                self.max_seq_len_cached = seq_len
            if seq_len < self.original_max_seq_len and self.max_seq_len_cached > self.original_max_seq_len:
                self.inv_freq = self.original_inv_freq  # reset
                self.max_seq_len_cached = self.original_max_seq_len
        elif self.rope_type == "longrope":
            L = self.ref.longrope_original()
            if seq_len > L:
                if not hasattr(self, "long_inv_freq"):
                    self.long_inv_freq, _ = self.ref.init(seq_len=L + 1)
                self.inv_freq = self.long_inv_freq
            else:
                self.inv_freq = self.original_inv_freq

    def __call__(self, x, position_ids):
        self.update(position_ids)
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv.float() @ pos.float()).transpose(1, 2)
        emb = freqs if self.ref.model_type == "gpt_oss" else torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(x.dtype), sin.to(x.dtype)


# --- comparison ------------------------------------------------------------------------------

def differing(a, b):
    return int((a.view(torch.int32) != b.view(torch.int32)).sum())


def check_call(mine, ref, position_ids, where):
    """One forward call of both in every dtype, then their state, all bit for bit."""
    batch, seq = position_ids.shape
    for dtype in DTYPES:
        x = torch.zeros(1, dtype=dtype)
        cos, sin = mine(x, position_ids)
        rcos, rsin = ref(x, position_ids)
        assert cos.dtype == dtype and sin.dtype == dtype, where
        assert cos.shape == rcos.shape == (batch, seq, rcos.shape[-1]), (where, cos.shape, rcos.shape)
        assert mine.inv_freq.dtype == torch.float32, where
        n = differing(mine.inv_freq, ref.inv_freq)
        assert n == 0, f"{where}: inv_freq differs in {n} of {ref.inv_freq.numel()} entries"
        assert mine.attention_scaling == ref.attention_scaling, where
        if dtype == torch.float32:
            assert torch.equal(cos, rcos), f"{where}: cos differs in {differing(cos, rcos)} entries"
            assert torch.equal(sin, rsin), f"{where}: sin differs in {differing(sin, rsin)} entries"
        else:
            assert torch.equal(cos, rcos) and torch.equal(sin, rsin), (where, dtype)


def arange_ids(lo, hi, batch=1):
    return torch.arange(lo, hi, dtype=torch.int64)[None, :].expand(batch, -1).contiguous()


def random_ids(seed, batch=2, seq=1024, top=1 << 20):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, top, (batch, seq), generator=g, dtype=torch.int64)


def check_positions(config, cfg, name):
    """Positions 0..N and random positions up to 2^20, each call on fresh modules and then the
    same calls in a row (which, for dynamic methods, grows the frequencies). config is what
    posenc gets (a path or a dict), cfg the dict the reference reads."""
    calls = [arange_ids(0, 4097), arange_ids(0, 300, batch=3), random_ids(1), random_ids(2, 1, 7)]
    for i, ids in enumerate(calls):
        check_call(posenc.RotaryEmbedding(config), RefRotary(cfg), ids, f"{name} call {i} alone")
    mine, ref = posenc.RotaryEmbedding(config), RefRotary(cfg)
    for i, ids in enumerate(calls):
        check_call(mine, ref, ids, f"{name} call {i} in sequence")


# --- the shared configs ----------------------------------------------------------------------

@pytest.mark.parametrize("path", HF_CONFIGS, ids=lambda p: p.stem)
def test_shared_config_matches_transformers(path):
    check_positions(str(path), json.loads(path.read_text()), path.stem)


def test_shared_configs_present():
    assert len(HF_CONFIGS) >= 7, HF_CONFIGS


def test_longrope_switches_at_the_original_context():
    path = next(p for p in HF_CONFIGS if p.stem.startswith("phi-3"))
    mine, ref = posenc.RotaryEmbedding(str(path)), RefRotary(json.loads(path.read_text()))
    L = ref.ref.longrope_original()
    short = ref.original_inv_freq.clone()
    steps = [("below", arange_ids(0, 100)), ("at L", arange_ids(L - 8, L)),
             ("above", arange_ids(L - 8, L + 8)), ("far above", arange_ids(3 * L, 3 * L + 16)),
             ("back below", arange_ids(0, 50)), ("above again", arange_ids(0, L + 1))]
    for label, ids in steps:
        check_call(mine, ref, ids, f"longrope {label}")
        long_now = int(ids.max()) + 1 > L
        assert torch.equal(mine.inv_freq, ref.long_inv_freq if long_now else short), label
        assert mine.inv_freq.data_ptr() != 0
    assert not torch.equal(ref.long_inv_freq, short)  # the test can tell the two apart


# --- synthetic configs -----------------------------------------------------------------------

def llama(head_dim, base, rope_scaling=None, max_pos=4096, **top):
    cfg = {"model_type": "llama", "hidden_size": head_dim * 8, "num_attention_heads": 8,
           "head_dim": head_dim, "max_position_embeddings": max_pos, "rope_theta": base}
    if rope_scaling is not None:
        cfg["rope_scaling"] = rope_scaling
    cfg.update(top)
    return cfg


HEAD_DIMS = (64, 80, 96, 128)
BASES = (10000.0, 500000.0, 1000000.0)


def synthetic_configs():
    out = []
    for d in HEAD_DIMS:
        for b in BASES:
            out.append((f"default-d{d}-b{b:g}", llama(d, b)))
            out.append((f"linear-d{d}-b{b:g}", llama(d, b, {"rope_type": "linear", "factor": 4.0})))
            out.append((f"yarn-d{d}-b{b:g}", llama(d, b, {"rope_type": "yarn", "factor": 4.0,
                        "original_max_position_embeddings": 4096}, max_pos=16384)))
            out.append((f"llama3-d{d}-b{b:g}", llama(d, b, {
                "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                max_pos=131072)))
        out.append((f"yarn-notrunc-d{d}", llama(d, 150000.0, {
            "rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
            "truncate": False, "original_max_position_embeddings": 4096}, max_pos=131072)))
        out.append((f"yarn-mscale-d{d}", llama(d, 10000.0, {
            "rope_type": "yarn", "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096}, max_pos=163840)))
        out.append((f"yarn-attn-d{d}", llama(d, 1e6, {
            "rope_type": "yarn", "factor": 2.0, "attention_factor": 1.25, "beta_fast": 16.0,
            "beta_slow": 2.0}, max_pos=8192)))
        out.append((f"linear-x2.5-d{d}", llama(d, 10000.0, {"type": "linear", "factor": 2.5})))
    # partial rotary where the transformers class honours partial_rotary_factor
    for d, prf in ((64, 0.5), (80, 0.4), (96, 0.5), (128, 0.25)):
        out.append((f"phi3-prf{prf}-d{d}", dict(llama(d, 10000.0), model_type="phi3",
                                               partial_rotary_factor=prf)))
        out.append((f"phi3-yarn-prf{prf}-d{d}", dict(llama(d, 10000.0, {
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
            max_pos=16384), model_type="phi3", partial_rotary_factor=prf)))
        out.append((f"neox-pct{prf}-d{d}", {"model_type": "gpt_neox", "hidden_size": d * 8,
                                            "num_attention_heads": 8, "rotary_pct": prf,
                                            "max_position_embeddings": 2048,
                                            "rope_theta": 10000.0}))
    return out


SYNTHETIC = synthetic_configs()


@pytest.mark.parametrize("name,cfg", SYNTHETIC, ids=[n for n, _ in SYNTHETIC])
def test_synthetic_config_matches_transformers(name, cfg):
    mine, ref = posenc.RotaryEmbedding(cfg), RefRotary(cfg)
    assert mine.inv_freq.numel() == ref.inv_freq.numel() == ref.ref.dim // 2, name
    check_call(mine, ref, arange_ids(0, 2049), f"{name} 0..2048")
    check_call(mine, ref, random_ids(hash(name) & 0xFFFF, 2, 512), f"{name} random")


DYNAMIC = [(f"dynamic-d{d}-b{b:g}-x{s:g}", llama(d, b, {"rope_type": "dynamic", "factor": s},
                                                  max_pos=L))
           for d in HEAD_DIMS for b in (10000.0, 500000.0) for s, L in ((4.0, 2048), (2.0, 1024))]


@pytest.mark.parametrize("name,cfg", DYNAMIC, ids=[n for n, _ in DYNAMIC])
def test_dynamic_grows_and_resets_like_transformers(name, cfg):
    L = cfg["max_position_embeddings"]
    mine, ref = posenc.RotaryEmbedding(cfg), RefRotary(cfg)
    original = ref.original_inv_freq.clone()
    steps = [("below", arange_ids(0, L // 2)), ("at L", arange_ids(0, L)),
             ("grow", arange_ids(0, L + L // 2)), ("grow more", arange_ids(0, 3 * L)),
             ("smaller, above L", arange_ids(0, 2 * L)), ("decode far", arange_ids(5 * L, 5 * L + 1)),
             ("reset", arange_ids(0, L // 4)), ("grow again", arange_ids(0, 2 * L + 3))]
    for label, ids in steps:
        check_call(mine, ref, ids, f"{name} {label}")
        grown = not torch.equal(ref.inv_freq, original)
        assert grown == (label not in ("below", "at L", "reset")), label
        assert torch.equal(mine.inv_freq, original) == (not grown), label
        assert mine.max_seq_len_cached == int(ref.max_seq_len_cached), label


# --- the ways of giving the config; the buffer; errors ---------------------------------------

def test_dict_path_and_spec_give_the_same_results():
    ids = torch.cat([arange_ids(0, 512), random_ids(7, 1, 512)], dim=0)
    x = torch.zeros(1)
    for path in HF_CONFIGS:
        cfg = json.loads(path.read_text())
        spec = posenc.RopeSpec.from_hf_config(str(path))
        forms = [posenc.RotaryEmbedding(c) for c in (str(path), path, cfg, spec)]
        for m in forms[1:]:
            assert torch.equal(m.inv_freq, forms[0].inv_freq), path.stem
            assert m.attention_scaling == forms[0].attention_scaling, path.stem
        outs = [m(x, ids) for m in forms]  # the same updates (LongRoPE: to the long factors)
        for m, out in zip(forms[1:], outs[1:]):
            assert torch.equal(m.inv_freq, forms[0].inv_freq), path.stem
            assert torch.equal(out[0], outs[0][0]) and torch.equal(out[1], outs[0][1]), path.stem


@pytest.mark.parametrize("path", HF_CONFIGS, ids=lambda p: p.stem)
def test_inv_freq_buffer_is_the_hf_frequencies(path):
    spec = posenc.RopeSpec.from_hf_config(str(path))
    mine = posenc.RotaryEmbedding(spec)
    freqs = spec.frequencies("hf")
    want = torch.from_numpy(freqs.inv_freq.astype(np.float32))
    assert mine.inv_freq.dtype == torch.float32
    assert torch.equal(mine.inv_freq, want)
    assert np.array_equal(mine.inv_freq.numpy().astype(np.float64), freqs.inv_freq)  # exact widening
    # transformers' Python float; the hf Frequencies hold it rounded to float32, as multiplied
    assert mine.attention_scaling == spec.frequencies("precise").attention_factor
    assert float(np.float32(mine.attention_scaling)) == freqs.attention_factor
    assert dict(mine.named_buffers(recurse=False)).keys() == {"inv_freq"}
    assert "inv_freq" not in mine.state_dict()  # persistent=False, as in transformers


def test_bad_position_ids():
    mine = posenc.RotaryEmbedding(str(HF_CONFIGS[0]))
    x = torch.zeros(1)
    with pytest.raises(ValueError, match="position_ids"):
        mine(x, torch.arange(8))
    with pytest.raises(ValueError, match="position_ids"):
        mine(x, torch.zeros(1, 2, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="position_ids"):
        mine(x, [[0, 1, 2]])
    with pytest.raises(TypeError, match="position_ids"):
        mine(x, np.arange(4)[None, :])


@pytest.mark.parametrize("rope_scaling,key", [
    ({"rope_type": "yarn", "factor": "four"}, "factor"),
    ({"rope_type": "yarn", "factor": 4.0, "beta_fast": 0.5, "beta_slow": 1.0}, "beta_fast"),
    ({"rope_type": "linear"}, "factor"),
    ({"rope_type": "dynamic", "factor": -2.0}, "factor"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "original_max_position_embeddings": 8192}, "high_freq_factor"),
    ({"rope_type": "longrope", "short_factor": [1.0] * 32}, "long_factor"),
    ({"rope_type": "no-such-method", "factor": 2.0}, "rope_type"),
])
def test_bad_rope_scaling_names_the_key(rope_scaling, key):
    with pytest.raises(ValueError, match=key):
        posenc.RotaryEmbedding(llama(64, 10000.0, rope_scaling))


def test_bad_config_type():
    with pytest.raises(TypeError, match="config"):
        posenc.RotaryEmbedding(42)


# --- M-RoPE: transformers' Qwen2-VL / Qwen3-VL text rotary forward ----------------------------

def _mrope_reference(theta, dim, sections, interleaved, position_ids):
    """Qwen2VLRotaryEmbedding + apply_multimodal_rotary_pos_emb's section select (Qwen2-VL), or
    Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope (Qwen3-VL), in torch float32."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    three = position_ids.shape[0]
    inv = inv_freq[None, None, :, None].float().expand(three, position_ids.shape[1], -1, 1)
    freqs = (inv @ position_ids[:, :, None, :].float()).transpose(2, 3)  # [3, batch, seq, n]
    if interleaved:
        f = freqs[0].clone()
        for d, offset in ((1, 1), (2, 2)):
            length = sections[d] * 3
            idx = slice(offset, length, 3)
            f[..., idx] = freqs[d, ..., idx]
        emb = torch.cat((f, f), dim=-1)
        return emb.cos(), emb.sin()
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    split = list(sections) * 2
    pick = lambda t: torch.cat([m[i % 3] for i, m in enumerate(t.split(split, dim=-1))], dim=-1)
    return pick(cos), pick(sin)


@pytest.mark.parametrize("interleaved,sections", [(False, [4, 6, 6]), (True, [6, 5, 5])])
def test_mrope_forward_matches_transformers_bit_for_bit(tmp_path, interleaved, sections):
    rs = {"rope_type": "default", "mrope_section": sections}
    if interleaved:
        rs["mrope_interleaved"] = True
    path = tmp_path / "vl.json"
    path.write_text(json.dumps({"model_type": "qwen3_vl" if interleaved else "qwen2_vl",
                                "head_dim": 32, "rope_theta": 1000000.0, "rope_scaling": rs}))
    mine = posenc.RotaryEmbedding(str(path), numerics="hf")
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 40000, (3, 2, 12), generator=gen)
    x = torch.zeros(1, dtype=torch.float32)
    cos, sin = mine(x, ids)
    ref_cos, ref_sin = _mrope_reference(1000000.0, 32, sections, interleaved, ids)
    assert torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin)
    with pytest.raises(ValueError, match=r"must be \[3, batch, seq\]"):
        mine(x, ids[0])
