// tests/support/kv_cache_case.h: the fused RoPE + KV-cache append's test harness (test-only): one
// call's inputs (q, k, v as views of packed or separate buffers, a paged cache with optional
// padding, the cells of every token, any position form) and what the call must produce, computed
// as apply_rope on copies followed by a plain conversion and copy (`Reference`, not src/ code).
// Used by tests/rope/kv_cache*_test.cc.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>
#include "posenc/rope/kv_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/frequencies.h"
#include "posenc/core/threads.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "reference/fp8_reference.h"
#include "reference/half_reference.h"
#include "rope/kv_cache_streaming.h"
#include "support/error_of.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace posenc_test::kv_cache {

using posenc::CacheDType;
using posenc::DType;
using posenc::KvCacheLayout;
using posenc::Layout;
using posenc::testing::error_of;
using posenc::testing::Names;
using ::testing::HasSubstr;

constexpr CacheDType kCacheDTypes[] = {CacheDType::kF32, CacheDType::kF16, CacheDType::kBF16,
                                       CacheDType::kFp8E4M3};
constexpr KvCacheLayout kLayouts[] = {KvCacheLayout::kVllm, KvCacheLayout::kNhd,
                                      KvCacheLayout::kHnd};

inline float Load(const std::uint8_t* base, DType dtype, std::int64_t i) {
  if (dtype == DType::kF32) {
    float f;
    std::memcpy(&f, base + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, base + 2 * i, 2);
  return dtype == DType::kF16 ? posenc_ref::FromF16(h) : posenc_ref::FromBf16(h);
}

// The plain conversion of one value into the cache (a reference, not src/ code).
inline void StoreCache(std::uint8_t* base, CacheDType dtype, std::int64_t i, float v, float scale) {
  switch (dtype) {
    case CacheDType::kF32:
      std::memcpy(base + 4 * i, &v, 4);
      return;
    case CacheDType::kF16: {
      const std::uint16_t h = posenc_ref::ToF16(v);
      std::memcpy(base + 2 * i, &h, 2);
      return;
    }
    case CacheDType::kBF16: {
      const std::uint16_t h = posenc_ref::ToBf16(v);
      std::memcpy(base + 2 * i, &h, 2);
      return;
    }
    case CacheDType::kFp8E4M3: {
      // The brute-force reference (126 candidates a value) remembered per quotient: large cases
      // (the streaming-store test, millions of elements) hold only 16-bit inputs, a few
      // thousand distinct quotients.
      static std::unordered_map<std::uint32_t, std::uint8_t> memo;
      const float q = v / scale;
      const auto [it, fresh] = memo.try_emplace(std::bit_cast<std::uint32_t>(q), 0);
      if (fresh) it->second = posenc_ref::ToFp8E4M3(q);
      base[i] = it->second;
      return;
    }
  }
}

// One fused call's inputs: q, k, v as views of one packed [tokens, (Hq + 2 Hkv) * D + pad] buffer
// (or separate contiguous tensors), a cache with optional padding between pages, and the cells.
struct Case {
  posenc::RopeSpec spec;
  DType dtype = DType::kF32;    // q and k
  DType v_dtype = DType::kF32;  // v
  CacheDType cache_dtype = CacheDType::kF32;
  KvCacheLayout layout = KvCacheLayout::kVllm;
  std::int64_t tokens = 5, q_heads = 4, kv_heads = 2;
  bool packed = false;          // q, k, v inside one qkv row per token
  std::int64_t v_head_pad = 0;  // v apart (not packed): extra elements after each of its heads
  std::int64_t page_pad = 0;    // extra elements per cache page
  bool k_in_place = false;
  bool table = true;
  bool int32_positions = false;
  bool consecutive_positions = false;  // 1000, 1001, ... (a prefill: on the fly, stepped rows)
  bool multi_axis = false;
  int threads = 1;
  float k_scale = 1.0f, v_scale = 1.0f;
};

struct Inputs {
  explicit Inputs(posenc::Frequencies f) : freqs(std::move(f)) {}
  posenc::Frequencies freqs;
  std::vector<std::uint8_t> qkv, vbuf;
  posenc::TensorView q, k, v;
  std::vector<std::int64_t> pos64;
  std::vector<std::int32_t> pos32;
  std::optional<posenc::CosSinTable> table;
  std::vector<std::uint8_t> key_cache, value_cache;
  posenc::KvCache cache;
  std::vector<std::int64_t> slots;
  std::vector<std::int32_t> indptr, indices, last_len, batch_indices, positions;
  std::vector<std::pair<std::int64_t, std::int64_t>> cells;  // (page, entry) per token

  posenc::KvAppendArgs args(const Case& c) {
    posenc::KvAppendArgs a;
    a.q = q;
    a.k = k;
    a.v = v;
    if (c.int32_positions) {
      a.positions = std::span<const std::int32_t>(pos32);
    } else {
      a.positions = std::span<const std::int64_t>(pos64);
    }
    a.table = table ? &*table : nullptr;
    a.k_in_place = c.k_in_place;
    a.threads = c.threads;
    if (c.layout == KvCacheLayout::kVllm) {
      a.slot_mapping = slots;
    } else {
      a.paged = posenc::PagedKvIndex{indptr, indices, last_len, batch_indices, positions};
    }
    return a;
  }
};

inline Inputs Make(const Case& c, std::mt19937& rng) {
  Inputs s(posenc::compute_frequencies(c.spec));
  const std::int64_t d = c.spec.head_dim;
  const std::int64_t qs = dtype_size(c.dtype);
  if (c.packed) {
    // One row per token: q heads, k heads, v heads, then 3 elements of padding; v shares the
    // row only when it has q's dtype.
    const std::int64_t row = (c.q_heads + 2 * c.kv_heads) * d + 3;
    posenc::testing::Buffer b = posenc::testing::Random(c.dtype, c.tokens * row, rng);
    s.qkv = b.bytes;
    s.q = {s.qkv.data(), c.dtype, c.tokens, c.q_heads, d, row, d};
    s.k = {s.qkv.data() + c.q_heads * d * qs, c.dtype, c.tokens, c.kv_heads, d, row, d};
    s.v = {
        s.qkv.data() + (c.q_heads + c.kv_heads) * d * qs, c.dtype, c.tokens, c.kv_heads, d, row, d};
  } else {
    posenc::testing::Buffer b =
        posenc::testing::Random(c.dtype, c.tokens * (c.q_heads + c.kv_heads) * d, rng);
    s.qkv = b.bytes;
    s.q = posenc::TensorView::contiguous(s.qkv.data(), c.dtype, c.tokens, c.q_heads, d);
    s.k = posenc::TensorView::contiguous(s.qkv.data() + c.tokens * c.q_heads * d * qs, c.dtype,
                                         c.tokens, c.kv_heads, d);
  }
  if (!c.packed || c.v_dtype != c.dtype) {
    const std::int64_t head = d + c.v_head_pad;
    s.vbuf = posenc::testing::Random(c.v_dtype, c.tokens * c.kv_heads * head, rng).bytes;
    s.v = {s.vbuf.data(), c.v_dtype, c.tokens, c.kv_heads, d, c.kv_heads * head, head};
  }
  const std::int64_t axes = c.multi_axis ? 3 : 1;
  std::uniform_int_distribution<std::int64_t> pick(0, 5000);
  for (std::int64_t i = 0; i < axes * c.tokens; ++i)
    s.pos64.push_back(c.consecutive_positions ? 1000 + i % c.tokens : pick(rng));
  for (std::int64_t p : s.pos64) s.pos32.push_back(static_cast<std::int32_t>(p));
  if (c.table) s.table.emplace(s.freqs, 3000);  // some positions inside, some past it

  const std::int64_t page_size = 4, pages = 2 * c.tokens / page_size + 3;
  const std::int64_t es = static_cast<std::int64_t>(posenc::cache_dtype_size(c.cache_dtype));
  s.cache = posenc::KvCache::contiguous(nullptr, nullptr, c.cache_dtype, c.layout, pages, page_size,
                                        c.kv_heads, d);
  s.cache.page_stride += c.page_pad;
  const std::size_t bytes = static_cast<std::size_t>(pages * s.cache.page_stride * es);
  s.key_cache.assign(bytes, 0xA5);
  s.value_cache.assign(bytes, 0x5A);
  s.cache.key = s.key_cache.data();
  s.cache.value = s.value_cache.data();
  s.cache.k_scale = c.k_scale;
  s.cache.v_scale = c.v_scale;
  if (c.layout == KvCacheLayout::kVllm) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(pages * page_size));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    s.slots.assign(all.begin(), all.begin() + c.tokens);
    for (std::int64_t slot : s.slots) s.cells.push_back({slot / page_size, slot % page_size});
  } else {
    // Two requests: the first holds 3 tokens before the append, the second none; tokens are
    // split between them and appended at the end (append_positions), pages shuffled.
    std::vector<std::int32_t> page_ids(static_cast<std::size_t>(pages));
    std::iota(page_ids.begin(), page_ids.end(), 0);
    std::shuffle(page_ids.begin(), page_ids.end(), rng);
    const std::int64_t first = c.tokens / 2, second = c.tokens - first;
    const std::int64_t len0 = 3 + first, len1 = second;
    auto pages_for = [&](std::int64_t len) { return (len + page_size - 1) / page_size; };
    const std::int64_t p0 = pages_for(len0), p1 = pages_for(len1);
    s.indptr = {0, static_cast<std::int32_t>(p0), static_cast<std::int32_t>(p0 + p1)};
    s.indices.assign(page_ids.begin(), page_ids.begin() + p0 + p1);
    auto last = [&](std::int64_t len, std::int64_t p) {
      return static_cast<std::int32_t>(p == 0 ? 0 : len - (p - 1) * page_size);
    };
    s.last_len = {last(len0, p0), last(len1, p1)};
    const std::vector<std::int32_t> append = {0, static_cast<std::int32_t>(first),
                                              static_cast<std::int32_t>(c.tokens)};
    s.batch_indices.resize(static_cast<std::size_t>(c.tokens));
    s.positions.resize(s.batch_indices.size());
    posenc::append_positions(append, s.indptr, s.last_len, page_size, s.batch_indices, s.positions);
    for (std::int64_t t = 0; t < c.tokens; ++t) {
      const auto b = static_cast<std::size_t>(s.batch_indices[static_cast<std::size_t>(t)]);
      const std::int64_t pos = s.positions[static_cast<std::size_t>(t)];
      s.cells.push_back(
          {s.indices[static_cast<std::size_t>(s.indptr[b] + pos / page_size)], pos % page_size});
    }
  }
  return s;
}

