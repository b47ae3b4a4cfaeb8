"""RotaryEmbedding: a drop-in for transformers' LlamaRotaryEmbedding and its siblings.

forward(x, position_ids) returns (cos, sin), each [batch, seq, rotary_dim] in x.dtype, laid out as
transformers returns them: cat(freqs, freqs) along the last dim (GptOssRotaryEmbedding: freqs
alone, rotary_dim / 2 wide), the attention factor applied.
Dynamic methods update their frequencies from max(position_ids) + 1 as transformers'
dynamic_rope_update does (grow past the cached length; back to the original ones below the
original context), LongRoPE switches between its short and long factors at the original
context. With numerics="hf" every entry equals transformers' float32 value bit for bit.
"""
import os

import torch

from . import _posenc
from .spec import RopeSpec, _spec_of


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, config, numerics="hf", device=None, layer_type=None):
        """config: a path to config.json (or .gguf), a dict, or a RopeSpec."""
        super().__init__()
        spec = _spec_of(config)
        self.spec = spec.layer(layer_type) if layer_type else spec
        self.numerics = numerics
        self.rope_type = self.spec.rope_type
        self._original = self.spec.frequencies(numerics)
        self._freqs = self._original
        # gpt-oss's class returns cos/sin of freqs without the cat: half as wide.
        self._half_width = self.spec.model_type == "gpt_oss"
        self.attention_scaling = self._scaling(None)
        # transformers' bookkeeping for the dynamic update, under its names.
        self.max_seq_len_cached = self.spec.max_position_embeddings
        self.original_max_seq_len = self.spec.max_position_embeddings
        inv = torch.tensor(self._original.inv_freq, dtype=torch.float32, device=device)
        self.register_buffer("inv_freq", inv, persistent=False)
        self.original_inv_freq = self.inv_freq

    def _scaling(self, seq_len):
        # transformers holds attention_scaling as the Python float of its init function (hf
        # Frequencies carry it rounded to float32, as it is when multiplied): the precise value,
        # computed with the same double formula.
        numerics = "precise" if self.numerics == "hf" else self.numerics
        return self.spec.frequencies(numerics, seq_len).attention_factor

    def _set(self, freqs, seq_len):
        self._freqs = freqs
        self.attention_scaling = self._scaling(seq_len)
        self.register_buffer("inv_freq", torch.tensor(freqs.inv_freq, dtype=torch.float32,
                                                       device=self.inv_freq.device), persistent=False)

    def _dynamic_update(self, seq_len):
        if seq_len > self.max_seq_len_cached:  # growth
            self._set(self.spec.frequencies(self.numerics, seq_len), seq_len)
            self.max_seq_len_cached = seq_len
        if seq_len < self.original_max_seq_len and self.max_seq_len_cached > self.original_max_seq_len:
            self._freqs = self._original  # reset
            self.attention_scaling = self._scaling(None)
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
            self.max_seq_len_cached = self.original_max_seq_len

    def _longrope_update(self, seq_len):
        original = self.spec.original_max_position_embeddings or self.spec.max_position_embeddings
        if seq_len > original:
            if self._freqs is self._original:
                # transformers keeps the init attention_scaling here (its update discards it).
                long = self.spec.frequencies(self.numerics, original + 1)
                self._freqs = long
                self.register_buffer("inv_freq", torch.tensor(long.inv_freq, dtype=torch.float32,
                                                               device=self.inv_freq.device),
                                     persistent=False)
        elif self._freqs is not self._original:
            self._freqs = self._original
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        if not isinstance(position_ids, torch.Tensor):
            raise TypeError(f"position_ids: expected a torch.Tensor, got {type(position_ids).__name__}")
        # [batch, seq]; a multi-axis (M-RoPE) spec takes [axes, batch, seq], checked by _posenc.
        if position_ids.dim() not in (2, 3):
            raise ValueError(f"position_ids {list(position_ids.shape)} must be [batch, seq] "
                             "(M-RoPE: [axes, batch, seq])")
        pos = position_ids if position_ids.device.type == "cpu" else position_ids.cpu()
        if self.spec.depends_on_seq_len and pos.numel() > 0:
            seq_len = int(pos.max()) + 1
            if self.rope_type == "longrope":
                self._longrope_update(seq_len)
            else:
                self._dynamic_update(seq_len)
        cos, sin = _posenc._rotary_cos_sin(self._freqs, pos, not self._half_width)
        cos = torch.from_numpy(cos).to(device=x.device, dtype=x.dtype)
        sin = torch.from_numpy(sin).to(device=x.device, dtype=x.dtype)
        return cos, sin

    def extra_repr(self):
        return f"rope_type={self.rope_type}, numerics={self.numerics}, rotary_dim={self.spec.rotary_dim}"
