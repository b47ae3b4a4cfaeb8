// The cache conversions of rope_append_kv_cache on every SIMD target, value class by value class:
// fp8 e4m3 against tests/reference/fp8_reference.h (from float32 by both scale paths; from every
// bf16 and f16 pattern), bf16 rounding to nearest even of arbitrary float32 bits.
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
#include <string_view>
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
#include "rope/kernels/kv_cache_kernel.h"
#include "support/error_of.h"
#include "support/kv_cache_case.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

// The harness, with its using-declarations (CacheDType, DType, error_of, Names, HasSubstr, ...).
using namespace posenc_test::kv_cache;  // NOLINT(google-build-using-namespace)

// A cache of v's own dtype holds v's bits, whatever they are: signaling NaNs (which a widening
// and narrowing round trip would quiet), subnormals, infinities, random bits; on every target, in
// full vectors and tails (head_dim 37).
TEST(KvCache, SameDtypeCacheCopiesTheBitsOfV) {
  const std::int64_t d = 37, tokens = 5;
  const auto count = static_cast<std::size_t>(d * tokens);
  std::mt19937 rng(41);
  std::uniform_int_distribution<std::uint32_t> bits;
  const std::pair<DType, CacheDType> kinds[] = {{DType::kF32, CacheDType::kF32},
                                                {DType::kF16, CacheDType::kF16},
                                                {DType::kBF16, CacheDType::kBF16}};
  for (const auto& kind : kinds) {
    // Named copies, not structured bindings: clang 14 cannot capture those in the lambda below.
    const DType dtype = kind.first;
    const CacheDType cache_dtype = kind.second;
    const std::size_t es = posenc::dtype_size(dtype);
    std::vector<std::uint8_t> v(count * es);
    for (std::size_t i = 0; i < count; ++i) {
      std::uint32_t b = bits(rng);
      if (i % 3 == 0) {  // signaling NaNs: exponent all ones, quiet bit clear, payload non-zero
        b = dtype == DType::kF32   ? 0x7F800001u | (b & 0x803FFFFEu)
            : dtype == DType::kF16 ? 0x7C01u | (b & 0x81FEu)
                                   : 0x7F81u | (b & 0x803Eu);
      }
      std::memcpy(&v[i * es], &b, es);  // little-endian: the low bytes
    }
    posenc_test::ForEachTarget([&](const std::string& target) {
      // head_dim 37, 36 of them rotated (k); v is copied whole.
      const posenc::Frequencies f =
          posenc::compute_frequencies(posenc::testing::Spec(d, d - 1, 0, Layout::kHalfSplit));
      std::vector<std::uint8_t> k(count * es, 0), kc(count * es), vc(count * es);
      posenc::KvCache cache = posenc::KvCache::contiguous(kc.data(), vc.data(), cache_dtype,
                                                          KvCacheLayout::kVllm, tokens, 1, 1, d);
      std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens), 0), slots(pos.size());
      std::iota(slots.begin(), slots.end(), 0);
      posenc::KvAppendArgs a;
      a.k = posenc::TensorView::contiguous(k.data(), dtype, tokens, 1, d);
      a.v = posenc::TensorView::contiguous(v.data(), dtype, tokens, 1, d);
      a.positions = std::span<const std::int64_t>(pos);
      a.slot_mapping = slots;
      posenc::rope_append_kv_cache(f, cache, a);
      EXPECT_EQ(vc, v) << target << " " << posenc::dtype_name(dtype);
    });
  }
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