// What the fused call must produce: apply_rope on copies, then each element converted and copied
// into the cell of its token.
struct Expected {
  std::vector<std::uint8_t> qkv, vbuf, key_cache, value_cache;
};

inline Expected Reference(const Case& c, Inputs& s) {
  Expected e{s.qkv, s.vbuf, s.key_cache, s.value_cache};
  auto rebase = [&](posenc::TensorView v) {
    const auto* base = static_cast<std::uint8_t*>(v.data);
    if (base >= s.qkv.data() && base < s.qkv.data() + s.qkv.size())
      v.data = e.qkv.data() + (base - s.qkv.data());
    else
      v.data = e.vbuf.data() + (base - s.vbuf.data());
    return v;
  };
  posenc::RopeArgs ra;
  ra.q = rebase(s.q);
  ra.k = rebase(s.k);
  const posenc::KvAppendArgs fa = s.args(c);
  ra.positions = fa.positions;
  ra.table = fa.table;
  posenc::apply_rope(s.freqs, ra);
  const posenc::TensorView k = *ra.k, v = rebase(s.v);
  const std::int64_t d = c.spec.head_dim;
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    const auto [page, entry] = s.cells[static_cast<std::size_t>(t)];
    for (std::int64_t h = 0; h < c.kv_heads; ++h) {
      const std::int64_t cell =
          page * s.cache.page_stride + entry * s.cache.entry_stride + h * s.cache.head_stride;
      for (std::int64_t j = 0; j < d; ++j) {
        const auto* kb = static_cast<const std::uint8_t*>(k.data);
        const auto* vb = static_cast<const std::uint8_t*>(v.data);
        StoreCache(e.key_cache.data(), c.cache_dtype, cell + j,
                   Load(kb, k.dtype, t * k.token_stride + h * k.head_stride + j), c.k_scale);
        StoreCache(e.value_cache.data(), c.cache_dtype, cell + j,
                   Load(vb, v.dtype, t * v.token_stride + h * v.head_stride + j), c.v_scale);
      }
    }
  }
  if (!c.k_in_place) {
    // k stays as given: restore its bytes in the expected buffer.
    const std::int64_t ks = dtype_size(c.dtype);
    const auto* from = static_cast<const std::uint8_t*>(s.k.data);
    auto* to = static_cast<std::uint8_t*>(k.data);
    for (std::int64_t t = 0; t < c.tokens; ++t) {
      for (std::int64_t h = 0; h < c.kv_heads; ++h) {
        const std::int64_t at = (t * k.token_stride + h * k.head_stride) * ks;
        std::memcpy(to + at, from + at, static_cast<std::size_t>(d * ks));
      }
    }
  }
  return e;
}

