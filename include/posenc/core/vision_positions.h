// posenc/core/vision_positions.h: the 2D RoPE of vision towers (ViTs): the (row, column) position
// of every patch in the order the tower holds them, its RopeSpec (AxisRule::kVision, the
// restarted ladder) and the cos/sin transformers builds from them.
//
//   Qwen2-VL, Qwen2.5-VL, Qwen3-VL (VisionRotaryEmbedding(head_dim / 2), theta 1e4; rot_pos_emb):
//     grid T x H x W patches; patches in merge-block order, per temporal patch t:
//     hpos.reshape(H/m, m, W/m, m).permute(0, 2, 1, 3).flatten() (wpos the same), m =
//     spatial_merge_size. Axis 0 = row, axis 1 = column; angles [r w_k | c w_k], k < head_dim/4,
//     w_k = 1e4^(-2k / (head_dim/2)); cos = cat(angles, angles).cos(), NeoX over the whole head.
//     Qwen2.5-VL's window attention (get_window_index) then reorders merge units window by
//     window: window = window_size / m / patch_size units a side, windows row-major per t.
//   Llama 4 (Llama4VisionRotaryEmbedding): grid 1 x S x S, S = image_size / patch_size; patch
//     idx row-major, then the class token LAST (transformers appends class_embedding after the
//     patches). Axis 0 = x = idx % S + 1, axis 1 = y = idx / S + 1; the class token is (0, 0)
//     (angle 0). freqs_ci [S*S + 1][head_dim / 2] (complex: cos, sin), adjacent pairs.
// Sources: ../shared/docs/rope-in-engines.md §1.4; transformers modeling_qwen2_vl.py,
// modeling_qwen2_5_vl.py, modeling_qwen3_vl.py, modeling_llama4.py.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"

namespace posenc {

// The tower family. Names: "qwen2-vl", "qwen2.5-vl", "qwen3-vl", "llama4".
enum class VisionTowerModel { kQwen2Vl, kQwen25Vl, kQwen3Vl, kLlama4 };
std::string_view vision_tower_model_name(VisionTowerModel model);

// What the positions and the RoPE of a tower read from its vision_config.
struct VisionTower {
  VisionTowerModel model = VisionTowerModel::kQwen2Vl;
  std::int64_t head_dim = 80;           // hidden (Qwen2-VL: embed_dim) / heads
  double rope_theta = 10000.0;          // Qwen: VisionRotaryEmbedding's fixed 1e4; Llama 4: config
  std::int64_t spatial_merge_size = 2;  // Qwen: m x m patches make one merge unit
  std::int64_t patch_size = 14;         // pixels per patch side
  std::int64_t window_size = 0;         // Qwen2.5-VL: window side in pixels; 0 = none
  std::int64_t image_size = 0;          // Llama 4: the tile side in pixels
};

// A grid of patches T x H x W ("1x28x28"), as image_grid_thw gives it.
struct VisionGrid {
  std::int64_t t = 1, h = 0, w = 0;
};
// "TxHxW" -> grid; throws Error naming --grid and the value (each an integer >= 1).
VisionGrid parse_vision_grid(std::string_view text);

// Positions [2][patches] (axis 0, axis 1 as the file comment says) in the tower's order.
struct VisionPositions {
  std::array<std::vector<std::int64_t>, 2> ids;
  // Qwen2.5-VL with the window order: the merge unit each place holds (window_index); else empty.
  std::vector<std::int64_t> window_index;
  std::int64_t tokens() const { return static_cast<std::int64_t>(ids[0].size()); }
};

// At most this many patches in one grid.
inline constexpr std::int64_t kMaxVisionPatches = std::int64_t{1} << 22;

// The positions of `grid`; `window` applies Qwen2.5-VL's window order. Throws Error naming the
// value: H or W not a multiple of spatial_merge_size, a window with a model other than
// Qwen2.5-VL or a window_size that is not a positive multiple of spatial_merge_size *
// patch_size, a Llama 4 grid other than 1 x S x S with S = image_size / patch_size, more than
// kMaxVisionPatches patches.
VisionPositions vision_positions(const VisionTower& tower, const VisionGrid& grid, bool window);

// The tower's RopeSpec: head_dim rotated whole, vision_sections({head_dim/4, head_dim/4}),
// half-split (Qwen) or interleaved (Llama 4). Throws Error when head_dim is not a positive
// multiple of 4.
RopeSpec vision_rope_spec(const VisionTower& tower);

// cos and sin as transformers returns them, row-major [tokens][width]: Qwen width = head_dim
// (emb = cat(freqs, freqs), then emb.cos()), Llama 4 width = head_dim / 2 (freqs_ci's real and
// imaginary parts). kHf: torch's float32 values bit for bit; kPrecise: float64 rounded once.
struct VisionCosSin {
  std::int64_t width = 0;
  std::vector<float> cos, sin;
};
VisionCosSin vision_cos_sin(const Frequencies& freqs, const VisionTower& tower,
                            const VisionPositions& positions);

}  // namespace posenc