// Every bit pattern of a 16-bit dtype as v and as k without rotation (rotate = false converts k
// as v) into an fp8 cache, on every target, against the reference's e4m3(v / scale):
// - bf16 (EveryBf16ToFp8MatchesReference): AVX-512 converts in 16-bit lanes by the scale's table
//   for scales in [2^-119, 2^127) (StoreBf16AsFp8, fp8-inl.h; the table's derivation in
//   kv_cache_kernel.h), and on AVX3_BF16 with AVX-512 VBMI 64 values at a time in byte lanes where
//   all 64 have a normal unsaturated code (Bf16RowsToFp8Vbmi).
// - f16 (EveryF16ToFp8MatchesReference): AVX-512 converts in 16-bit lanes by the scale's two tables
//   (StoreF16AsFp8, F16Fp8Map) for normal scales below 2^127, and with AVX-512 VBMI 64 values at
//   a time in byte lanes (F16RowsToFp8Vbmi) where all 64 are in the tables' range.
// The lanes they do not cover, the other scales and the other targets go through float32.
// Powers of two and calibrated scales (amax / 448 for amax 1 and 5.5, 0.0123, 0.1, 3, 1/3, a
// mantissa of all ones, 1 + 2^-23), the tables' ranges at both ends and just outside them, scales
// whose tables cover no f16 value (2^-119, 2^100), and the identity. Rows of 48 (the 32-lane body
// and the float32 tail), of 160 (two blocks of 64 and 32 after them) with plain stores and of 128
// with streaming stores into 64-byte aligned caches. The byte lanes run only on the AVX3_BF16
// target where the CPU also has VBMI (Zen 4 and later, Sapphire Rapids and later); elsewhere the
// same rows test the 16-bit paths.
struct HalfFormat {
  DType dtype;
  float (*value)(std::uint16_t);  // the reference's exact value of a pattern
  std::uint16_t one;              // 1.0: the normal lanes around the special ones
  std::uint16_t infinity;
  std::uint16_t specials[8];  // +-infinity, two NaNs, +-0, the smallest and largest subnormals
  // How far above the first pattern whose code is normal the bottom edge is probed: the patterns
  // within half a subnormal step below 2^-6 round to 0x08 as subnormals, where the tables' 3-bit
  // rounding of a normal gives 0x07: up to 9 bf16 values, up to 64 f16 values (2^-11 of 2^-6 in
  // steps of 2^-17).
  int bottom_reach;
};

