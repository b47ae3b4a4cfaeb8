// rope_append_kv_cache (posenc/rope/kv_cache.h) on every SIMD target: the fused result equals
// apply_rope followed by a plain conversion and copy into the cache, bit for bit, for every
// input and cache dtype, cache layout, RoPE layout, position form, method, partial rotary,
// strided views and thread count (the harness: tests/support/kv_cache_case.h). The dtypes' value
// classes: kv_cache_dtypes_test.cc; refusals: kv_cache_refusals_test.cc.
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
#include "rope/kv_cache_streaming.h"
#include "support/error_of.h"
#include "support/kv_cache_case.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

// The harness, with its using-declarations (CacheDType, DType, error_of, Names, HasSubstr, ...).
using namespace posenc_test::kv_cache;  // NOLINT(google-build-using-namespace)

TEST(KvCache, FusedEqualsApplyThenCopyOnEveryTargetDtypeAndLayout) {
  std::mt19937 rng(7);
  posenc_test::ForEachTarget([&](const std::string& target) {
    const std::int64_t lanes = posenc_test::FloatLanes(target);
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (CacheDType cache : kCacheDTypes) {
        for (KvCacheLayout layout : kLayouts) {
          for (Layout rope : {Layout::kHalfSplit, Layout::kInterleaved}) {
            // A row of one vector and a lane, of three vectors (an odd count kept in registers:
            // head_dim 96 on AVX-512), and Llama's 128.
            for (std::int64_t head_dim :
                 {std::int64_t{2} * (lanes + 1), std::int64_t{6} * lanes, std::int64_t{128}}) {
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

// bf16 and f16 k into an fp8 cache, every dim rotated, heads packed: with the scale's table
// (AVX-512) the kernel rotates a token's heads with apply_rope's kernel into k itself (k in place)
// or a buffer of 8192 words, then rounds them (kv_cache-inl.h, AppendHalfKAsFp8ByToken); 72 heads
// of 128 are more than that buffer and take the per-head path. A power of two, calibrated scales
// (3, 1/448) and one outside the tables' ranges (2^-120: the float path; for f16 a table that
// covers no value). k in place is compared too.
TEST(KvCache, HalfKeyIntoFp8WholeTokenInPlaceAndBeyondTheBuffer) {
  std::mt19937 rng(17);
  posenc_test::ForEachTarget([&](const std::string& target) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      for (KvCacheLayout layout : kLayouts) {
        for (Layout rope : {Layout::kHalfSplit, Layout::kInterleaved}) {
          for (bool in_place : {false, true}) {
            for (std::int64_t kv_heads : {4, 72}) {
              for (float scale : {0.0625f, 3.0f, 1.0f / 448, std::ldexp(1.0f, -120)}) {
                Case c;
                c.spec = posenc::testing::Spec(128, 128, 0, rope);
                c.dtype = c.v_dtype = dtype;
                c.cache_dtype = CacheDType::kFp8E4M3;
                c.layout = layout;
                c.tokens = 3;
                c.q_heads = kv_heads;
                c.kv_heads = kv_heads;
                c.k_in_place = in_place;
                c.k_scale = c.v_scale = scale;
                CheckCase(c, rng,
                          target + " " + Name(c) + " heads " + std::to_string(kv_heads) +
                              (in_place ? " k in place" : ""));
              }
            }
          }
        }
      }
    }
  });
}

// bf16 k into a bf16 cache, every dim rotated, heads packed in k and in the cache cell, no
// streaming stores: with AVX-512 BF16 on (AVX3_BF16) the kernel rotates a token's heads with
// apply_rope's kernel straight into the cache cell, or into k first when it is rotated in place
// (kv_cache-inl.h, AppendBf16KByToken). head_dim 64, 128 and 256 take the AVX-512 BF16 kernel,
// 96 and the interleaved layout apply_rope's Highway kernel; a packed qkv row (k's heads still
// packed) takes it too, HND pages (heads a page apart) the per-head path; positions past the table
// take on-the-fly rows.
TEST(KvCache, Bf16KeyIntoBf16CacheByTokenInPlaceAndPacked) {
  std::mt19937 rng(23);
  posenc_test::ForEachTarget([&](const std::string& target) {
    for (KvCacheLayout layout : kLayouts) {
      for (Layout rope : {Layout::kHalfSplit, Layout::kInterleaved}) {
        for (std::int64_t head_dim : {64, 96, 128, 256}) {
          for (bool in_place : {false, true}) {
            for (bool packed : {false, true}) {
              Case c;
              c.spec = posenc::testing::Spec(head_dim, head_dim, 0, rope);
              c.dtype = c.v_dtype = DType::kBF16;
              c.cache_dtype = CacheDType::kBF16;
              c.layout = layout;
              c.tokens = 6;
              c.q_heads = 8;
              c.kv_heads = 4;
              c.k_in_place = in_place;
              c.packed = packed;
              CheckCase(c, rng,
                        target + " " + Name(c) + (in_place ? " k in place" : "") +
                            (packed ? " packed" : ""));
            }
          }
        }
      }
    }
  });
}

// Partial rotary: dims 6..21 of 40 (rows shorter than the kernels' two-vector bodies) and dims
// 4..67 of 72 (32 pairs: the two-vector bodies run, on AVX-512 bf16 and f16 k into an fp8 cache
// through StoreBf16AsFp8 and StoreF16AsFp8, k in place too).
TEST(KvCache, PartialRotaryPackedQkvStridedCacheAndInPlaceKey) {
  std::mt19937 rng(11);
  struct Dims {
    std::int64_t head_dim, rotary_dim, offset;
  };
  posenc_test::ForEachTarget([&](const std::string&) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (CacheDType cache : kCacheDTypes) {
        for (KvCacheLayout layout : kLayouts) {
          for (Layout rope : {Layout::kHalfSplit, Layout::kInterleaved}) {
            for (bool in_place : {false, true}) {
              for (const Dims dims : {Dims{40, 16, 6}, Dims{72, 64, 4}}) {
                Case c;
                c.spec = posenc::testing::Spec(dims.head_dim, dims.rotary_dim, dims.offset, rope);
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
    // A prefill on the fly: consecutive positions, whose rows are made a run ahead (RowRuns: 256
    // tokens at head_dim 128, so on one thread 600 tokens cross two runs' ends) and stepped 64 at
    // a time (CosSinStepper::rows), re-anchored every 128 steps, on one thread and split over two
    // (the pool's chunks of 75 tokens, a run each).
    for (int threads : {1, 2}) {
      Case prefill = big;
      prefill.tokens = 600;
      prefill.q_heads = 2;
      prefill.kv_heads = 1;
      prefill.table = false;
      prefill.consecutive_positions = true;
      prefill.threads = threads;
      CheckCase(prefill, rng,
                Name(prefill) + " prefill on the fly, threads " + std::to_string(threads));
    }
  }
}

// Full half-split rotary at head_dim 64, 128 and 256 into a cache of k's own dtype takes the
// kernel's rows-in-registers path (2, 4 or 8 vectors of pairs, depending on the target): with k
// kept and k rotated in place, packed qkv rows and padded pages, on every target.
TEST(KvCache, RowsInRegistersKeyInPlaceAndPackedRows) {
  std::mt19937 rng(31);
  const std::pair<DType, CacheDType> kinds[] = {{DType::kF32, CacheDType::kF32},
                                                {DType::kF16, CacheDType::kF16},
                                                {DType::kBF16, CacheDType::kBF16}};
  posenc_test::ForEachTarget([&](const std::string& target) {
    for (const auto& [dtype, cache_dtype] : kinds) {
      for (std::int64_t head_dim : {64, 128, 256}) {
        for (bool in_place : {false, true}) {
          Case c;
          c.spec = posenc::testing::Spec(head_dim, head_dim, 0, Layout::kHalfSplit);
          c.dtype = c.v_dtype = dtype;
          c.cache_dtype = cache_dtype;
          c.q_heads = 3;
          c.kv_heads = 3;
          c.packed = true;
          c.page_pad = 7;
          c.k_in_place = in_place;
          CheckCase(c, rng, target + " " + Name(c) + (in_place ? " k in place" : ""));
        }
      }
    }
  });
}

TEST(KvCache, StreamThresholdIsFourMiBAndRefusesLessThanAByte) {
  EXPECT_EQ(posenc::detail::stream_cache_bytes(), std::int64_t{4} << 20);
  EXPECT_THAT(error_of([] { posenc::detail::set_stream_cache_bytes(0); }),
              HasSubstr("the threshold (0 bytes) must be at least 1"));
  EXPECT_EQ(posenc::detail::stream_cache_bytes(), std::int64_t{4} << 20);
}

// Appends that write stream_cache_bytes() of cache or more (a prefill) store the cache rows with
// streaming stores: the same bits as apply_rope followed by a copy, on every target. Rows of 72
// elements (288 or 144 bytes: not whole 64-byte lines) in pages padded by 3 elements, so the rows
// start at every alignment and the copy's unaligned ends run too; partial rotary (64 of 72 dims
// from dim 4), packed qkv rows, both layouts, 1 and 2 threads.
TEST(KvCache, LargeAppendsWithStreamingStoresGiveTheSameBits) {
  const StreamThreshold threshold;
  std::mt19937 rng(29);
  const std::pair<DType, CacheDType> kinds[] = {{DType::kF32, CacheDType::kF32},
                                                {DType::kF16, CacheDType::kF16},
                                                {DType::kBF16, CacheDType::kFp8E4M3},
                                                {DType::kF32, CacheDType::kBF16}};
  posenc_test::ForEachTarget([&](const std::string& target) {
    for (const auto& [dtype, cache_dtype] : kinds) {
      for (KvCacheLayout layout : kLayouts) {
        Case c;
        c.spec = posenc::testing::Spec(72, 64, 4, Layout::kHalfSplit);
        c.dtype = c.v_dtype = dtype;
        c.cache_dtype = cache_dtype;
        c.layout = layout;
        c.q_heads = 1;
        c.kv_heads = 2;
        c.packed = true;
        c.page_pad = 3;
        // 2 (k, v) x 2 heads x 72 elements per token: at least the threshold over the call.
        const std::int64_t row_bytes = 2 * 2 * 72 * posenc::cache_dtype_size(cache_dtype);
        c.tokens = (StreamThreshold::kBytes + row_bytes - 1) / row_bytes;
        c.threads = dtype == DType::kF16 ? 2 : 1;
        if (cache_dtype == CacheDType::kFp8E4M3) {
          c.k_scale = 0.5f;  // a power of two (multiply) and another scale (divide)
          c.v_scale = 3.0f;
        }
        CheckCase(c, rng, target + " " + Name(c) + " " + std::to_string(c.tokens) + " tokens");
      }
    }
  });
}

// The rows-in-registers path (full rotary of 64, 96, 128, 256 dims into a cache of k's dtype,
// half-split and interleaved: AppendKRowInRegisters) with streaming stores: appends past the
// threshold, k read only and rotated in place, pages padded by 3 elements so the cache rows start
// at every alignment (rows on a vector boundary are streamed from the registers, the others
// staged; a half-split row of an odd number of vectors always staged), on every target. Also bf16
// into fp8 with a power-of-two and a calibrated scale, whose whole rows on a 32-byte boundary are
// streamed from the registers too (StreamHalfAsFp8Row; on AVX3_BF16 with AVX-512 VBMI a token's
// rows at once, 64 values at a time in byte lanes: StreamHalfAsFp8Rows), also into HND pages (a
// page between a token's rows) from a v whose heads are apart, with scales that keep these
// normal(0, 1) values off saturation so that most blocks of 64 take the byte lanes; and f16 into
// fp8 the same ways (StreamHalfAsFp8Row, StoreF16AsFp8's tables). (The streaming test above uses
// partial rotary, which takes the per-head path.)
TEST(KvCache, RowsInRegistersWithStreamingStoresGiveTheSameBits) {
  const StreamThreshold threshold;
  std::mt19937 rng(37);
  struct Kind {
    DType dtype;
    CacheDType cache_dtype;
    std::int64_t head_dim;
    Layout layout = Layout::kHalfSplit;
    float fp8_k_scale = 0.25f;  // a power of two: StoreBf16AsFp8's shift path
    float fp8_v_scale = 2.0f;
    KvCacheLayout cache_layout = KvCacheLayout::kVllm;
    std::int64_t v_head_pad = -1;  // >= 0: v apart from q and k, with this gap after each head
  };
  const Kind kinds[] = {{DType::kBF16, CacheDType::kBF16, 64},
                        {DType::kBF16, CacheDType::kBF16, 128},
                        {DType::kBF16, CacheDType::kBF16, 256},
                        {DType::kF16, CacheDType::kF16, 128},
                        {DType::kF32, CacheDType::kF32, 128},
                        {DType::kF32, CacheDType::kF32, 96},
                        {DType::kF32, CacheDType::kF32, 128, Layout::kInterleaved},
                        {DType::kF16, CacheDType::kF16, 64, Layout::kInterleaved},
                        {DType::kBF16, CacheDType::kBF16, 128, Layout::kInterleaved},
                        {DType::kBF16, CacheDType::kFp8E4M3, 128},
                        {DType::kBF16, CacheDType::kFp8E4M3, 128, Layout::kHalfSplit, 1.0f / 448},
                        {DType::kBF16, CacheDType::kFp8E4M3, 64},
                        {DType::kBF16, CacheDType::kFp8E4M3, 128, Layout::kHalfSplit, 1.0f / 64,
                         1.0f / 64, KvCacheLayout::kHnd, 64},
                        {DType::kBF16, CacheDType::kFp8E4M3, 128, Layout::kHalfSplit, 5.5f / 448,
                         5.5f / 448, KvCacheLayout::kHnd, 0},
                        {DType::kF16, CacheDType::kFp8E4M3, 128},
                        {DType::kF16, CacheDType::kFp8E4M3, 64, Layout::kInterleaved, 1.0f / 448},
                        {DType::kF16, CacheDType::kFp8E4M3, 128, Layout::kHalfSplit, 1.0f / 64,
                         5.5f / 448, KvCacheLayout::kHnd, 64}};
  posenc_test::ForEachTarget([&](const std::string& target) {
    for (const Kind& kind : kinds) {
      for (bool in_place : {false, true}) {
        Case c;
        c.spec = posenc::testing::Spec(kind.head_dim, kind.head_dim, 0, kind.layout);
        c.dtype = c.v_dtype = kind.dtype;
        c.cache_dtype = kind.cache_dtype;
        c.q_heads = 1;
        c.kv_heads = 2;
        c.packed = kind.v_head_pad < 0;
        c.v_head_pad = std::max<std::int64_t>(kind.v_head_pad, 0);
        c.layout = kind.cache_layout;
        c.page_pad = 3;
        c.k_in_place = in_place;
        if (kind.cache_dtype == CacheDType::kFp8E4M3) {
          c.k_scale = kind.fp8_k_scale;
          c.v_scale = kind.fp8_v_scale;
        }
        const std::int64_t row_bytes =
            2 * 2 * kind.head_dim * posenc::cache_dtype_size(kind.cache_dtype);
        c.tokens = (StreamThreshold::kBytes + row_bytes - 1) / row_bytes;
        CheckCase(c, rng,
                  target + " " + Name(c) + (in_place ? " k in place " : " ") +
                      std::to_string(c.tokens) + " tokens");
      }
    }
  });
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

// An unrotated append (rotate = false, no q, no positions) of the case's k and v; returns its
// arguments.
posenc::KvAppendArgs AppendUnrotated(const Case& c, Inputs& s) {
  posenc::KvAppendArgs a = s.args(c);
  a.q.reset();
  a.rotate = false;
  a.positions = std::span<const std::int64_t>();
  posenc::rope_append_kv_cache(s.freqs, s.cache, a);
  return a;
}

// With a table, the fused call reads the rows of up to 16 tokens at a time straight from it where
// every position of the group is inside, and token by token otherwise (as apply_rope:
// apply_views_test.cc, TableRowsReadByBlockEqualOnTheFly). 40 tokens, a position past the table
// in the second group and a negative one in the third, into f32, f16 and fp8 caches on every
// target: q and the caches the same bits as on the fly.
TEST(KvCache, TableRowsReadByGroupEqualOnTheFly) {
  std::mt19937 rng(43);
  const posenc::Frequencies f =
      posenc::compute_frequencies(posenc::testing::YarnSpec(64, Layout::kHalfSplit));
  const posenc::CosSinTable table(f, 512);
  const std::int64_t tokens = 40, q_heads = 4, kv_heads = 2, d = 64;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens));
  std::uniform_int_distribution<std::int64_t> inside(0, 511);
  for (std::int64_t& p : pos) p = inside(rng);
  pos[20] = 512;
  pos[35] = -3;
  std::vector<std::int64_t> slots(static_cast<std::size_t>(tokens));
  std::iota(slots.begin(), slots.end(), 0);
  posenc_test::ForEachTarget([&](const std::string&) {
    for (const std::pair<DType, CacheDType>& kind :
         {std::pair{DType::kF32, CacheDType::kF32}, std::pair{DType::kF16, CacheDType::kF16},
          std::pair{DType::kBF16, CacheDType::kFp8E4M3}}) {
      const DType dtype = kind.first;
      const CacheDType cache_dtype = kind.second;
      const posenc::testing::Buffer qkv = posenc::testing::Random(
          dtype, static_cast<std::size_t>(tokens * (q_heads + 2 * kv_heads) * d), rng);
      const std::size_t cache_bytes =
          static_cast<std::size_t>(tokens * kv_heads * d) * posenc::cache_dtype_size(cache_dtype);
      struct Out {
        std::vector<std::uint8_t> qkv, key, value;
      };
      auto append = [&](const posenc::CosSinTable* t) {
        Out o{qkv.bytes, std::vector<std::uint8_t>(cache_bytes),
              std::vector<std::uint8_t>(cache_bytes)};
        const std::int64_t row = (q_heads + 2 * kv_heads) * d;
        const std::size_t es = posenc::dtype_size(dtype);
        posenc::KvAppendArgs a;
        a.q = posenc::TensorView{o.qkv.data(), dtype, tokens, q_heads, d, row, d};
        a.k = {o.qkv.data() + q_heads * d * es, dtype, tokens, kv_heads, d, row, d};
        a.v = {o.qkv.data() + (q_heads + kv_heads) * d * es, dtype, tokens, kv_heads, d, row, d};
        a.positions = std::span<const std::int64_t>(pos);
        a.table = t;
        a.slot_mapping = slots;
        posenc::KvCache cache = posenc::KvCache::contiguous(
            o.key.data(), o.value.data(), cache_dtype, KvCacheLayout::kVllm, 5, 8, kv_heads, d);
        if (cache_dtype == CacheDType::kFp8E4M3) cache.k_scale = cache.v_scale = 0.25f;
        posenc::rope_append_kv_cache(f, cache, a);
        return o;
      };
      const Out with_table = append(&table), on_the_fly = append(nullptr);
      const std::string what(posenc::cache_dtype_name(cache_dtype));
      EXPECT_TRUE(with_table.qkv == on_the_fly.qkv) << what << ": q differs";
      EXPECT_TRUE(with_table.key == on_the_fly.key) << what << ": key cache differs";
      EXPECT_TRUE(with_table.value == on_the_fly.value) << what << ": value cache differs";
      EXPECT_FALSE(with_table.qkv == qkv.bytes) << what << ": q was not rotated";
    }
  });
}

// Unrotated append (rotate = false): k is copied as given, q is not accepted.
TEST(KvCache, WithoutRotationKIsCopiedAsGiven) {
  std::mt19937 rng(17);
  Case c;
  c.spec = posenc::testing::Spec(16, 16, 0, Layout::kHalfSplit);
  c.cache_dtype = CacheDType::kF16;
  Inputs s = Make(c, rng);
  posenc::KvAppendArgs a = AppendUnrotated(c, s);
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

// An unrotated append past the streaming threshold into a cache of k's own dtype streams k's and v's bits
// as they are (both layouts, every target; rows of 72 f16 at every alignment).
TEST(KvCache, WithoutRotationLargeAppendsCopyTheBits) {
  const StreamThreshold threshold;
  std::mt19937 rng(23);
  posenc_test::ForEachTarget([&](const std::string& target) {
    for (KvCacheLayout layout : kLayouts) {
      Case c;
      c.spec = posenc::testing::Spec(72, 64, 4, Layout::kHalfSplit);
      c.dtype = c.v_dtype = DType::kF16;
      c.cache_dtype = CacheDType::kF16;
      c.layout = layout;
      c.kv_heads = 2;
      c.page_pad = 3;
      c.tokens = (StreamThreshold::kBytes + 2 * 2 * 72 * 2 - 1) / (2 * 2 * 72 * 2);
      Inputs s = Make(c, rng);
      AppendUnrotated(c, s);
      int differ = 0;
      for (std::int64_t t = 0; t < c.tokens && differ == 0; ++t) {
        const auto [page, entry] = s.cells[static_cast<std::size_t>(t)];
        for (std::int64_t h = 0; h < c.kv_heads; ++h) {
          const std::int64_t cell = 2 * (page * s.cache.page_stride + entry * s.cache.entry_stride +
                                         h * s.cache.head_stride);
          for (const auto& [view, cache] :
               {std::pair{&s.k, &s.key_cache}, std::pair{&s.v, &s.value_cache}}) {
            const auto* from = static_cast<const std::uint8_t*>(view->data) +
                               2 * (t * view->token_stride + h * view->head_stride);
            differ += std::memcmp(cache->data() + cell, from, 2 * 72) != 0;
          }
        }
      }
      EXPECT_EQ(differ, 0) << target << " " << kv_cache_layout_name(layout);
    }
  });
}

}  // namespace
