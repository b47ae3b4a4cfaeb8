// bench/cases.h: the one list of benchmark cases, shared by posenc_bench (Google Benchmark) and
// `posenc bench` (the CLI), with real model shapes named.
//
// A case is a shape, a storage dtype, whether cos/sin come from a CosSinTable or are computed on
// the fly, and the number of kernel threads. Its name is
//   <shape>/<dtype>/<table|on-the-fly>/threads:<n>     e.g. llama2-7b-decode/f32/table/threads:1
// The rotation is plain RoPE (rope_theta 10000, rotary_dim = head_dim, half-split, unless the shape
// says otherwise; mrope shapes add an axis map, Shape::mrope), in place, on
// a contiguous [tokens, heads, head_dim] tensor; positions are first_position + t for token t
// (mrope shapes: case_positions).
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

#include "posenc/rope/kv_cache.h"
#include "posenc/rope/tensor.h"

namespace posenc::bench {

struct Shape {
  std::string_view name;
  std::int64_t tokens = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t first_position = 0;  // positions first_position .. first_position + tokens - 1
  // Multi-axis: Qwen2-VL's mrope_section [16, 24, 24] (head_dim 128) with [3, tokens] positions
  // t = first + k, h = first + k / 64, w = first + k % 64 (a 64-wide image: the axes differ from
  // token 1 on; token 0, mrope-decode's only one, is at `first` on every axis, a text token),
  // or, where mrope_layout is set, the ids posenc::mrope_positions gives that layout for Qwen2-VL
  // (posenc/core/mrope_positions.h: hf-4.5, spatial_merge_size 2; `tokens` must be its count).
  bool mrope = false;
  // Fused cases (rope_append_kv_cache): the k and v heads (GQA: fewer than `heads`, the q heads);
  // 0 for the RoPE-only cases.
  std::int64_t kv_heads = 0;
  // The rotated dims of each head (partial rotary), 0: all of them; and the layout of the pairs.
  std::int64_t rotary_dim = 0;
  bool interleaved = false;
  std::string_view mrope_layout = {};  // e.g. "text:32,image:1x128x126,text:32" (mrope only)

  std::int64_t rotary() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
};

struct Case {
  std::string name;
  Shape shape;
  DType dtype = DType::kF32;
  bool table = true;  // cos/sin from a CosSinTable; false: computed per token (table = nullptr)
  int threads = 1;
  bool fused = false;  // rope_append_kv_cache into a vLLM cache of cache_dtype (shape.kv_heads)
  CacheDType cache_dtype = CacheDType::kF32;
  float cache_scale = 1.0f;  // fp8: k_scale and v_scale

  std::int64_t elements() const { return shape.tokens * shape.heads * shape.head_dim; }
  std::size_t tensor_bytes() const {
    return static_cast<std::size_t>(elements()) * dtype_size(dtype);
  }
  // RoPE: read once + written once, 2 x tokens x heads x head_dim x dtype_size. Fused: q read and
  // written, k and v read, their cache rows written (the bytes one pass must move).
  std::size_t bytes_moved() const {
    if (!fused) return 2 * tensor_bytes();
    const auto kv = static_cast<std::size_t>(shape.tokens * shape.kv_heads * shape.head_dim);
    return 2 * tensor_bytes() + 2 * kv * dtype_size(dtype) + 2 * kv * cache_dtype_size(cache_dtype);
  }
};

// The shapes, in the order the cases run:
//   llama2-7b-prefill-q      4096 tokens, 32 heads, 128   (Llama 2 7B queries, full context)
//   llama2-7b-prefill-gqa-k  4096 tokens,  8 heads, 128   (grouped-query keys, Llama 2 70B style)
//   llama2-7b-decode            1 token,  32 heads, 128   (one new token at position 4095)
//   head_dim-64              4096 tokens, 16 heads,  64
//   head_dim-256             2048 tokens,  8 heads, 256
//   mrope-prefill-q          4096 tokens, 32 heads, 128   (llama2-7b-prefill-q's shape with
//                                                          Qwen2-VL's 3-axis M-RoPE: axis
//                                                          positions t, t / 64, t % 64)
//   mrope-decode                1 token,  32 heads, 128   (llama2-7b-decode's, a text token:
//                                                          every axis at position 4095)
//   qwen2-vl-image-prefill-q 4096 tokens, 32 heads, 128   (mrope-prefill-q's shape and axis
//                                                          map on a Qwen2-VL prompt: 32 text
//                                                          tokens, a 128 x 126-patch image
//                                                          (64 x 63 tokens), 32 text tokens)
//   llama2-7b-gguf-prefill-gqa-k  llama2-7b-prefill-gqa-k's shape with interleaved pairs, as
//                                 llama.cpp rotates Llama's GGUF q and k (GGML_ROPE_TYPE_NORM)
//   gpt-neox-20b-prefill-k   2048 tokens, 64 heads, 96, 24 of them rotated (partial rotary 0.25,
//                            half-split): rows of 12 pairs, less than one AVX-512 vector. Its
//                            bytes are still the whole tensor's, as every case's (the stream and
//                            memcpy move them all; the kernel touches the lines it rotates).
std::span<const Shape> shapes();

// The fused RoPE + KV-cache shapes (kv_heads set), each timed against rotate-then-copy:
//   fused-prefill-llama2-7b    4096 tokens, 32 q heads, 32 kv heads, 128 (positions 0 .. 4095)
//   fused-prefill-llama3-8b    4096 tokens, 32 q heads,  8 kv heads, 128 (GQA)
//   fused-decode1-llama2-7b / -llama3-8b     1 token at position 4095
//   fused-decode64-llama2-7b / -llama3-8b   64 tokens (64 sequences), positions 4032 .. 4095
// with (input, cache) dtypes f32/f32, f16/f16, bf16/bf16, bf16/fp8_e4m3 and f16/fp8_e4m3, table
// cos/sin only: named <shape>/<dtype>/cache:<cache dtype>/table/threads:<n>. Each fp8 pair twice:
// cache:fp8_e4m3 with the scale 1/64, a power of two, and cache:fp8_e4m3-calibrated with 1/448,
// amax / 448 for these inputs' amax of 1 as vLLM's scale calibration computes it, not a power of
// two (the kernel's ways for each: fp8-inl.h).
std::span<const Shape> fused_shapes();

// A shape's positions, [axes, tokens] axis-major (Shape::mrope says which for mrope shapes; one
// axis: first_position + t). Throws posenc::Error naming the shape where an mrope_layout's token
// count is not the shape's, or a layout is set on a shape without the 3-axis map.
std::vector<std::int64_t> case_positions(const Shape& shape);

inline constexpr int kDefaultThreads[] = {1, 2};

// Every shape x {f32, f16, bf16} x {table, on-the-fly} x `threads`, then every fused shape x its
// dtype pairs x `threads`, grouped so that the cases of one (shape, dtype, cache dtype) are
// adjacent (they share one set of buffers).
std::vector<Case> all_cases(std::span<const int> threads = kDefaultThreads);

}  // namespace posenc::bench