void CheckEveryHalfToFp8(const HalfFormat& format) {
  const float below_2_127 = std::nextafter(std::ldexp(1.0f, 127), 0.0f);
  const float scales[] = {1.0f,
                          0.25f,
                          4.0f,
                          1.0f / 64,
                          1.0f / 448,
                          5.5f / 448,
                          0.0123f,
                          0.1f,
                          3.0f,
                          1.0f / 3,
                          std::nextafter(2.0f, 0.0f),
                          std::nextafter(1.0f, 2.0f),
                          std::ldexp(1.0f, -20),
                          std::ldexp(1.0f, 20),
                          std::ldexp(1.0f, -119),
                          std::ldexp(1.5f, -119),
                          std::nextafter(std::ldexp(1.0f, -119), 0.0f),
                          std::ldexp(1.0f, -126),
                          below_2_127,
                          std::ldexp(1.0f, 127),
                          std::ldexp(1.0f, 100),
                          7.0e37f};
  struct Rows {
    std::int64_t d;
    bool stream;
    std::vector<std::uint16_t> bits;  // every pattern, then the special values' rows
    std::vector<std::int64_t> edge_lanes;
  };
  std::vector<Rows> configs = {{48, false, {}, {0, 17, 31, 40}},
                               {160, false, {}, {0, 17, 31, 40, 63, 64, 100, 127, 128, 159}},
                               {128, true, {}, {0, 17, 31, 40, 63, 64, 100, 127}}};
  // 1 to about 2.5 (bf16; 1 to about 1.14 for f16), either sign.
  auto normal = [&](std::int64_t i) {
    return static_cast<std::uint16_t>((i % 2 ? 0x8000 : 0) + format.one + 3 * (i % 48));
  };
  for (Rows& rows : configs) {
    const std::int64_t d = rows.d;
    std::vector<std::uint16_t>& bits = rows.bits;
    bits.resize(65536);
    std::iota(bits.begin(), bits.end(), 0);
    while (static_cast<std::int64_t>(bits.size()) % d) bits.push_back(format.one);
    // Then rows of normal values with one special value at each lane in turn (rows of 48; in rows
    // of 128, the lanes at both ends of each 32 and a few inside): the vector paths send a vector
    // with an infinity, a NaN, a zero or a subnormal elsewhere than their all-normal fast paths
    // take it (an infinity saturates there), and consecutive patterns never put an infinity among
    // normal lanes.
    std::vector<std::int64_t> special_lanes;
    for (std::int64_t lane = 0; lane < d; ++lane) {
      if (d == 48 || lane % 32 <= 1 || lane % 32 >= 30 || lane % 32 == 13) {
        special_lanes.push_back(lane);
      }
    }
    for (std::uint16_t special : format.specials) {
      for (const std::int64_t lane : special_lanes) {
        for (std::int64_t i = 0; i < d; ++i) bits.push_back(i == lane ? special : normal(i));
      }
    }
  }
  std::vector<std::uint8_t> code(65536);  // the reference's code of every pattern at the scale
  for (const float scale : scales) {
    for (std::size_t p = 0; p < code.size(); ++p) {
      code[p] = posenc_ref::ToFp8E4M3(format.value(static_cast<std::uint16_t>(p)) / scale);
    }
    // And this scale's edges among normal lanes, each value alone in a row at a few lanes: the
    // values on either side of the first one at or above 464 scale (E4M3's midpoint between 448
    // and the 480 it lacks, where rounding starts to saturate), and from just below the first
    // one whose code is normal (0x08 or more; below it, subnormal codes) to bottom_reach above it.
    // The lanes around each edge value: from the first value at or above the scale itself
    // (codes from 0x38 up, well inside the tables' ranges, so that the fast paths take these
    // rows), or 1.0 where no value reaches the scale.
    std::uint16_t top = 0, bottom = 0, mid = 0;
    while (top < format.infinity && format.value(top) / scale < 464.0f) ++top;
    while (bottom < format.infinity && code[bottom] < 8) ++bottom;
    while (mid < format.infinity && format.value(mid) / scale < 1.0f) ++mid;
    const std::uint16_t around = mid + 3 * 47 < format.infinity ? mid : format.one;
    auto filler = [&](std::int64_t i) {
      return static_cast<std::uint16_t>((i % 2 ? 0x8000 : 0) + around + 3 * (i % 48));
    };
    for (const Rows& rows : configs) {
      const std::int64_t d = rows.d;
      // Streaming stores from 64 KiB of cache written (each call writes more).
      std::optional<StreamThreshold> threshold;
      if (rows.stream) threshold.emplace(std::int64_t{64} << 10);
      std::vector<std::uint16_t> all = rows.bits;
      for (const std::uint16_t edge : {top, bottom}) {
        for (int off = -3; off <= (edge == bottom ? format.bottom_reach : 3); ++off) {
          for (const std::int64_t lane : rows.edge_lanes) {
            const auto at =
                static_cast<std::uint16_t>(std::clamp(edge + off, 0, format.infinity - 1));
            for (std::int64_t i = 0; i < d; ++i) {
              all.push_back(i == lane ? static_cast<std::uint16_t>(at | (off % 2 ? 0x8000 : 0))
                                      : filler(i));
            }
          }
        }
      }
      const auto tokens = static_cast<std::int64_t>(all.size()) / d;
      posenc_test::ForEachTarget([&](const std::string& target) {
        const posenc::Frequencies f =
            posenc::compute_frequencies(posenc::testing::Spec(d, d, 0, Layout::kHalfSplit));
        // 64-byte aligned caches, so that streamed rows start on whole lines.
        std::vector<std::uint8_t> kbuf(all.size() + 64), vbuf(all.size() + 64);
        auto aligned = [](std::vector<std::uint8_t>& b) {
          return b.data() + (64 - reinterpret_cast<std::uintptr_t>(b.data()) % 64) % 64;
        };
        std::uint8_t* kc = aligned(kbuf);
        std::uint8_t* vc = aligned(vbuf);
        posenc::KvCache cache = posenc::KvCache::contiguous(kc, vc, CacheDType::kFp8E4M3,
                                                            KvCacheLayout::kVllm, tokens, 1, 1, d);
        cache.k_scale = cache.v_scale = scale;
        std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens), 0), slots(pos.size());
        std::iota(slots.begin(), slots.end(), 0);
        posenc::KvAppendArgs a;
        a.k = posenc::TensorView::contiguous(all.data(), format.dtype, tokens, 1, d);
        a.v = a.k;
        a.rotate = false;
        a.positions = std::span<const std::int64_t>(pos);
        a.slot_mapping = slots;
        posenc::rope_append_kv_cache(f, cache, a);
        const std::string_view name = posenc::dtype_name(format.dtype);
        for (std::size_t i = 0; i < all.size(); ++i) {
          ASSERT_EQ(static_cast<int>(vc[i]), static_cast<int>(code[all[i]]))
              << target << " rows of " << d << (rows.stream ? " streamed" : "") << ": v " << name
              << " 0x" << std::hex << all[i] << " / scale " << scale;
          ASSERT_EQ(static_cast<int>(kc[i]), static_cast<int>(code[all[i]]))
              << target << " rows of " << d << (rows.stream ? " streamed" : "") << ": k " << name
              << " 0x" << std::hex << all[i] << " / scale " << scale;
        }
      });
    }
  }
}

