// The benchmarks' streaming roofline (bench/stream.h) does the work it claims on every SIMD target:
// every element read, scaled and written back in its own dtype, tails included; and the fused
// append's pattern (stream_append) moves every byte it claims to, where it claims to.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference/half_reference.h"
#include "stream.h"
#include "support/simd_targets.h"

namespace {

using posenc::DType;

TEST(StreamScale, ScalesEveryElementInPlaceOnEveryTarget) {
  posenc_test::ForEachTarget([](const std::string& target) {
    for (bool prefetch : {true, false}) {
      for (std::int64_t count : posenc_test::AwkwardCounts(posenc_test::FloatLanes(target))) {
        std::vector<float> f(static_cast<std::size_t>(count));
        for (std::int64_t i = 0; i < count; ++i) f[static_cast<std::size_t>(i)] = 0.37f * (i + 1);
        std::vector<std::uint16_t> h(f.size()), b(f.size());
        for (std::size_t i = 0; i < f.size(); ++i) {
          h[i] = posenc_ref::ToF16(f[i]);
          b[i] = posenc_ref::ToBf16(f[i]);
        }
        std::vector<float> f2 = f;
        std::vector<std::uint16_t> h2 = h, b2 = b;
        posenc::bench::stream_scale(f2.data(), DType::kF32, count, 3.0f, prefetch);
        posenc::bench::stream_scale(h2.data(), DType::kF16, count, 3.0f, prefetch);
        posenc::bench::stream_scale(b2.data(), DType::kBF16, count, 3.0f, prefetch);
        const std::string what =
            target + (prefetch ? " prefetch " : " plain ") + std::to_string(count) + " elements, ";
        for (std::size_t i = 0; i < f.size(); ++i) {
          EXPECT_EQ(f2[i], f[i] * 3.0f) << what << "f32 " << i;
          EXPECT_EQ(h2[i], posenc_ref::ToF16(posenc_ref::FromF16(h[i]) * 3.0f))
              << what << "f16 " << i;
          EXPECT_EQ(b2[i], posenc_ref::ToBf16(posenc_ref::FromBf16(b[i]) * 3.0f))
              << what << "bf16 " << i;
        }
      }
    }
  });
}

// Tokens of packed q|k|v rows: q scaled by -1 in place, k's and v's rows in the caches at the
// given offsets (copied, or their high bytes for a one-byte cache), with and without streaming
// stores and the software prefetch, row lengths that leave tails and cache rows off the vector
// boundary.
TEST(StreamAppend, WritesEveryRowWhereItsOffsetSaysOnEveryTarget) {
  posenc_test::ForEachTarget([](const std::string& target) {
    for (std::int64_t row : {std::int64_t{64}, std::int64_t{37}}) {
      for (bool narrow : {false, true}) {
        for (int mode = 0; mode < 4; ++mode) {
          const bool streaming = (mode & 1) != 0, prefetch = (mode & 2) != 0;
          const std::int64_t tokens = 5, stride = 3 * row;  // bf16 elements per token
          std::vector<std::uint16_t> qkv(static_cast<std::size_t>(tokens * stride));
          for (std::size_t i = 0; i < qkv.size(); ++i)
            qkv[i] = posenc_ref::ToBf16(0.01f * static_cast<float>(i + 1));
          const std::vector<std::uint16_t> before = qkv;
          const std::int64_t cache_row = narrow ? row : 2 * row;  // bytes
          // Tokens land in scattered rows, one byte past a vector boundary.
          const std::vector<std::int64_t> offsets = {3 * cache_row + 1, 1, 4 * cache_row + 1,
                                                     cache_row + 1, 2 * cache_row + 1};
          std::vector<std::uint8_t> key(static_cast<std::size_t>(5 * cache_row + 1), 0xEE);
          std::vector<std::uint8_t> value = key;
          posenc::bench::AppendStream a;
          a.q = qkv.data();
          a.k = qkv.data() + row;
          a.v = qkv.data() + 2 * row;
          a.dtype = DType::kBF16;
          a.tokens = tokens;
          a.token_stride_bytes = 2 * stride;
          a.q_elements = row;
          a.key_cache = key.data();
          a.value_cache = value.data();
          a.cache_offsets = offsets.data();
          a.cache_row_bytes = cache_row;
          a.narrow = narrow;
          a.streaming = streaming;
          a.prefetch = prefetch;
          posenc::bench::stream_append(a);
          const std::string what =
              target + " row " + std::to_string(row) + (narrow ? " narrow" : " copy") +
              (streaming ? " streaming" : " plain") + (prefetch ? " prefetch" : "");
          for (std::int64_t t = 0; t < tokens; ++t) {
            for (std::int64_t i = 0; i < row; ++i) {
              const auto at = static_cast<std::size_t>(t * stride + i);
              EXPECT_EQ(qkv[at], posenc_ref::ToBf16(-posenc_ref::FromBf16(before[at])))
                  << what << " q " << t << " " << i;
              const std::uint16_t k = before[at + static_cast<std::size_t>(row)];
              const std::uint16_t v = before[at + static_cast<std::size_t>(2 * row)];
              const auto off = static_cast<std::size_t>(offsets[static_cast<std::size_t>(t)]);
              if (narrow) {
                EXPECT_EQ(key[off + static_cast<std::size_t>(i)], (k >> 8) & 0x7F) << what;
                EXPECT_EQ(value[off + static_cast<std::size_t>(i)], (v >> 8) & 0x7F) << what;
              } else {
                std::uint16_t kc, vc;
                std::memcpy(&kc, key.data() + off + 2 * static_cast<std::size_t>(i), 2);
                std::memcpy(&vc, value.data() + off + 2 * static_cast<std::size_t>(i), 2);
                EXPECT_EQ(kc, k) << what << " k " << t << " " << i;
                EXPECT_EQ(vc, v) << what << " v " << t << " " << i;
              }
            }
          }
          EXPECT_EQ(key[0], 0xEE) << what;  // the byte before every row is untouched
        }
      }
    }
  });
}

}  // namespace
