"""RopeSpec constructors and the JSON reports (inspect, compare, doctor) as Python dicts.

The class itself is the C++ one (posenc._posenc.RopeSpec); the constructors that take Python
objects (a dict, a path) are added here.
"""
import json
import os

from . import _posenc

RopeSpec = _posenc.RopeSpec


def _choose(spec, layer_type, layer):
    """layer_type (a name) or layer (a 0-based decoder layer index, layer_spec in C++)."""
    if layer is None:
        return spec.layer(layer_type) if layer_type else spec
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise TypeError(f"layer: expected an int (a 0-based decoder layer), got {type(layer).__name__}")
    if layer_type:
        raise ValueError(f"layer ({layer}) and layer_type ({layer_type!r}) both choose a layer; give one")
    return spec._at_layer(layer)


def _from_hf_config(config, layer_type=None, layer=None):
    """A model's RoPE from its Hugging Face config: a path to config.json or a dict.

    Parsed as the C++ library (and `posenc inspect`) parses it: same warnings (spec.warnings),
    same errors (ValueError naming the key, its value and what was expected). layer=N gives
    decoder layer N's RoPE (Gemma 2/3 sliding layers, Llama 4; ValueError for a NoPE layer or
    an N out of range)."""
    if isinstance(config, dict):
        try:
            text = json.dumps(config, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"config: the dict is not JSON ({e})") from None
        spec = RopeSpec._from_hf_json(text, "<dict>")
    elif isinstance(config, (str, os.PathLike)):
        spec = RopeSpec._load(os.fspath(config), "")
    else:
        raise TypeError(f"config: expected a path to config.json or a dict, got {type(config).__name__}")
    return _choose(spec, layer_type, layer)


def _from_gguf(path, layer_type=None, layer=None):
    """A model's RoPE from a GGUF file, as llama.cpp reads it (posenc/io/gguf.h)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a path to a .gguf file, got {type(path).__name__}")
    return _choose(RopeSpec._from_gguf(os.fspath(path)), layer_type, layer)


def _load(path, layer_type=None, layer=None):
    """config.json or .gguf, chosen by the file (as every posenc command does); layer as in
    from_hf_config."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a path, got {type(path).__name__}")
    if layer is None:
        return RopeSpec._load(os.fspath(path), layer_type or "")
    return _choose(RopeSpec._load(os.fspath(path), ""), layer_type, layer)


def _inspect(self, numerics="precise", seq_len=None):
    """The dict `posenc inspect --json` prints for this spec."""
    if seq_len is not None and not self.depends_on_seq_len:
        raise ValueError(f"seq_len ({seq_len}) has no effect: rope_type {self.rope_type} "
                         f"(from {self.source}) does not depend on the sequence length")
    return json.loads(_posenc._inspect_json(self, numerics, 0 if seq_len is None else seq_len))


RopeSpec.from_hf_config = staticmethod(_from_hf_config)
RopeSpec.from_gguf = staticmethod(_from_gguf)
RopeSpec.load = staticmethod(_load)
RopeSpec.inspect = _inspect


def _spec_of(config, name="config"):
    if isinstance(config, RopeSpec):
        return config
    if isinstance(config, dict):
        return _from_hf_config(config)
    if isinstance(config, (str, os.PathLike)):
        return _load(config)
    raise TypeError(f"{name}: expected a RopeSpec, a dict or a path, got {type(config).__name__}")


def compare(config, seq_len=None, positions=None):
    """What `posenc compare --json` prints: the model's RoPE as transformers, llama.cpp and vLLM
    compute it, against the float64 formulas."""
    spec = _spec_of(config)
    pos = [] if positions is None else [int(p) for p in positions]
    return json.loads(_posenc._compare_json(spec, 0 if seq_len is None else int(seq_len), pos))


def doctor(config, layout=None):
    """What `posenc doctor --json` prints: the known pitfalls of the model's RoPE across engines.
    layout: the prompt of the M-RoPE position checks ("text:16,image:1x28x28,..."; None: the
    representative one); the vision settings are transformers' defaults for the model_type."""
    if layout is not None and not isinstance(layout, str):
        raise TypeError(f"layout: expected a str such as \"text:4,image:1x28x28\", got {type(layout).__name__}")
    return json.loads(_posenc._doctor_json(_spec_of(config), layout or ""))


def mrope_positions(config, layout, rule="hf-4.5"):
    """M-RoPE position ids of a prompt of text, images and videos, as a VL model's get_rope_index
    builds them (`posenc mrope-positions`): returns (position_ids, rope_deltas), numpy int64 of
    shapes [3, 1, tokens] (t, h, w; batch 1) and [1, 1]. config: a VL config.json path or dict
    (model_type, vision_config.spatial_merge_size, tokens_per_second); layout: "text:N",
    "image:TxHxW", "video:TxHxW@S" joined by ","; rule: "hf-4.5" or "hf-5.3"."""
    if not isinstance(layout, str):
        raise TypeError(f"layout: expected a str such as \"text:4,image:1x28x28\", got {type(layout).__name__}")
    if not isinstance(rule, str):
        raise TypeError(f"rule: expected \"hf-4.5\" or \"hf-5.3\", got {type(rule).__name__}")
    if rule not in ("hf-4.5", "hf-5.3"):
        raise ValueError(f"rule ({rule!r}) must be \"hf-4.5\" (transformers <= 4.57, vLLM, llama.cpp: "
                         f"next text at max + 1) or \"hf-5.3\" (the v5 walk: block start + max(H', W'))")
    if isinstance(config, dict):
        try:
            text = json.dumps(config, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"config: the dict is not JSON ({e})") from None
        ids, deltas, _ = _posenc._mrope_positions(text, False, layout, rule)
    elif isinstance(config, (str, os.PathLike)):
        ids, deltas, _ = _posenc._mrope_positions(os.fspath(config), True, layout, rule)
    else:
        raise TypeError(f"config: expected a path to config.json or a dict, got {type(config).__name__}")
    return ids, deltas


def torch_capability():
    """The CPU capability torch's float32 kernels use here ("default", "avx2", "avx512"): what
    `hf` numerics reproduce (ATEN_CPU_CAPABILITY overrides it, as in torch)."""
    return _posenc._torch_capability()
