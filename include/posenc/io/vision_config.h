// posenc/io/vision_config.h: what the M-RoPE position rule reads from a vision-language model's
// config.json: the model family (model_type), vision_config.spatial_merge_size and, for
// Qwen2.5-VL, vision_config.tokens_per_second. Nothing else of the config is read here (the
// text RoPE of the same file is load_hf_config's).
//
// model_type -> family: qwen2_vl -> Qwen2-VL; qwen2_5_vl -> Qwen2.5-VL; qwen3_vl, qwen3_vl_moe ->
// Qwen3-VL; glm4v, glm4v_moe -> GLM-4.1V (GLM-4.5V is glm4v_moe). A missing key takes the
// default of transformers' vision config class: spatial_merge_size 2 (Qwen2VLVisionConfig,
// Qwen2_5_VLVisionConfig, Qwen3VLVisionConfig, Glm4vVisionConfig), tokens_per_second 4
// (Qwen2_5_VLVisionConfig; the released Qwen2.5-VL checkpoints set 2).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/mrope_positions.h"
#include "posenc/core/vision_positions.h"

namespace posenc {

inline constexpr std::int64_t kDefaultSpatialMergeSize = 2;   // transformers' vision configs
inline constexpr double kQwen25VlDefaultTokensPerSecond = 4;  // Qwen2_5_VLVisionConfig

struct VisionConfig {
  std::string model_type;
  MropeVision vision;
  std::vector<std::string> warnings;  // defaults taken, keys present that the rule does not read
};

// The position-rule family of a model_type (the table above), or nullopt when it has none.
std::optional<MropeModel> mrope_model_for_type(std::string_view model_type);

// Parses config.json text; `source` names it in messages. Throws Error naming the key and the
// value: not a JSON object, no model_type, a model_type without an M-RoPE position rule, a
// spatial_merge_size that is not a positive integer, a tokens_per_second that is not a finite
// number > 0.
VisionConfig parse_vision_config(std::string_view json_text, std::string_view source);
// Reads the file (at most kMaxConfigBytes) and parses it.
VisionConfig load_vision_config(const std::filesystem::path& path);

// The vision tower of a VL config.json (its vision_config), for 2D RoPE (core/vision_positions.h):
//   qwen2_vl             embed_dim / num_heads (hidden_size is the merger's output there),
//                        patch_size, spatial_merge_size
//   qwen2_5_vl           hidden_size / num_heads, patch_size, spatial_merge_size, window_size,
//                        fullatt_block_indexes
//   qwen3_vl(_moe)       hidden_size / num_heads, patch_size, spatial_merge_size
//   llama4               hidden_size / num_attention_heads, image_size, patch_size, rope_theta
// The head keys are required; a missing patch_size, spatial_merge_size, window_size, image_size
// or rope_theta takes transformers' vision config default with a warning.
struct VisionTowerConfig {
  std::string model_type;
  VisionTower tower;
  std::vector<std::int64_t> fullatt_block_indexes;  // Qwen2.5-VL: layers with full attention
  std::vector<std::string> warnings;
};
// Throws Error naming the key and the value: no vision_config, a model_type without a tower
// posenc knows, a head size that is not an integer or does not divide, a size below 1.
VisionTowerConfig parse_vision_tower_config(std::string_view json_text, std::string_view source);
VisionTowerConfig load_vision_tower_config(const std::filesystem::path& path);

}  // namespace posenc
