// posenc/rope/kv_cache.h: fused RoPE + paged KV-cache append, the CPU analogue of vLLM's and
// FlashInfer's fused rope-and-cache kernels: one call rotates q in place, rotates k, and writes
// the rotated k and the v of every token into a paged cache, one pass over k and v.
//
// The cache is two tensors (key, value) of the same geometry, addressed per (page, entry, head):
//   element (page, entry, h, d) lives at  base + page * page_stride + entry * entry_stride
//                                              + h * head_stride + d          (elements)
//   kVllm  [num_blocks, block_size, kv_heads, head_dim]; token t goes to slot_mapping[t] =
//          block * block_size + offset (vLLM's reshape_and_cache)
//   kNhd   FlashInfer paged NHD [pages, page_size, kv_heads, head_dim]
//   kHnd   FlashInfer paged HND [pages, kv_heads, page_size, head_dim]
//   FlashInfer addressing (flashinfer.page.append_paged_kv_cache): token t of request
//   b = batch_indices[t] at position p = positions[t] of that request's KV sequence goes to page
//   kv_indices[kv_indptr[b] + p / page_size], entry p % page_size; the request's sequence after
//   the append is (kv_indptr[b + 1] - kv_indptr[b] - 1) * page_size + kv_last_page_len[b] long.
//
// What lands in the cache is, bit for bit, apply_rope's k (rounded to k's dtype) and v, each then
// converted to the cache dtype: a cache of the value's own dtype gets its bits as they are
// (signaling NaNs included); otherwise f32/f16/bf16 round to nearest even; fp8 e4m3 (OCP E4M3, torch's
// float8_e4m3fn bits) stores value / scale rounded to nearest even, saturated to +-448 (infinities
// too), NaN kept NaN. Everything is validated before anything is written.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "posenc/core/frequencies.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "posenc/rope/tensor.h"

namespace posenc {

enum class CacheDType { kF32, kF16, kBF16, kFp8E4M3 };

std::string_view cache_dtype_name(CacheDType dtype);  // "f32", "f16", "bf16", "fp8_e4m3"
CacheDType parse_cache_dtype(std::string_view name);  // throws Error naming the value
std::size_t cache_dtype_size(CacheDType dtype);       // bytes per element

enum class KvCacheLayout { kVllm, kNhd, kHnd };

std::string_view kv_cache_layout_name(KvCacheLayout layout);  // "vllm", "nhd", "hnd"
KvCacheLayout parse_kv_cache_layout(std::string_view name);   // throws Error naming the value

// One paged KV cache: key and value tensors of one geometry and dtype (strides in elements,
// head_dim contiguous; any strides whose (page, entry, head) cells do not overlap).
struct KvCache {
  void* key = nullptr;
  void* value = nullptr;
  CacheDType dtype = CacheDType::kF32;
  KvCacheLayout layout = KvCacheLayout::kVllm;
  std::int64_t pages = 0;      // vLLM: num_blocks
  std::int64_t page_size = 0;  // vLLM: block_size
  std::int64_t heads = 0;      // kv heads
  std::int64_t head_dim = 0;
  std::int64_t page_stride = 0;
  std::int64_t entry_stride = 0;
  std::int64_t head_stride = 0;
  // fp8 only (stored = value / scale); must be 1 for the other dtypes, positive and finite.
  float k_scale = 1.0f;
  float v_scale = 1.0f;

  // Contiguous tensors in `layout`'s order (strides filled in).
  static KvCache contiguous(void* key, void* value, CacheDType dtype, KvCacheLayout layout,
                            std::int64_t pages, std::int64_t page_size, std::int64_t heads,
                            std::int64_t head_dim);
};

// FlashInfer's paged addressing (kNhd, kHnd), int32 as FlashInfer's IdType.
struct PagedKvIndex {
  std::span<const std::int32_t> kv_indptr;         // [batch + 1], non-decreasing from 0
  std::span<const std::int32_t> kv_indices;        // page ids, [kv_indptr[batch]] at least
  std::span<const std::int32_t> kv_last_page_len;  // [batch], in [1, page_size] (0: no pages)
  std::span<const std::int32_t> batch_indices;     // [tokens]: the request of each token
  std::span<const std::int32_t> positions;         // [tokens]: its position in the request's KV
};

struct KvAppendArgs {
  std::optional<TensorView> q;  // [tokens, heads_q, head_dim], rotated in place; absent: no q
  TensorView k;                 // [tokens, kv_heads, head_dim]; read only unless k_in_place
  TensorView v;                 // [tokens, kv_heads, head_dim]; read only
  bool rotate = true;           // false: write k as given (pre-RoPE caching; q untouched)
  bool k_in_place = false;      // also store the rotated k back into k (SGLang's in-place key)
  Positions positions;          // RoPE positions, as RopeArgs::positions (one or [axes, tokens])
  const CosSinTable* table = nullptr;          // optional, as RopeArgs::table
  std::span<const std::int64_t> slot_mapping;  // kVllm: [tokens] slots in [0, pages * page_size)
  std::optional<PagedKvIndex> paged;           // kNhd / kHnd
  int threads = 1;                             // [1, kMaxThreads]
};

// Rotates and appends (above). Throws Error naming the argument, the value and what was expected
// when shapes, dtypes, strides, scales, slots (negative, past the cache, two tokens on one slot),
// page indices or positions do not fit; nothing is written then. Returns the threads that ran.
int rope_append_kv_cache(const Frequencies& freqs, const KvCache& cache, const KvAppendArgs& args);

// FlashInfer's get_batch_indices_positions: the batch_indices and positions of tokens appended at
// the end of each request, given append_indptr [batch + 1] (the new tokens of each request) and
// the cache after the append (kv_indptr, kv_last_page_len, page_size). Throws Error on bad input.
void append_positions(std::span<const std::int32_t> append_indptr,
                      std::span<const std::int32_t> kv_indptr,
                      std::span<const std::int32_t> kv_last_page_len, std::int64_t page_size,
                      std::span<std::int32_t> batch_indices, std::span<std::int32_t> positions);

}  // namespace posenc
