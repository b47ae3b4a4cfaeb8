// rope_append_kv_cache (posenc/rope/kv_cache.h) on every SIMD target: the fused result equals
// apply_rope followed by a plain conversion and copy into the cache, bit for bit, for every
// input and cache dtype, cache layout, RoPE layout, position form, partial rotary and strided
// views; fp8 e4m3 against tests/reference/fp8_reference.h; every refusal leaves the cache as it
// was.
#include "posenc/rope/kv_cache.h"

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
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/frequencies.h"
#include "posenc/core/threads.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "reference/fp8_reference.h"
#include "reference/half_reference.h"
#include "support/error_of.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

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

float Load(const std::uint8_t* base, DType dtype, std::int64_t i) {
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
void StoreCache(std::uint8_t* base, CacheDType dtype, std::int64_t i, float v, float scale) {
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
    case CacheDType::kFp8E4M3:
      base[i] = posenc_ref::ToFp8E4M3(v / scale);
      return;
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
  bool packed = false;        // q, k, v inside one qkv row per token
  std::int64_t page_pad = 0;  // extra elements per cache page
  bool k_in_place = false;
  bool table = true;
  bool int32_positions = false;
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

Inputs Make(const Case& c, std::mt19937& rng) {
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
    s.vbuf = posenc::testing::Random(c.v_dtype, c.tokens * c.kv_heads * d, rng).bytes;
    s.v = posenc::TensorView::contiguous(s.vbuf.data(), c.v_dtype, c.tokens, c.kv_heads, d);
  }
  const std::int64_t axes = c.multi_axis ? 3 : 1;
  std::uniform_int_distribution<std::int64_t> pick(0, 5000);
  for (std::int64_t i = 0; i < axes * c.tokens; ++i) s.pos64.push_back(pick(rng));
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

Expected Reference(const Case& c, Inputs& s) {
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

void CheckCase(const Case& c, std::mt19937& rng, const std::string& what) {
  SCOPED_TRACE(what);
  Inputs s = Make(c, rng);
  const Expected e = Reference(c, s);
  posenc::rope_append_kv_cache(s.freqs, s.cache, s.args(c));
  EXPECT_TRUE(s.key_cache == e.key_cache) << "key cache differs";
  EXPECT_TRUE(s.value_cache == e.value_cache) << "value cache differs";
  EXPECT_TRUE(s.qkv == e.qkv) << "q (or k) differs from apply_rope's";
  EXPECT_TRUE(s.vbuf == e.vbuf) << "v was written";
}

std::string Name(const Case& c) {
  return std::string(dtype_name(c.dtype)) + "->" + std::string(cache_dtype_name(c.cache_dtype)) +
         " " + std::string(kv_cache_layout_name(c.layout)) + " " +
         std::string(layout_name(c.spec.layout)) + " head_dim " + std::to_string(c.spec.head_dim) +
         " rotary " + std::to_string(c.spec.rotary_dim) + "+" +
         std::to_string(c.spec.rotary_offset);
}

TEST(KvCache, FusedEqualsApplyThenCopyOnEveryTargetDtypeAndLayout) {
  std::mt19937 rng(7);
  posenc_test::ForEachTarget([&](const std::string& target) {
    const std::int64_t lanes = posenc_test::FloatLanes(target);
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (CacheDType cache : kCacheDTypes) {
        for (KvCacheLayout layout : kLayouts) {
          for (Layout rope : {Layout::kHalfSplit, Layout::kInterleaved}) {
            for (std::int64_t head_dim : {std::int64_t{2} * (lanes + 1), std::int64_t{128}}) {
              Case c;
              c.spec = posenc::testing::Spec(head_dim, head_dim, 0, rope);
              c.dtype = c.v_dtype = dtype;
              c.cache_dtype = cache;
              c.layout = layout;
              if (cache == CacheDType::kFp8E4M3) c.k_scale = c.v_scale = 0.0625f;
              CheckCase(c, rng, Name(c));
            }
          }
        }
      }
    }
  });
}

TEST(KvCache, PartialRotaryPackedQkvStridedCacheAndInPlaceKey) {
  std::mt19937 rng(11);
  posenc_test::ForEachTarget([&](const std::string&) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (CacheDType cache : kCacheDTypes) {
        for (KvCacheLayout layout : kLayouts) {
          for (Layout rope : {Layout::kHalfSplit, Layout::kInterleaved}) {
            for (bool in_place : {false, true}) {
              Case c;
              c.spec = posenc::testing::Spec(40, 16, 6, rope);  // dims 6..21 rotate
              c.dtype = dtype;
              c.v_dtype = dtype == DType::kF32 ? DType::kF16 : dtype;  // v of another dtype too
              c.cache_dtype = cache;
              c.layout = layout;
              c.packed = true;
              c.page_pad = 5;
              c.k_in_place = in_place;
              // fp8: a power-of-two scale (the kernel multiplies by its exact reciprocal) and
              // another (it divides), each on k (the rotated path) and on v (the copy path).
              if (cache == CacheDType::kFp8E4M3) {
                c.k_scale = in_place ? 0.5f : 3.0f;
                c.v_scale = in_place ? 3.0f : 0.5f;
              }
              CheckCase(c, rng, Name(c) + (in_place ? " k in place" : ""));
            }
          }
        }
      }
    }
  });
}

