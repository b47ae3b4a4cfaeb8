// The forward pass's re-rotation of cached keys (src/llama/kernels.h, internal: Rerotation's rows
// made once for every layer, rerotate_rows over whole key rows) against posenc::rerotate_keys, bit
// for bit on every SIMD target: a dynamic method's perplexity must not depend on which of the two
// re-rotated its cache. Head dims from 2 to 64 take each of rerotate_rows' paths on each target
// (a row repeated across a vector, two rows a load, heads of whole vectors, one-lane pairs).
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "llama/kernels.h"
#include "posenc/core/frequencies.h"
#include "posenc/rope/apply.h"
#include "support/simd_targets.h"
#include "support/spec_builder.h"

namespace {

using posenc::Frequencies;
using posenc::Method;
using posenc::Numerics;
using posenc::RopeSpec;
using posenc::llama::detail::Rerotation;

RopeSpec interleaved(Method method, std::int64_t head_dim, double factor) {
  RopeSpec spec = posenc::testing::make_spec(method, head_dim, 10000.0, factor, 512,
                                             method == Method::kDynamic ? 512 : 0);
  spec.layout = posenc::Layout::kInterleaved;
  return spec;
}

struct Case {
  std::string name;
  RopeSpec spec;
  std::int64_t heads;
  std::int64_t from_len, to_len;  // compute_frequencies' seq_len; 0: initialisation
  std::optional<RopeSpec> to_spec = std::nullopt;  // the spec re-rotated to, if not `spec`
};

std::vector<Case> cases() {
  std::vector<Case> c;
  // stories260K: head dim 8, 4 kv heads; the first re-rotation past L (from plain RoPE) and a
  // later one; dynamic-yarn also changes the attention factor.
  c.push_back({"dynamic hd 8 first", interleaved(Method::kDynamic, 8, 4.0), 4, 0, 576});
  c.push_back({"dynamic hd 8", interleaved(Method::kDynamic, 8, 4.0), 4, 1984, 2048});
  c.push_back({"dynamic-yarn hd 8", interleaved(Method::kDynamicYarn, 8, 1.0), 4, 576, 640});
  c.push_back({"dynamic-yarn hd 8 x 2", interleaved(Method::kDynamicYarn, 8, 1.0), 2, 576, 640});
  // (Dynamic NTK needs D > 2: plain RoPE to linear.)
  c.push_back({"linear hd 2", interleaved(Method::kNone, 2, 1.0), 8, 600, 700,
               interleaved(Method::kLinear, 2, 2.0)});
  c.push_back({"dynamic hd 4 x 6", interleaved(Method::kDynamic, 4, 2.0), 6, 600, 700});
  c.push_back({"dynamic-yarn hd 16 x 3", interleaved(Method::kDynamicYarn, 16, 1.0), 3, 700, 9000});
  c.push_back({"dynamic hd 64 x 2", interleaved(Method::kDynamic, 64, 8.0), 2, 4096, 8192});
  return c;
}

// Keys [rows, x_stride] with heads * head_dim of each row used; the rest is padding that must
// stay as it is.
std::vector<float> random_keys(std::int64_t rows, std::int64_t x_stride, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> k(static_cast<std::size_t>(rows * x_stride));
  for (float& v : k) v = normal(rng);
  return k;
}

TEST(LlamaRerotate, RowsAndKernelGiveRerotateKeysBitsOnEveryTarget) {
  posenc_test::ForEachTarget([&](const std::string& target) {
    for (const Case& c : cases()) {
      SCOPED_TRACE(c.name);
      const Frequencies from = posenc::compute_frequencies(c.spec, Numerics::kPrecise, c.from_len);
      const Frequencies to =
          posenc::compute_frequencies(c.to_spec.value_or(c.spec), Numerics::kPrecise, c.to_len);
      ASSERT_NE(from.inv_freq, to.inv_freq) << "the case re-rotates nothing";
      ASSERT_TRUE(Rerotation::applies(from, to));
      const std::int64_t hd = c.spec.head_dim, kv = c.heads * hd;
      for (const std::int64_t rows : {std::int64_t{1}, std::int64_t{999}, std::int64_t{1000}}) {
        for (const std::int64_t pad : {std::int64_t{0}, std::int64_t{6}}) {
          const std::int64_t stride = kv + pad;
          const std::vector<float> keys = random_keys(rows, stride, static_cast<unsigned>(rows));
          // rerotate_keys over a view of the used part of each row.
          std::vector<float> want = keys;
          std::vector<std::int32_t> positions(static_cast<std::size_t>(rows));
          std::iota(positions.begin(), positions.end(), 0);
          posenc::rerotate_keys(
              from, to,
              posenc::TensorView{want.data(), posenc::DType::kF32, rows, c.heads, hd, stride, hd},
              std::span<const std::int32_t>(positions), 1);
          // Rows in two pieces (as the forward pass's threads make them), then the kernel.
          std::vector<float> c2(static_cast<std::size_t>(rows * hd)), s2(c2.size());
          const Rerotation r(from, to);
          const std::int64_t half = rows / 2;
          r.rows(0, half, c2.data(), s2.data());
          r.rows(half, rows, c2.data() + half * hd, s2.data() + half * hd);
          std::vector<float> got = keys;
          posenc::llama::detail::rerotate_rows(
              {got.data(), stride, rows, c.heads, hd, c2.data(), s2.data()});
          std::int64_t differ = 0, unchanged = 0;
          for (std::size_t i = 0; i < got.size(); ++i) {
            differ += got[i] != want[i];
            unchanged += got[i] == keys[i];
          }
          EXPECT_EQ(differ, 0) << target << ": " << rows << " rows, stride " << stride;
          // Position 0 is the identity, pads stay, and so may pair 0 (dynamic NTK and YaRN keep
          // its frequency); everything else moves.
          EXPECT_LE(unchanged, kv + rows * (pad + 2 * c.heads) + rows * kv / 100)
              << rows << " rows";
        }
      }
    }
  });
}

TEST(LlamaRerotate, AppliesOnlyWhereItsRowsAreRerotateKeys) {
  const RopeSpec spec = interleaved(Method::kDynamic, 8, 4.0);
  const Frequencies a = posenc::compute_frequencies(spec, Numerics::kPrecise, 600);
  const Frequencies b = posenc::compute_frequencies(spec, Numerics::kPrecise, 700);
  EXPECT_TRUE(Rerotation::applies(a, b));
  EXPECT_FALSE(Rerotation::applies(a, posenc::compute_frequencies(spec, Numerics::kHf, 700)));
  RopeSpec half = spec;
  half.layout = posenc::Layout::kHalfSplit;
  EXPECT_FALSE(Rerotation::applies(posenc::compute_frequencies(half, Numerics::kPrecise, 600),
                                   posenc::compute_frequencies(half, Numerics::kPrecise, 700)));
  RopeSpec partial = spec;
  partial.rotary_dim = 4;
  EXPECT_FALSE(Rerotation::applies(posenc::compute_frequencies(partial, Numerics::kPrecise, 600),
                                   posenc::compute_frequencies(partial, Numerics::kPrecise, 700)));
}

}  // namespace