// The tables' ranges [lo, hi] (kv_cache_kernel.h's Bf16Fp8Map and F16Fp8Map) are as wide as
// they can be: exactly the magnitudes, exponent fields 1 to the largest finite one, whose code by
// the 3-bit rounding of a normal is in [8, 0x7E], computed here in double from fl32(v / scale)
// (ilogb and nearbyint, not the tables). The exhaustive tests above show the tables give the
// reference's bits there; this one that no lane they could take goes the long way (a range one
// narrower at either end fails it).
TEST(KvCache, Fp8TableRangesAreTheWidest) {
  // The code a normal E4M3 rounding gives q, extended to every exponent (8 (e + 7) + k - 8, k
  // the significand rounded to 3 bits); none for zero, infinities and NaN.
  auto extended_code = [](float q) -> std::optional<int> {
    if (q == 0.0f || !std::isfinite(q)) return std::nullopt;
    const int e = std::ilogb(q);
    const auto k = static_cast<int>(std::nearbyint(std::ldexp(static_cast<double>(q), 3 - e)));
    return 8 * (e + 7) + k - 8;
  };
  auto widest = [&](float (*value)(std::uint16_t), int exponent_shift, int max_field, float scale) {
    int lo = -1, hi = -1;
    bool gap = false;
    for (int a = 1 << exponent_shift; a < (max_field + 1) << exponent_shift; ++a) {
      const auto t = extended_code(value(static_cast<std::uint16_t>(a)) / scale);
      const bool in = t && *t >= 8 && *t <= 0x7E;
      if (in && lo < 0) lo = a;
      if (in) gap = gap || (hi >= 0 && hi != a - 1);
      if (in) hi = a;
    }
    EXPECT_FALSE(gap) << "scale " << scale;
    return std::pair<int, int>{lo, hi};
  };
  const float scales[] = {1.0f,
                          1.0f / 64,
                          1.0f / 448,
                          5.5f / 448,
                          0.0123f,
                          3.0f,
                          1.0f / 3,
                          std::ldexp(1.0f, -20),
                          std::ldexp(1.0f, 20),
                          std::ldexp(1.0f, -119),
                          std::nextafter(2.0f, 0.0f),
                          std::ldexp(1.0f, 100)};
  // A map's range as widest gives it: (-1, -1) where it is empty.
  auto range = [](const auto& map) {
    return map.lo <= map.hi ? std::pair<int, int>(map.lo, map.hi) : std::pair<int, int>(-1, -1);
  };
  for (const float scale : scales) {
    posenc::detail::Bf16Fp8Map bf16;
    if (posenc::detail::make_bf16_fp8_map(scale, bf16)) {
      EXPECT_EQ(range(bf16), widest(posenc_ref::FromBf16, 7, 254, scale))
          << "bf16, scale " << scale;
    }
    posenc::detail::F16Fp8Map f16;
    ASSERT_TRUE(posenc::detail::make_f16_fp8_map(scale, f16)) << scale;
    EXPECT_EQ(range(f16), widest(posenc_ref::FromF16, 10, 30, scale)) << "f16, scale " << scale;
  }
  // Covered at the usual scales, and nothing at the ones no f16 value reaches.
  posenc::detail::F16Fp8Map f16;
  ASSERT_TRUE(posenc::detail::make_f16_fp8_map(1.0f / 64, f16));
  EXPECT_LE(f16.lo, f16.hi);
  ASSERT_TRUE(posenc::detail::make_f16_fp8_map(std::ldexp(1.0f, 100), f16));
  EXPECT_GT(f16.lo, f16.hi);
}

