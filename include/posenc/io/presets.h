// posenc/io/presets.h: built-in models, so that a RoPE setup can be named instead of supplied.
//
// Each preset is the RoPE part of a model's published Hugging Face config.json (model_type,
// hidden_size, num_attention_heads, head_dim where the config has it, max_position_embeddings,
// rope_theta, rope_scaling and the family keys: partial_rotary_factor, rotary_pct,
// rotary_emb_base, rotary_dim, qk_rope_head_dim, original_max_position_embeddings), kept as
// JSON text with the published spelling (an integer stays an integer) and read by
// parse_hf_config, so a preset and the file it came from give the same RopeSpec and the same
// warnings. Two presets add the YaRN block that the model card tells users to paste into the
// file (qwen2.5-7b-instruct-yarn4, qwen3-8b-yarn4).
//
//   load_preset("llama-3.1-8b").spec   // llama3, factor 8, L 8192, L' 131072, theta 500000
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "posenc/io/config.h"

namespace posenc {

struct Preset {
  std::string name;         // "llama-2-7b": lower case, as `--preset` takes it
  std::string source;       // where the values come from: "meta-llama/Llama-2-7b-hf config.json"
  std::string description;  // one line for listings
  std::string json;         // the RoPE fields of the published config.json, as JSON text
  std::string note;         // how the values were checked, and the warnings parsing gives
};

// Every preset, in a fixed order (by family, then size). The list lives for the program.
const std::vector<Preset>& presets();

// The preset called `name`, or nullptr.
const Preset* find_preset(std::string_view name);

// Parses the preset's JSON with parse_hf_config; ModelConfig::source is "preset NAME". Throws
// Error naming `name` and listing the known names when there is no such preset.
ModelConfig load_preset(std::string_view name);

}  // namespace posenc
