// bench/cases.h: the one list of benchmark cases, shared by posenc_bench (Google Benchmark) and
// `posenc bench` (the CLI), with real model shapes named.
//
// A case is a shape, a storage dtype, whether cos/sin come from a CosSinTable or are computed on
// the fly, and the number of kernel threads. Its name is
//   <shape>/<dtype>/<table|on-the-fly>/threads:<n>     e.g. llama2-7b-decode/f32/table/threads:1
// The rotation is plain RoPE (rope_theta 10000, rotary_dim = head_dim, half-split; mrope shapes
// add an axis map, Shape::mrope), in place, on
// a contiguous [tokens, heads, head_dim] tensor; positions are first_position + t for token t.
//
// Bytes moved per call (what bytes_per_second counts): the tensor is read once and written once,
//   bytes = 2 x tokens x heads x head_dim x dtype_size
// (cos/sin rows are not counted: one row of head_dim floats per token, shared by all heads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/rope/tensor.h"

namespace posenc::bench {

struct Shape {
  std::string_view name;
  std::int64_t tokens = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t first_position = 0;  // positions first_position .. first_position + tokens - 1
  // Multi-axis: Qwen2-VL's mrope_section [16, 24, 24] (head_dim 128) with [3, tokens] positions
  // t = first + k, h = first + k / 64, w = first + k % 64 (a 64-wide image, every axis distinct).
  bool mrope = false;
};

struct Case {
  std::string name;
  Shape shape;
  DType dtype = DType::kF32;
  bool table = true;  // cos/sin from a CosSinTable; false: computed per token (table = nullptr)
  int threads = 1;

  std::int64_t elements() const { return shape.tokens * shape.heads * shape.head_dim; }
  std::size_t tensor_bytes() const {
    return static_cast<std::size_t>(elements()) * dtype_size(dtype);
  }
  // Read once + written once: 2 x tokens x heads x head_dim x dtype_size.
  std::size_t bytes_moved() const { return 2 * tensor_bytes(); }
};

// The shapes, in the order the cases run:
//   llama2-7b-prefill-q      4096 tokens, 32 heads, 128   (Llama 2 7B queries, full context)
//   llama2-7b-prefill-gqa-k  4096 tokens,  8 heads, 128   (grouped-query keys, Llama 2 70B style)
//   llama2-7b-decode            1 token,  32 heads, 128   (one new token at position 4095)
//   head_dim-64              4096 tokens, 16 heads,  64
//   head_dim-256             2048 tokens,  8 heads, 256
//   mrope-prefill-q          4096 tokens, 32 heads, 128   (llama2-7b-prefill-q's shape with
//                                                          Qwen2-VL's 3-axis M-RoPE)
std::span<const Shape> shapes();

inline constexpr int kDefaultThreads[] = {1, 2};

// Every shape x {f32, f16, bf16} x {table, on-the-fly} x `threads`, grouped so that the cases of
// one (shape, dtype) are adjacent (they share one set of buffers).
std::vector<Case> all_cases(std::span<const int> threads = kDefaultThreads);

}  // namespace posenc::bench