// The tables are kept per thread, 256 scales per role in sets of 4 (kv_cache.cc): many scales in
// turn, more than that, k's and v's apart, as an engine with per-layer scales calls, each call's
// bits the reference's; and the same scales again after they were evicted. bf16 and f16 inputs,
// on every target (the tables are the same on all of them; only AVX-512 reads them).
TEST(KvCache, Fp8TablesKeptAcrossCallsGiveEachScalesBits) {
  const std::int64_t d = 128;
  constexpr int kLayers = 300;
  auto k_scale = [](int layer) { return (0.5f + 0.003f * static_cast<float>(layer)) / 448; };
  auto v_scale = [](int layer) { return (1.5f + 0.007f * static_cast<float>(layer)) / 448; };
  struct Input {
    DType dtype;
    std::vector<std::uint16_t> words;
    std::vector<std::uint8_t> k_codes, v_codes;  // the reference's, layer after layer
  };
  Input inputs[] = {{DType::kBF16, {}, {}, {}}, {DType::kF16, {}, {}, {}}};
  for (Input& in : inputs) {
    const bool bf16 = in.dtype == DType::kBF16;
    for (std::int64_t i = 0; i < d; ++i) {
      const float x = (i % 2 ? -1.0f : 1.0f) * (0.05f + 0.013f * static_cast<float>(i));
      in.words.push_back(bf16 ? posenc_ref::ToBf16(x) : posenc_ref::ToF16(x));
    }
    for (int layer = 0; layer < kLayers; ++layer) {
      for (const std::uint16_t w : in.words) {
        const float x = bf16 ? posenc_ref::FromBf16(w) : posenc_ref::FromF16(w);
        in.k_codes.push_back(posenc_ref::ToFp8E4M3(x / k_scale(layer)));
        in.v_codes.push_back(posenc_ref::ToFp8E4M3(x / v_scale(layer)));
      }
    }
  }
  posenc_test::ForEachTarget([&](const std::string& target) {
    const posenc::Frequencies f =
        posenc::compute_frequencies(posenc::testing::Spec(d, d, 0, Layout::kHalfSplit));
    std::vector<std::uint8_t> kc(d), vc(d);
    posenc::KvCache cache = posenc::KvCache::contiguous(kc.data(), vc.data(), CacheDType::kFp8E4M3,
                                                        KvCacheLayout::kVllm, 1, 1, 1, d);
    const std::vector<std::int64_t> pos = {0}, slots = {0};
    for (int round = 0; round < 2; ++round) {
      for (int layer = 0; layer < kLayers; ++layer) {
        for (Input& in : inputs) {
          cache.k_scale = k_scale(layer);
          cache.v_scale = v_scale(layer);
          posenc::KvAppendArgs a;
          a.k = posenc::TensorView::contiguous(in.words.data(), in.dtype, 1, 1, d);
          a.v = a.k;
          a.rotate = false;
          a.positions = std::span<const std::int64_t>(pos);
          a.slot_mapping = slots;
          posenc::rope_append_kv_cache(f, cache, a);
          const auto at = static_cast<std::ptrdiff_t>(layer * d);
          ASSERT_TRUE(std::equal(kc.begin(), kc.end(), in.k_codes.begin() + at))
              << target << " " << posenc::dtype_name(in.dtype) << " round " << round << " layer "
              << layer << ": k";
          ASSERT_TRUE(std::equal(vc.begin(), vc.end(), in.v_codes.begin() + at))
              << target << " " << posenc::dtype_name(in.dtype) << " round " << round << " layer "
              << layer << ": v";
        }
      }
    }
  });
}

TEST(KvCache, EveryBf16ToFp8MatchesReference) {
  CheckEveryHalfToFp8({DType::kBF16,
                       posenc_ref::FromBf16,
                       0x3F80,
                       0x7F80,
                       {0x7F80, 0xFF80, 0x7FC0, 0xFF81, 0x0000, 0x8000, 0x0001, 0x807F},
                       12});
}

TEST(KvCache, EveryF16ToFp8MatchesReference) {
  CheckEveryHalfToFp8({DType::kF16,
                       posenc_ref::FromF16,
                       0x3C00,
                       0x7C00,
                       {0x7C00, 0xFC00, 0x7E00, 0xFC01, 0x0000, 0x8000, 0x0001, 0x83FF},
                       70});
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

}  // namespace
