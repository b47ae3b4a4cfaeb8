// The benchmarks' streaming roofline (bench/stream.h) does the work it claims on every SIMD target:
// every element read, scaled and written back in its own dtype, tails included.
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
      posenc::bench::stream_scale(f2.data(), DType::kF32, count, 3.0f);
      posenc::bench::stream_scale(h2.data(), DType::kF16, count, 3.0f);
      posenc::bench::stream_scale(b2.data(), DType::kBF16, count, 3.0f);
      for (std::size_t i = 0; i < f.size(); ++i) {
        EXPECT_EQ(f2[i], f[i] * 3.0f) << "f32 " << i << " of " << count;
        EXPECT_EQ(h2[i], posenc_ref::ToF16(posenc_ref::FromF16(h[i]) * 3.0f))
            << "f16 " << i << " of " << count;
        EXPECT_EQ(b2[i], posenc_ref::ToBf16(posenc_ref::FromBf16(b[i]) * 3.0f))
            << "bf16 " << i << " of " << count;
      }
    }
  });
}

}  // namespace
