"""RopeSpec.from_hf_config / from_gguf / load with layer=N: decoder layer N's RoPE as the C++
layer_spec gives it (posenc inspect --layer N); a NoPE layer and an N out of range are ValueErrors."""
import json
import math

import pytest

import posenc

# google/gemma-3-27b-it (transformers v4): every 6th layer global (rope_theta 1e6, linear x8),
# the others sliding (rope_local_base_freq 1e4, no scaling).
GEMMA3 = {
    "model_type": "gemma3",
    "text_config": {"model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376,
                    "num_attention_heads": 32, "num_hidden_layers": 62,
                    "max_position_embeddings": 131072, "rope_theta": 1000000.0,
                    "rope_local_base_freq": 10000.0,
                    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024, "sliding_window_pattern": 6}}

# meta-llama/Llama-4-Scout-17B-16E-Instruct (text_config): every 4th layer has no RoPE.
LLAMA4 = {
    "model_type": "llama4",
    "text_config": {"model_type": "llama4_text", "head_dim": 128, "hidden_size": 5120,
                    "num_attention_heads": 40, "num_hidden_layers": 48,
                    "max_position_embeddings": 10485760, "rope_theta": 500000.0,
                    "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                    "attention_chunk_size": 8192, "no_rope_layers": []}}


def test_gemma3_sliding_and_global_layers():
    sliding = posenc.RopeSpec.from_hf_config(GEMMA3, layer=0)
    assert sliding.rope_theta == 10000.0
    assert sliding.rope_type == "default"
    assert sliding.factor == 1.0
    glob = posenc.RopeSpec.from_hf_config(GEMMA3, layer=5)
    assert glob.rope_theta == 1000000.0
    assert glob.rope_type == "linear"
    assert glob.factor == 8.0
    w0 = sliding.frequencies().inv_freq
    assert math.isclose(w0[1], 10000.0 ** (-2 / 128), rel_tol=1e-15)


def test_llama4_nope_layer_and_rope_layer():
    s = posenc.RopeSpec.from_hf_config(LLAMA4, layer=0)
    assert s.rope_type == "llama3"
    assert s.rope_theta == 500000.0
    with pytest.raises(ValueError, match=r"layer \(3\) of .* has no RoPE \(NoPE\)"):
        posenc.RopeSpec.from_hf_config(LLAMA4, layer=3)


@pytest.mark.parametrize("layer", [48, -1])
def test_out_of_range(layer):
    with pytest.raises(ValueError, match=rf"layer \({layer}\) is out of range: .* has 48 layers, 0 \.\. 47"):
        posenc.RopeSpec.from_hf_config(LLAMA4, layer=layer)


def test_a_path_and_load_take_layer_too(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA3))
    assert posenc.RopeSpec.from_hf_config(path, layer=1).rope_theta == 10000.0
    assert posenc.RopeSpec.load(path, layer=11).rope_theta == 1000000.0
    scout = tmp_path / "scout.json"
    scout.write_text(json.dumps(LLAMA4))
    with pytest.raises(ValueError, match=r"layer \(7\) of .*scout.json has no RoPE"):
        posenc.RopeSpec.load(scout, layer=7)


def test_layer_and_layer_type_together_and_a_wrong_type():
    with pytest.raises(ValueError, match="both choose a layer"):
        posenc.RopeSpec.from_hf_config(GEMMA3, layer_type="sliding_attention", layer=0)
    with pytest.raises(TypeError, match="layer: expected an int"):
        posenc.RopeSpec.from_hf_config(GEMMA3, layer="0")
    with pytest.raises(TypeError, match="layer: expected an int"):
        posenc.RopeSpec.from_hf_config(GEMMA3, layer=True)
