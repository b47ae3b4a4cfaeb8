#include "cases.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "posenc/core/error.h"
#include "posenc/core/mrope_positions.h"

namespace posenc::bench {

std::span<const Shape> shapes() {
  // Llama 2 7B: hidden 4096 = 32 heads x 128, context 4096 (Touvron et al. 2023, Table 1 and the
  // published config.json). Decode rotates the one new token at the last position of the context.
  static constexpr Shape kShapes[] = {
      {"llama2-7b-prefill-q", 4096, 32, 128, 0},
      {"llama2-7b-prefill-gqa-k", 4096, 8, 128, 0},
      {"llama2-7b-decode", 1, 32, 128, 4095},
      {"head_dim-64", 4096, 16, 64, 0},
      {"head_dim-256", 2048, 8, 256, 0},
      // Multi-axis at the prefill shape: its time over llama2-7b-prefill-q's is M-RoPE's cost.
      {"mrope-prefill-q", 4096, 32, 128, 0, true},
      // A vision-language model's decode step: one text token, every axis at one position.
      {"mrope-decode", 1, 32, 128, 4095, true},
      // A vision-language model's prefill as its processor numbers it: an image's tokens keep t,
      // h along a row of patches and w within the grid's width (mrope-prefill-q's t moves on
      // with every token, which no image does).
      {"qwen2-vl-image-prefill-q", 4096, 32, 128, 0, true, 0, 0, false,
       "text:32,image:1x128x126,text:32"},
      // llama.cpp's Llama (GGUF q and k are permuted so that pairs are adjacent dims).
      {"llama2-7b-gguf-prefill-gqa-k", 4096, 8, 128, 0, false, 0, 0, true},
      // GPT-NeoX-20B: hidden 6144 = 64 heads x 96, rotary_pct 0.25, context 2048 (its
      // config.json).
      {"gpt-neox-20b-prefill-k", 2048, 64, 96, 0, false, 0, 24},
  };
  return kShapes;
}

std::span<const Shape> fused_shapes() {
  // Llama 2 7B: 32 heads of 128, kv heads = heads; Llama 3 8B: 32 q heads, 8 kv heads (GQA),
  // head_dim 128 (the published config.json files).
  static constexpr Shape kShapes[] = {
      {"fused-prefill-llama2-7b", 4096, 32, 128, 0, false, 32},
      {"fused-prefill-llama3-8b", 4096, 32, 128, 0, false, 8},
      {"fused-decode1-llama2-7b", 1, 32, 128, 4095, false, 32},
      {"fused-decode1-llama3-8b", 1, 32, 128, 4095, false, 8},
      {"fused-decode64-llama2-7b", 64, 32, 128, 4032, false, 32},
      {"fused-decode64-llama3-8b", 64, 32, 128, 4032, false, 8},
  };
  return kShapes;
}

std::vector<Case> all_cases(std::span<const int> threads) {
  std::vector<Case> out;
  for (const Shape& shape : shapes()) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (bool table : {true, false}) {
        for (int t : threads) {
          out.push_back({fmt::format("{}/{}/{}/threads:{}", shape.name, dtype_name(dtype),
                                     table ? "table" : "on-the-fly", t),
                         shape, dtype, table, t});
        }
      }
    }
  }
  // (input dtype, cache dtype, the cache's name in the case name, fp8's scale); cases.h says why
  // fp8 twice.
  struct FusedDtypes {
    DType dtype;
    CacheDType cache;
    std::string_view cache_name;
    float scale;
  };
  const FusedDtypes fused_dtypes[] = {
      {DType::kF32, CacheDType::kF32, "f32", 1.0f},
      {DType::kF16, CacheDType::kF16, "f16", 1.0f},
      {DType::kBF16, CacheDType::kBF16, "bf16", 1.0f},
      {DType::kBF16, CacheDType::kFp8E4M3, "fp8_e4m3", 1.0f / 64},
      {DType::kBF16, CacheDType::kFp8E4M3, "fp8_e4m3-calibrated", 1.0f / 448},
      {DType::kF16, CacheDType::kFp8E4M3, "fp8_e4m3", 1.0f / 64},
      {DType::kF16, CacheDType::kFp8E4M3, "fp8_e4m3-calibrated", 1.0f / 448}};
  for (const Shape& shape : fused_shapes()) {
    for (const FusedDtypes& f : fused_dtypes) {
      for (int t : threads) {
        Case c{fmt::format("{}/{}/cache:{}/table/threads:{}", shape.name, dtype_name(f.dtype),
                           f.cache_name, t),
               shape, f.dtype, true, t};
        c.fused = true;
        c.cache_dtype = f.cache;
        c.cache_scale = f.scale;
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

std::vector<std::int64_t> case_positions(const Shape& shape) {
  const std::int64_t tokens = shape.tokens, p = shape.first_position;
  if (!shape.mrope) {
    if (!shape.mrope_layout.empty()) {
      throw Error(fmt::format("bench shape {}: mrope_layout is set but the shape has no 3-axis map",
                              shape.name));
    }
    std::vector<std::int64_t> out(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) out[static_cast<std::size_t>(t)] = p + t;
    return out;
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(3 * tokens));
  if (shape.mrope_layout.empty()) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t by_axis[] = {p + t, p + t / 64, p + t % 64};
      for (std::int64_t a = 0; a < 3; ++a)
        out[static_cast<std::size_t>(a * tokens + t)] = by_axis[a];
    }
    return out;
  }
  const MropePositions ids =
      mrope_positions(parse_mrope_layout(shape.mrope_layout),
                      MropeVision{.model = MropeModel::kQwen2Vl}, MropeRule::kHf45);
  if (ids.tokens() != tokens) {
    throw Error(fmt::format("bench shape {}: its mrope_layout \"{}\" has {} tokens, the shape {}",
                            shape.name, shape.mrope_layout, ids.tokens(), tokens));
  }
  for (std::size_t a = 0; a < 3; ++a)
    std::copy(ids.ids[a].begin(), ids.ids[a].end(),
              out.begin() + static_cast<std::ptrdiff_t>(a) * tokens);
  return out;
}

}  // namespace posenc::bench
