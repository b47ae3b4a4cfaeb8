// src/rope/kernels/kv_cache_kernel.h: the per-token SIMD entry point of the fused RoPE + KV-cache
// append (internal). One call handles every kv head of one token: k rotated with the prepared row
// (rotate.h's form) and written to the key cache, v converted into the value cache.
#pragma once

#include <cstdint>

#include "posenc/core/spec.h"
#include "posenc/rope/kv_cache.h"
#include "posenc/rope/tensor.h"

namespace posenc::detail {

struct TokenKv {
  const void* k = nullptr;  // first element of the token's first head
  DType k_dtype = DType::kF32;
  std::int64_t k_head_stride = 0;
  void* k_back = nullptr;  // == k to store the rotated k back in place; nullptr: k is read only
  const void* v = nullptr;
  DType v_dtype = DType::kF32;
  std::int64_t v_head_stride = 0;
  void* k_cache = nullptr;  // the token's (page, entry) cell, first head
  void* v_cache = nullptr;
  CacheDType cache_dtype = CacheDType::kF32;
  std::int64_t cache_head_stride = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t offset = 0;  // first rotated dim
  std::int64_t pairs = 0;   // n; 0: k is copied as given
  Layout layout = Layout::kHalfSplit;
  const float* c = nullptr;
  const float* s = nullptr;
  float k_scale = 1.0f;  // fp8: stored = value / scale
  float v_scale = 1.0f;
};

// Runs on the best SIMD target this CPU supports (or the forced one, targets.h).
void append_token_kv(const TokenKv& args);

}  // namespace posenc::detail