TEST(KvCache, EveryPositionFormMethodTableAndThreads) {
  std::mt19937 rng(13);
  for (KvCacheLayout layout : kLayouts) {
    for (bool table : {false, true}) {
      for (bool int32 : {false, true}) {
        for (bool yarn : {false, true}) {
          Case c;
          c.spec = yarn ? posenc::testing::YarnSpec(64, Layout::kHalfSplit)
                        : posenc::testing::Spec(64, 64, 0, Layout::kHalfSplit);
          c.dtype = c.v_dtype = DType::kF16;
          c.cache_dtype = CacheDType::kBF16;
          c.layout = layout;
          c.table = table;
          c.int32_positions = int32;
          CheckCase(c, rng, Name(c) + (table ? " table" : " on the fly") + (yarn ? " yarn" : ""));
        }
      }
      // Multi-axis positions [3, tokens] (Qwen2-VL's M-RoPE sections).
      Case m;
      m.spec = posenc::testing::Spec(32, 32, 0, Layout::kHalfSplit);
      const std::int64_t sections[] = {4, 6, 6};
      m.spec.axis_map = posenc::mrope_sections(sections);
      m.multi_axis = true;
      m.table = table;
      m.layout = layout;
      m.cache_dtype = CacheDType::kF16;
      CheckCase(m, rng, Name(m) + " mrope" + (table ? " table" : ""));
    }
    // Enough work to split over threads.
    Case big;
    big.spec = posenc::testing::Spec(128, 128, 0, Layout::kHalfSplit);
    big.tokens = 300;
    big.q_heads = 8;
    big.kv_heads = 4;
    big.threads = 2;
    big.layout = layout;
    big.cache_dtype = CacheDType::kBF16;
    CheckCase(big, rng, Name(big) + " 2 threads");
  }
}

// A valid count above the hardware threads runs on hardware_threads() of them (threads.h); the
// return value says how many ran.
TEST(KvCache, ThreadCountsAboveTheHardwareAreCappedToIt) {
  std::mt19937 rng(29);
  Case c;
  c.spec = posenc::testing::Spec(128, 128, 0, Layout::kHalfSplit);
  c.tokens = 300;
  c.q_heads = 8;
  c.kv_heads = 4;
  c.threads = posenc::kMaxThreads;
  Inputs s = Make(c, rng);
  EXPECT_EQ(posenc::rope_append_kv_cache(s.freqs, s.cache, s.args(c)),
            std::min(posenc::kMaxThreads, posenc::hardware_threads()));
  CheckCase(c, rng, Name(c) + " kMaxThreads");
}

// Unrotated append (rotate = false): k is copied as given, q is not accepted.
TEST(KvCache, WithoutRotationKIsCopiedAsGiven) {
  std::mt19937 rng(17);
  Case c;
  c.spec = posenc::testing::Spec(16, 16, 0, Layout::kHalfSplit);
  c.cache_dtype = CacheDType::kF16;
  Inputs s = Make(c, rng);
  posenc::KvAppendArgs a = s.args(c);
  a.q.reset();
  a.rotate = false;
  a.positions = std::span<const std::int64_t>();
  posenc::rope_append_kv_cache(s.freqs, s.cache, a);
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    const auto [page, entry] = s.cells[static_cast<std::size_t>(t)];
    for (std::int64_t h = 0; h < c.kv_heads; ++h) {
      for (std::int64_t j = 0; j < 16; ++j) {
        const float x = Load(static_cast<const std::uint8_t*>(s.k.data), DType::kF32,
                             t * s.k.token_stride + h * s.k.head_stride + j);
        std::uint16_t got;
        std::memcpy(
            &got,
            s.key_cache.data() + 2 * (page * s.cache.page_stride + entry * s.cache.entry_stride +
                                      h * s.cache.head_stride + j),
            2);
        ASSERT_EQ(got, posenc_ref::ToF16(x)) << t << " " << h << " " << j;
      }
    }
  }
  a.q = s.q;
  EXPECT_THAT(error_of([&] { posenc::rope_append_kv_cache(s.freqs, s.cache, a); }),
              HasSubstr("q is set but rotate is false"));
}

