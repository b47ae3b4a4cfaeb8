"""posenc.RopeSpec and the reports: the same parsing, warnings, errors and JSON as the C++ library
and the posenc command (run here beside the bindings for every shared config and GGUF file)."""
import json
import subprocess

import numpy as np
import pytest

import posenc
from conftest import GGUF_FILES, HF_CONFIGS, SHARED, cli_env


def cli_json(cli, *args):
    out = subprocess.run([cli, *map(str, args), "--json"], capture_output=True, text=True, check=True,
                         env=cli_env())
    return json.loads(out.stdout)


@pytest.mark.parametrize("path", HF_CONFIGS + GGUF_FILES, ids=lambda p: p.name)
def test_inspect_is_the_commands_json(cli, path):
    spec = posenc.RopeSpec.load(path)
    for numerics in ("precise", "hf", "ggml"):
        assert spec.inspect(numerics=numerics) == cli_json(cli, "inspect", path, "--numerics", numerics)
    if spec.depends_on_seq_len:
        got = spec.inspect(numerics="hf", seq_len=20000)
        assert got == cli_json(cli, "inspect", path, "--numerics", "hf", "--seq-len", 20000)


@pytest.mark.parametrize("path", HF_CONFIGS + GGUF_FILES, ids=lambda p: p.name)
def test_compare_and_doctor_are_the_commands_json(cli, path):
    assert posenc.compare(path) == cli_json(cli, "compare", path)
    assert posenc.doctor(path) == cli_json(cli, "doctor", path)
    spec = posenc.RopeSpec.load(path)
    assert posenc.compare(spec, positions=[1, 4096, 100000]) == cli_json(
        cli, "compare", path, "--positions", "1,4096,100000")


@pytest.mark.parametrize("path", HF_CONFIGS, ids=lambda p: p.name)
def test_dict_path_and_file_parse_alike(path):
    from_path = posenc.RopeSpec.from_hf_config(path)
    from_dict = posenc.RopeSpec.from_hf_config(json.loads(path.read_text()))
    assert from_dict.source == "<dict>" and from_path.source == str(path)
    for name in ("rope_type", "head_dim", "rotary_dim", "rotary_offset", "layout", "rope_theta",
                 "factor", "original_max_position_embeddings", "max_position_embeddings",
                 "ignored_keys", "layer_types"):
        assert getattr(from_dict, name) == getattr(from_path, name), name
    # The same warnings, each naming its source.
    assert [w.replace("<dict>", str(path)) for w in from_dict.warnings] == from_path.warnings
    for numerics in ("precise", "hf", "ggml"):
        a, b = from_path.frequencies(numerics), from_dict.frequencies(numerics)
        assert np.array_equal(a.inv_freq, b.inv_freq) and a.attention_factor == b.attention_factor


def test_gguf_and_preset():
    spec = posenc.RopeSpec.from_gguf(SHARED / "testdata" / "gguf" / "stories260K.gguf")
    assert (spec.head_dim, spec.rotary_dim, spec.rope_type) == (8, 8, "default")
    assert "llama-2-7b" in posenc.RopeSpec.presets()
    llama = posenc.RopeSpec.preset("llama-2-7b")
    assert (llama.head_dim, llama.rope_theta, llama.layout) == (128, 10000.0, "half-split")
    with pytest.raises(ValueError, match=r"llama-9"):
        posenc.RopeSpec.preset("llama-9")


def test_frequencies_in_each_numerics():
    spec = posenc.RopeSpec.from_hf_config(SHARED / "testdata" / "hf-configs" / "llama-3.1-8b.json")
    precise, hf, ggml = (spec.frequencies(n) for n in ("precise", "hf", "ggml"))
    assert precise.inv_freq.dtype == np.float64 and precise.inv_freq.shape == (64,)
    # float32 conventions: widened exactly (each value is a float32).
    for f in (hf, ggml):
        assert np.array_equal(f.inv_freq.astype(np.float32).astype(np.float64), f.inv_freq)
    assert not np.array_equal(precise.inv_freq.astype(np.float32).astype(np.float64), precise.inv_freq)
    # llama3 blends in float32 (pow, two divisions, a product and a sum): a few ulps at most.
    assert np.max(np.abs(hf.inv_freq / precise.inv_freq - 1)) < 8 * 2.0**-24
    assert (precise.numerics, hf.numerics, ggml.numerics) == ("precise", "hf", "ggml")
    yarn = posenc.RopeSpec.from_hf_config(SHARED / "testdata" / "hf-configs" / "gpt-oss-20b.json")
    f = yarn.frequencies("hf")
    assert f.attention_factor == pytest.approx(0.1 * np.log(32) + 1, rel=2**-23)
    assert f.correction_range is not None and f.softmax_scale_multiplier == 1.0


def test_dynamic_frequencies_follow_seq_len():
    spec = posenc.RopeSpec.from_hf_config({
        "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
        "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})
    assert spec.depends_on_seq_len
    at_init = spec.frequencies("precise")
    longer = spec.frequencies("precise", seq_len=16384)
    assert longer.seq_len == 16384 and longer.base > at_init.base
    assert np.all(longer.inv_freq[1:] < at_init.inv_freq[1:])
    with pytest.raises(ValueError, match=r"seq_len \(4096\) has no effect: rope_type default"):
        posenc.RopeSpec.preset("llama-2-7b").inspect(seq_len=4096)


def test_errors_name_the_key_value_and_expectation(tmp_path):
    with pytest.raises(ValueError, match=r"beta_fast"):
        posenc.RopeSpec.from_hf_config({
            "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 0.5, "beta_slow": 1.0,
                             "original_max_position_embeddings": 4096}})
    with pytest.raises(ValueError, match=r"rope_type.*banana"):
        posenc.RopeSpec.from_hf_config({"hidden_size": 64, "num_attention_heads": 1,
                                        "rope_scaling": {"rope_type": "banana", "factor": 2.0}})
    with pytest.raises(ValueError, match=r"the dict is not JSON"):
        posenc.RopeSpec.from_hf_config({"rope_theta": float("nan")})
    with pytest.raises(TypeError, match=r"config: expected a path to config.json or a dict, got int"):
        posenc.RopeSpec.from_hf_config(3)
    missing = tmp_path / "nope.json"
    with pytest.raises(ValueError, match=str(missing)):
        posenc.RopeSpec.from_hf_config(missing)
    bad = tmp_path / "bad.json"
    bad.write_text('{"hidden_size": 64,')
    with pytest.raises(ValueError, match=r"bad.json"):
        posenc.RopeSpec.from_hf_config(bad)
    with pytest.raises(ValueError, match=r"numerics.*exact"):
        posenc.RopeSpec.preset("llama-2-7b").frequencies("exact")
    with pytest.raises(ValueError, match=r"seq_len \(-5\) must not be negative"):
        posenc.RopeSpec.preset("llama-2-7b").frequencies("hf", seq_len=-5)
    with pytest.raises(ValueError, match=r"layer_type.*nope"):
        posenc.RopeSpec.preset("llama-2-7b").layer("nope")


def test_warnings_reach_python():
    # transformers warns about an integer factor; posenc keeps the warning on the spec.
    spec = posenc.RopeSpec.from_hf_config({
        "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 16384,
        "rope_scaling": {"rope_type": "linear", "factor": 4}})
    assert any("factor" in w for w in spec.warnings), spec.warnings
