// posenc/core/mrope_positions.h: M-RoPE position ids [3, tokens] (t, h, w) for a prompt of text,
// images and videos, as the vision-language models' get_rope_index builds them, and the decode
// positions that follow from rope_deltas.
//
// A layout is its segments in order: `text:N` (N text tokens, vision start/end and timestamp
// tokens included), `image:TxHxW` and `video:TxHxW@S` (the grid in patches, as the processor's
// image_grid_thw / video_grid_thw give it; S = second_per_grid_ts). A vision segment has
// T * H' * W' tokens, H' = H/m and W' = W/m with m = spatial_merge_size, in row-major order
// (t outer, then h, then w). Every text token has t = h = w.
//
// Where a vision block starts, and where the text after it resumes (`MropeRule`):
//   hf-4.5  transformers <= 4.57 get_rope_index (also vLLM and llama.cpp): a block starts at
//           s = (max of all axes so far) + 1 (0 first), h = s + r, w = s + c, and the next text
//           or block starts at (max of the block) + 1.
//   hf-5.3  the transformers v5 walk over mm_token_type_ids (get_vision_position_ids as fixed in
//           April 2026, #45325 / #45381): a block starts at the running position p, and p then
//           advances by max(H', W') only (not by the temporal extent), so after a long video the
//           text resumes below the block's maximum.
// The temporal id of group k inside a block starting at s, per model:
//   Qwen2-VL    t = s + k                                      (no time scaling)
//   Qwen2.5-VL  video: t = s + trunc(k * trunc(S) * tokens_per_second), in both rules: 4.57
//               puts S through an int64 tensor and the pinned v5 walk takes int(S), so a
//               fractional S (0.5 s, video above 2 fps) is truncated and a 0.5 s video has one t
//               for every frame (transformers#48669 fixed it later, after the pinned walk).
//               image: t = s under hf-4.5 (4.57 multiplies by second_per_grid_t = 0),
//               t = s + k under hf-5.3 (time interval 1 for images).
//   Qwen3-VL,   each video frame is its own block (transformers splits video_grid_thw into T rows
//   GLM-4.1V    of T = 1; the time is in the timestamp text between frames), so a video:TxHxW
//               segment is T blocks of 1xHxW back to back (put the timestamp text between them
//               as text segments for the exact token stream); images t = s + k.
// rope_deltas = max(all ids) + 1 - tokens (both rules); at decode every axis of the token at
// cache position c is c + rope_deltas.
// Sources: ../shared/docs/rope-in-engines.md §1.2 (transformers 4.57 @1bc75db9 get_rope_index of
// Qwen2VLModel, Qwen2_5_VLModel, Qwen3VLModel, Glm4vModel; the v5 modular_qwen2_5_vl.py walk).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc {

// The position rule of a model family. Names: "qwen2-vl", "qwen2.5-vl", "qwen3-vl", "glm-4.1v".
enum class MropeModel { kQwen2Vl, kQwen25Vl, kQwen3Vl, kGlm4v };
std::string_view mrope_model_name(MropeModel model);
MropeModel parse_mrope_model(std::string_view name);  // throws Error naming the value

// The transformers rule: "hf-4.5" or "hf-5.3" (see the file comment).
enum class MropeRule { kHf45, kHf53 };
std::string_view mrope_rule_name(MropeRule rule);
MropeRule parse_mrope_rule(std::string_view name);  // throws Error naming --rule and the value

// "text", "image", "video".
enum class MropeSegmentKind { kText, kImage, kVideo };
std::string_view mrope_segment_kind_name(MropeSegmentKind kind);
MropeSegmentKind parse_mrope_segment_kind(std::string_view name);  // throws Error naming it

// One segment of a layout. text: `tokens`; image and video: the grid t x h x w in patches;
// video: `second_per_grid_t` (S) too.
struct MropeSegment {
  MropeSegmentKind kind = MropeSegmentKind::kText;
  std::int64_t tokens = 0;
  std::int64_t t = 0, h = 0, w = 0;
  double second_per_grid_t = 0;
};

// "text:5,image:1x28x28,text:3,video:4x28x28@0.5" -> segments. Throws Error naming the segment
// (its number and text) and the value: an unknown kind, a size that is not an integer >= 1, a
// video without @S, an S that is not a finite number > 0.
std::vector<MropeSegment> parse_mrope_layout(std::string_view text);
// The segment as parse_mrope_layout reads it ("video:4x28x28@0.5"); a layout joins them by ','.
std::string mrope_segment_text(const MropeSegment& segment);
std::string mrope_layout_text(std::span<const MropeSegment> layout);

// What the positions read from the model's config (io/vision_config.h reads them).
struct MropeVision {
  MropeModel model = MropeModel::kQwen25Vl;
  std::int64_t spatial_merge_size = 2;  // m: m x m patches make one token
  double tokens_per_second = 4;         // Qwen2.5-VL only; the others do not read it
};

// Position ids, one row per axis (t, h, w), and rope_deltas.
struct MropePositions {
  std::array<std::vector<std::int64_t>, 3> ids;
  std::int64_t rope_deltas = 0;
  std::int64_t tokens() const { return static_cast<std::int64_t>(ids[0].size()); }
};

// At most this many tokens in a layout, and every id below 2^31 (the kernels take int32).
inline constexpr std::int64_t kMaxMropeTokens = std::int64_t{1} << 22;

// The ids of `layout` under `rule`. Throws Error naming the segment and the value: H or W not a
// multiple of spatial_merge_size, an empty layout, more than kMaxMropeTokens tokens, an id past
// int32, a spatial_merge_size below 1 or a tokens_per_second that is not finite and > 0.
MropePositions mrope_positions(std::span<const MropeSegment> layout, const MropeVision& vision,
                               MropeRule rule);

// The ids of the token at cache position `cache_position` during decode: c + rope_deltas on
// every axis. Throws Error when the sum is negative or past int64.
std::array<std::int64_t, 3> mrope_decode_position(std::int64_t cache_position,
                                                  std::int64_t rope_deltas);

// The first token whose ids differ between `a` and `b` (over the shorter length; a length
// difference counts at the shorter end), or nullopt when they are the same.
std::optional<std::int64_t> mrope_first_difference(const MropePositions& a,
                                                   const MropePositions& b);

}  // namespace posenc