// fp8 e4m3 through the fused call's value path: every float32 value class against the reference,
// on every target (each lane position: values run through full vectors and tails).
TEST(KvCache, Fp8E4M3ConversionMatchesReference) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               448.0f,
                               -448.0f,
                               449.0f,
                               464.0f,
                               479.9f,
                               480.0f,
                               1e6f,
                               -1e6f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               -std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min(),
                               1e-30f};
  // Every E4M3 value and the midpoints between neighbours (ties: to the even code), and just
  // beside each midpoint.
  for (int code = 0; code < 0x7E; ++code) {
    const double lo = posenc_ref::Fp8E4M3Value(static_cast<std::uint8_t>(code));
    const double hi = posenc_ref::Fp8E4M3Value(static_cast<std::uint8_t>(code + 1));
    const auto mid = static_cast<float>((lo + hi) / 2);  // exact in float32
    for (float v :
         {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  std::mt19937 rng(19);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 4000; ++i) values.push_back(std::bit_cast<float>(bits(rng)));
  // Random magnitudes around the E4M3 range.
  std::uniform_real_distribution<float> exp2(-14.0f, 10.0f);
  for (int i = 0; i < 4000; ++i) values.push_back(std::exp2(exp2(rng)) * (i % 2 ? 1.0f : -1.0f));
  const std::int64_t d = 32;
  while (values.size() % d) values.push_back(0.5f);
  const auto tokens = static_cast<std::int64_t>(values.size()) / d;

  // Powers of two in [2^-126, 2^126] take the kernel's multiply-by-the-exact-reciprocal path;
  // 2^127, 2^-127 (subnormal), 2^-149 and the others divide: both must give the reference's bits.
  for (float scale : {1.0f, 0.25f, 3.0f, 1.0f / 64, 0.1f, std::ldexp(1.0f, -126),
                      std::ldexp(1.0f, 126), std::ldexp(1.0f, 127), std::ldexp(1.0f, -127),
                      std::ldexp(1.0f, -149), std::nextafter(0.25f, 1.0f)}) {
    std::vector<std::uint8_t> expect(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      expect[i] = posenc_ref::ToFp8E4M3(values[i] / scale);
    posenc_test::ForEachTarget([&](const std::string&) {
      const posenc::RopeSpec spec = posenc::testing::Spec(d, d, 0, Layout::kHalfSplit);
      const posenc::Frequencies f = posenc::compute_frequencies(spec);
      std::vector<float> k(values.size(), 0.0f);
      std::vector<std::uint8_t> kc(values.size()), vc(values.size());
      posenc::KvCache cache = posenc::KvCache::contiguous(
          kc.data(), vc.data(), CacheDType::kFp8E4M3, KvCacheLayout::kVllm, tokens, 1, 1, d);
      cache.v_scale = scale;
      std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens), 0), slots(pos.size());
      std::iota(slots.begin(), slots.end(), 0);
      posenc::KvAppendArgs a;
      a.k = posenc::TensorView::contiguous(k.data(), DType::kF32, tokens, 1, d);
      a.v = posenc::TensorView::contiguous(values.data(), DType::kF32, tokens, 1, d);
      a.positions = std::span<const std::int64_t>(pos);
      a.slot_mapping = slots;
      posenc::rope_append_kv_cache(f, cache, a);
      for (std::size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(static_cast<int>(vc[i]), static_cast<int>(expect[i]))
            << "value " << values[i] << " (bits 0x" << std::hex
            << std::bit_cast<std::uint32_t>(values[i]) << ") / scale " << scale;
      }
    });
  }
  // The reference itself at the points the formats define: max, min normal, min subnormal,
  // saturation, NaN, a tie to even.
  EXPECT_EQ(posenc_ref::ToFp8E4M3(448.0f), 0x7E);
  EXPECT_EQ(posenc_ref::ToFp8E4M3(1e9f), 0x7E);
  EXPECT_EQ(posenc_ref::ToFp8E4M3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(posenc_ref::ToFp8E4M3(std::ldexp(1.0f, -6)), 0x08);
  EXPECT_EQ(posenc_ref::ToFp8E4M3(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(posenc_ref::ToFp8E4M3(std::ldexp(1.0f, -10)), 0x00);  // tie between 0 and 2^-9
  EXPECT_EQ(posenc_ref::ToFp8E4M3(std::ldexp(3.0f, -10)), 0x02);  // tie 1 / 2 -> even
  EXPECT_EQ(posenc_ref::ToFp8E4M3(1.0625f), 0x38);                // tie 1 / 1.125 -> even
  EXPECT_EQ(posenc_ref::ToFp8E4M3(std::numeric_limits<float>::quiet_NaN()) & 0x7F, 0x7F);
}

// bf16 rounding of arbitrary float32 bits (the value path converts v as given), on every target
// and at every lane position (head_dims that run the two-vector, one-vector and one-lane loops):
// ties to even both ways, -0, subnormals, max finite rounding to infinity, NaN payloads kept NaN
// (quiet bit set, payload truncated: never rounded into infinity or across the sign).
TEST(KvCache, Bf16StoreRoundsEveryValueClassToNearestEven) {
  auto expect_bf16 = [](std::uint32_t u) -> std::uint16_t {
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    // Nearest even by cases, not the kernel's add-and-shift recipe.
    const std::uint32_t hi = u >> 16, lo = u & 0xFFFFu;
    const bool up = lo > 0x8000u || (lo == 0x8000u && (hi & 1u));
    return static_cast<std::uint16_t>(hi + (up ? 1u : 0u));
  };
  std::vector<std::uint32_t> bits = {
      0x00000000u, 0x80000000u,               // +-0
      0x3F808000u, 0x3F818000u,               // ties: even stays (0x3F80), odd rounds up (0x3F82)
      0xBF808000u, 0xBF818000u,               // the same, negative
      0x3F807FFFu, 0x3F808001u, 0x3F81FFFFu,  // beside a tie
      0x00000001u, 0x00008000u, 0x00018000u, 0x807FFFFFu,  // subnormals, subnormal ties
      0x7F7FFFFFu, 0xFF7FFFFFu,                            // max finite -> +-inf
      0x7F7F7FFFu, 0x7F7F8000u, 0x7F7E8000u,               // below max's tie, ties at the top
      0x7F800000u, 0xFF800000u,                            // +-inf
      0x7F800001u, 0x7FBFFFFFu, 0x7FC00000u, 0x7FC08000u, 0x7FFFFFFFu,  // NaN payloads
      0xFF800001u, 0xFFC0FFFFu, 0xFFFFFFFFu, 0x7F808000u, 0x7FFF8000u};
  std::mt19937 rng(23);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 2000; ++i) bits.push_back(any(rng));
  for (const std::int64_t d :
       {std::int64_t{2}, std::int64_t{7}, std::int64_t{29}, std::int64_t{37}, std::int64_t{64}}) {
    std::vector<std::uint32_t> vals = bits;
    while (vals.size() % static_cast<std::size_t>(d)) vals.push_back(0x3F808000u);
    const auto tokens = static_cast<std::int64_t>(vals.size()) / d;
    std::vector<float> v(vals.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::bit_cast<float>(vals[i]);
    posenc_test::ForEachTarget([&](const std::string& target) {
      const posenc::RopeSpec spec = posenc::testing::Spec(d, d & ~1, 0, Layout::kHalfSplit);
      const posenc::Frequencies f = posenc::compute_frequencies(spec);
      std::vector<float> k(v.size(), 0.0f);
      std::vector<std::uint16_t> kc(v.size()), vc(v.size());
      posenc::KvCache cache = posenc::KvCache::contiguous(kc.data(), vc.data(), CacheDType::kBF16,
                                                          KvCacheLayout::kVllm, tokens, 1, 1, d);
      std::vector<std::int64_t> slots(static_cast<std::size_t>(tokens));
      std::iota(slots.begin(), slots.end(), 0);
      posenc::KvAppendArgs a;
      a.k = posenc::TensorView::contiguous(k.data(), DType::kF32, tokens, 1, d);
      a.v = posenc::TensorView::contiguous(v.data(), DType::kF32, tokens, 1, d);
      a.rotate = false;
      a.slot_mapping = slots;
      posenc::rope_append_kv_cache(f, cache, a);
      int wrong = 0;
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (vc[i] != expect_bf16(vals[i]) && ++wrong <= 5) {
          ADD_FAILURE() << target << " head_dim " << d << " element " << i << ": 0x" << std::hex
                        << vals[i] << " -> 0x" << vc[i] << ", expected 0x" << expect_bf16(vals[i]);
        }
      }
      EXPECT_EQ(wrong, 0) << target << " head_dim " << d;
    });
  }
  EXPECT_EQ(expect_bf16(0x7F7FFFFFu), 0x7F80);  // the reference itself: max finite -> inf
  EXPECT_EQ(expect_bf16(0x7FFFFFFFu), 0x7FFF);  // a NaN stays NaN, sign kept
  EXPECT_EQ(expect_bf16(0x3F818000u), 0x3F82);
}

// Every refusal names the argument and value, and leaves q, k, v and both caches untouched.
TEST(KvCache, RefusalsNameTheArgumentAndWriteNothing) {
  std::mt19937 rng(23);
  struct Bad {
    const char* what;
    KvCacheLayout layout;
    std::function<void(Inputs&, posenc::KvAppendArgs&)> edit;
    std::vector<std::string> says;
  };
  const std::vector<Bad> bad = {
      {"negative slot",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) {
         static std::vector<std::int64_t> s;
         s.assign(a.slot_mapping.begin(), a.slot_mapping.end());
         s[4] = -1;
         a.slot_mapping = s;
       },
       {"slot_mapping[4] (-1) must be in [0, "}},
      {"slot past the cache",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto& a) {
         static std::vector<std::int64_t> s;
         s.assign(a.slot_mapping.begin(), a.slot_mapping.end());
         s[2] = st.cache.pages * st.cache.page_size;
         a.slot_mapping = s;
       },
       {"slot_mapping[2] (20) must be in [0, 20)", "num_blocks 5 x block_size 4"}},
      {"duplicated slot",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) {
         static std::vector<std::int64_t> s;
         s.assign(a.slot_mapping.begin(), a.slot_mapping.end());
         s[3] = s[1];
         a.slot_mapping = s;
       },
       {"slot_mapping[3]", "is also the slot of token 1"}},
      {"slot count",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.slot_mapping = a.slot_mapping.subspan(1); },
       {"slot_mapping has 4 entries; expected one per token (5)"}},
      {"paged on a vllm cache",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto& a) {
         a.paged = posenc::PagedKvIndex{st.indptr, st.indices, st.last_len, st.batch_indices,
                                        st.positions};
       },
       {"paged is set, but a vllm cache"}},
      {"page index out of range",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.indices[0] = 99;
         a.paged->kv_indices = st.indices;
       },
       {"paged.kv_indices[0] (99) must be a page in [0, 5)"}},
      {"negative page index",
       KvCacheLayout::kHnd,
       [](Inputs& st, auto& a) {
         st.indices[1] = -2;
         a.paged->kv_indices = st.indices;
       },
       {"paged.kv_indices[1] (-2)"}},
      {"position past the request",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.positions[0] = 40;
         a.paged->positions = st.positions;
       },
       {"paged.positions[0] (40) must be in [0, 5)", "request 0"}},
      {"batch index",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.batch_indices[1] = 2;
         a.paged->batch_indices = st.batch_indices;
       },
       {"paged.batch_indices[1] (2) must be a request in [0, 2)"}},
      {"two tokens on one cell",
       KvCacheLayout::kHnd,
       [](Inputs& st, auto& a) {
         st.positions[1] = st.positions[0];
         a.paged->positions = st.positions;
       },
       {"token 1", "as token 0 does", "each token needs its own cell"}},
      {"last page len",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.last_len[0] = 9;
         a.paged->kv_last_page_len = st.last_len;
       },
       {"paged.kv_last_page_len[0] (9) must be in [1, 4]"}},
      {"indptr decreasing",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.indptr[2] = 1;
         st.indptr[1] = 2;
         a.paged->kv_indptr = st.indptr;
       },
       {"paged.kv_indptr[2] (1) must not be below kv_indptr[1] (2)"}},
      {"no paged index",
       KvCacheLayout::kNhd,
       [](Inputs&, auto& a) { a.paged.reset(); },
       {"a nhd cache is addressed by paged"}},
      {"cache heads",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.heads = 1; },
       {"k: heads (2) must equal the cache's heads (1)"}},
      {"cache head_dim",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.head_dim = 8; },
       {"cache head_dim (8) must equal the spec's head_dim (16)"}},
      {"cache strides overlap",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.entry_stride = 20; },
       {"cache strides", "entry_stride 20", "overlap"}},
      {"scale on an f16 cache",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.k_scale = 2.0f; },
       {"cache k_scale (2.0", "fp8_e4m3 only", "f16 cache"}},
      {"null value cache",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.value = nullptr; },
       {"cache value is null"}},
      {"v tokens",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.v.tokens = 4; },
       {"v: tokens (4) must equal the number of positions (5)"}},
      {"v heads",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.v.heads = 1; },
       {"v: heads (1) must equal the cache's heads (2)"}},
      {"q head_dim",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.q->head_dim = 8; },
       {"q: head_dim (8)"}},
      {"positions count",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto& a) {
         a.positions = std::span<const std::int64_t>(st.pos64).subspan(1);
       },
       {"k: tokens (5) must equal the number of positions (4)"}},
      {"threads",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.threads = 0; },
       {"threads (0) must be in [1, "}},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.what);
    Case c;
    c.spec = posenc::testing::Spec(16, 16, 0, Layout::kHalfSplit);
    c.layout = b.layout;
    c.cache_dtype = CacheDType::kF16;
    Inputs s = Make(c, rng);
    posenc::KvAppendArgs a = s.args(c);
    b.edit(s, a);
    const auto qkv = s.qkv, vbuf = s.vbuf, kc = s.key_cache, vc = s.value_cache;
    const std::string err = error_of([&] { posenc::rope_append_kv_cache(s.freqs, s.cache, a); });
    EXPECT_THAT(err, HasSubstr("rope_append_kv_cache: "));
    for (const std::string& part : b.says) EXPECT_THAT(err, HasSubstr(part));
    EXPECT_TRUE(s.qkv == qkv && s.vbuf == vbuf) << "inputs written before the refusal";
    EXPECT_TRUE(s.key_cache == kc && s.value_cache == vc) << "cache written before the refusal";
  }
  // fp8 scales must be positive and finite.
  Case c;
  c.spec = posenc::testing::Spec(16, 16, 0, Layout::kHalfSplit);
  c.cache_dtype = CacheDType::kFp8E4M3;
  for (float scale : {0.0f, -1.0f, std::numeric_limits<float>::infinity()}) {
    Inputs s = Make(c, rng);
    s.cache.v_scale = scale;
    EXPECT_THAT(error_of([&] { posenc::rope_append_kv_cache(s.freqs, s.cache, s.args(c)); }),
                Names("cache v_scale", "must be positive and finite"));
  }
}