inline void CheckCase(const Case& c, std::mt19937& rng, const std::string& what) {
  SCOPED_TRACE(what);
  Inputs s = Make(c, rng);
  const Expected e = Reference(c, s);
  posenc::rope_append_kv_cache(s.freqs, s.cache, s.args(c));
  EXPECT_TRUE(s.key_cache == e.key_cache) << "key cache differs";
  EXPECT_TRUE(s.value_cache == e.value_cache) << "value cache differs";
  EXPECT_TRUE(s.qkv == e.qkv) << "q (or k) differs from apply_rope's";
  EXPECT_TRUE(s.vbuf == e.vbuf) << "v was written";
}

inline std::string Name(const Case& c) {
  return std::string(dtype_name(c.dtype)) + "->" + std::string(cache_dtype_name(c.cache_dtype)) +
         " " + std::string(kv_cache_layout_name(c.layout)) + " " +
         std::string(layout_name(c.spec.layout)) + " head_dim " + std::to_string(c.spec.head_dim) +
         " rotary " + std::to_string(c.spec.rotary_dim) + "+" +
         std::to_string(c.spec.rotary_offset);
}

// The streaming tests (kv_cache_test.cc, kv_cache_dtypes_test.cc) run with the threshold of
// streaming stores (kv_cache_streaming.h) at 256 KiB (or less) instead of 4 MiB: the same code
// paths on a sixteenth of the data (at 4 MiB the three tests of kv_cache_test.cc took 150 s under
// ASan + UBSan). The threshold found comes back at the end of each test.
class StreamThreshold {
 public:
  static constexpr std::int64_t kBytes = std::int64_t{256} << 10;
  explicit StreamThreshold(std::int64_t bytes = kBytes) {
    posenc::detail::set_stream_cache_bytes(bytes);
  }
  ~StreamThreshold() { posenc::detail::set_stream_cache_bytes(previous_); }
  StreamThreshold(const StreamThreshold&) = delete;
  StreamThreshold& operator=(const StreamThreshold&) = delete;

 private:
  std::int64_t previous_ = posenc::detail::stream_cache_bytes();
};

}  // namespace posenc_test::kv_cache
