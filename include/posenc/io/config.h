// posenc/io/config.h: a model's RopeSpec from its Hugging Face config.json.
//
// Reads both generations of the format:
//   v4: top-level rope_theta, partial_rotary_factor, head_dim, max_position_embeddings, and a
//       `rope_scaling` dict ({"rope_type" | legacy "type": ..., "factor": ..., ...});
//   v5: `rope_parameters` ({"rope_type", "rope_theta", "partial_rotary_factor", ...}), or one
//       such dict per layer type ({"full_attention": {...}, "sliding_attention": {...}}).
// and the family-specific keys: GPT-NeoX's rotary_pct and rotary_emb_base, GPT-J's rotary_dim
// (and n_embd, n_head, n_positions), DeepSeek's qk_rope_head_dim, Phi-3's top-level
// original_max_position_embeddings.
//
// head_dim and rotary_dim are resolved as each family's transformers class does:
//   head_dim   = config.head_dim, else hidden_size / num_attention_heads
//   rotary_dim = qk_rope_head_dim (DeepSeek V2/V3), rotary_dim (GPT-J), head_dim * rotary_pct
//                (GPT-NeoX), head_dim * partial_rotary_factor (families that honour it), else
//                head_dim (Llama-family classes ignore partial_rotary_factor for default RoPE).
// Layout: interleaved for GPT-J and DeepSeek V2/V3 (rope_interleave), half-split otherwise.
//
// Invalid values are refused with an Error naming the key and the value; suspicious ones (at
// least those transformers warns about) become warnings; keys inside the RoPE dicts that no
// method reads are warnings; top-level keys that do not affect RoPE are listed in ignored_keys.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/spec.h"

namespace posenc {

struct ModelConfig {
  std::string source;      // file name, used in messages
  std::string model_type;  // "llama", "deepseek_v3", ... ("" when absent)
  RopeSpec spec;           // the model's RoPE (for per-layer configs: full_attention's)
  std::map<std::string, RopeSpec> layer_specs;  // v5 per-layer-type dicts, by layer type
  std::vector<std::string> warnings;
  std::vector<std::string> ignored_keys;  // top-level keys that do not affect RoPE
};

// Parses config.json text. `source` names the file in messages. Throws Error on malformed
// JSON (with line and column), wrong types, invalid values and missing required keys.
ModelConfig parse_hf_config(std::string_view json_text, std::string_view source = "config.json");

// The largest config.json load_hf_config reads: real ones are a few KiB (the largest in
// ../shared/testdata, with per-layer lists, under 100 KiB); the cap keeps /dev/zero or a wrong
// multi-GiB file from being read whole.
inline constexpr std::uint64_t kMaxConfigBytes = std::uint64_t{64} << 20;

// Reads and parses a file; throws Error when it cannot be read, is larger than kMaxConfigBytes
// or does not start with '{' (checked on the first bytes, before the rest is read).
ModelConfig load_hf_config(const std::filesystem::path& path);

}  // namespace posenc
