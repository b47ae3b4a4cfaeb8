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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/spec.h"

namespace posenc {

// One decoder layer's RoPE: its layer type (a key of ModelConfig::layer_specs, or a name such as
// "sliding_attention" that only says how it attends), or no rotation at all (Llama 4's NoPE
// layers, a v5 layer type whose rope_parameters is null).
struct LayerRope {
  std::string type;  // "" when the config names no layer types
  bool rope = true;  // false: the layer rotates nothing
};

// Llama 4's attention keys around its RoPE: NoPE layers attend globally with a query temperature
// log1p(floor((pos + 1) / floor_scale)) * attn_scale + 1 (when attn_temperature_tuning), RoPE
// layers attend in chunks of attention_chunk_size tokens.
struct AttentionNotes {
  std::int64_t attention_chunk_size = 0;  // 0: not set
  bool attn_temperature_tuning = false;
  double floor_scale = 0;  // 0: not set
  double attn_scale = 0;   // 0: not set
};

// Qwen2.5-1M's dual_chunk_attention_config (the RoPE-relevant part; dual_chunk.h computes it).
struct DualChunkConfig {
  std::int64_t chunk_size = 0;
  std::int64_t local_size = 0;
  std::int64_t original_max_position_embeddings = 0;
};

struct ModelConfig {
  std::string source;      // file name, used in messages
  std::string model_type;  // "llama", "deepseek_v3", ... ("" when absent)
  RopeSpec spec;           // the model's RoPE (for per-layer configs: full_attention's)
  std::map<std::string, RopeSpec> layer_specs;  // per-layer-type RoPE (v5 dicts, Gemma 3 v4)
  // Layer index -> RoPE, for configs that vary it by layer (Gemma 2/3, Llama 4, v5 layer_types);
  // empty when every layer uses `spec`. layer_spec() reads it.
  std::vector<LayerRope> layers;
  std::int64_t num_hidden_layers = 0;         // 0 when the config does not say
  AttentionNotes attention;                   // Llama 4's keys; all unset for other models
  std::optional<DualChunkConfig> dual_chunk;  // Qwen2.5-1M dual chunk attention
  // GGUF files: the ggml rope mode llama.cpp runs (ggml_mode_name: "normal", "neox", "mrope",
  // "imrope", "vision"; Llama 4's vision tower "normal-2d"); "" for Hugging Face configs.
  std::string llama_cpp_rope_type;
  std::vector<std::string> warnings;
  std::vector<std::string> ignored_keys;  // top-level keys that do not affect RoPE
};

// The RoPE of decoder layer `layer` (0-based): layer_specs of its type, else `spec`; nullopt for a
// layer without RoPE. Throws Error naming the layer and the layer count when it is out of range.
std::optional<RopeSpec> layer_spec(const ModelConfig& config, std::int64_t layer);

// Layers that share a type and RoPE-or-not, in order of first appearance (inspect's per-layer
// summary); empty when config.layers is.
struct LayerGroup {
  std::string type;
  bool rope = true;
  std::vector<std::int64_t> layers;  // ascending layer indices
};
std::vector<LayerGroup> layer_groups(const ModelConfig& config);

// "0-2, 4-6, 8": ascending indices as ranges.
std::string layer_ranges(const std::vector<std::int64_t>& layers);

// How many decoder layers layer_spec() accepts: layers.size(), else num_hidden_layers (0: unknown,
// and then every index >= 0 reads `spec`).
std::int64_t layer_count(const ModelConfig& config);

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