TEST(KvCache, AppendPositionsMirrorsFlashInfer) {
  // flashinfer.page.get_batch_indices_positions: 3 requests appending 2, 0 and 3 tokens, whose
  // KV lengths after the append are (2 - 1) * 4 + 3 = 7, 4 and 3.
  const std::vector<std::int32_t> append = {0, 2, 2, 5}, indptr = {0, 2, 3, 4}, last = {3, 4, 3};
  std::vector<std::int32_t> batch(5), pos(5);
  posenc::append_positions(append, indptr, last, 4, batch, pos);
  EXPECT_EQ(batch, (std::vector<std::int32_t>{0, 0, 2, 2, 2}));
  EXPECT_EQ(pos, (std::vector<std::int32_t>{5, 6, 0, 1, 2}));
  std::vector<std::int32_t> short_out(4);
  EXPECT_THAT(error_of([&] { posenc::append_positions(append, indptr, last, 4, short_out, pos); }),
              HasSubstr("append_indptr[3] (5) entries; got 4 and 5"));
  const std::vector<std::int32_t> too_many = {0, 8, 8, 11};
  std::vector<std::int32_t> b11(11), p11(11);
  EXPECT_THAT(error_of([&] { posenc::append_positions(too_many, indptr, last, 4, b11, p11); }),
              HasSubstr("request 0 appends 8 tokens but its KV length after the append is 7"));
}

TEST(KvCache, NamesParse) {
  for (CacheDType d : kCacheDTypes)
    EXPECT_EQ(posenc::parse_cache_dtype(posenc::cache_dtype_name(d)), d);
  for (KvCacheLayout l : kLayouts)
    EXPECT_EQ(posenc::parse_kv_cache_layout(posenc::kv_cache_layout_name(l)), l);
  EXPECT_THAT(error_of([] { posenc::parse_cache_dtype("fp8"); }), Names("cache dtype", "\"fp8\""));
  EXPECT_THAT(error_of([] { posenc::parse_kv_cache_layout("NHD"); }),
              Names("kv cache layout", "\"NHD\""));
}

}  // namespace
