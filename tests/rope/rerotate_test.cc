// rerotate_keys: a cache rotated for one set of frequencies, moved to another (dynamic NTK
// growth, dynamic YaRN's attention factor, LongRoPE short to long factors).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/targets.h"
#include "reference/rope_reference.h"
#include "support/rope_test_support.h"

namespace {

using posenc::DType;
using posenc::Layout;
using posenc::testing::Buffer;
using posenc::testing::Random;
using posenc::testing::Spec;
using posenc::testing::YarnSpec;

// Re-rotating cached keys from the old frequencies to the new ones equals rotating the keys
// directly with the new ones. Two roundings instead of one: twice the f32 budget.
void CheckRerotation(const posenc::Frequencies& from, const posenc::Frequencies& to,
                     const std::string& what,
                     const std::vector<std::int64_t>& pos = {0, 1, 100, 4095, 4096, 9000, 16383}) {
  std::mt19937 rng(41);
  const auto tokens = static_cast<std::int64_t>(pos.size());
  const std::int64_t heads = 2, d = from.spec.head_dim;
  const Buffer keys = Random(DType::kF32, static_cast<std::size_t>(tokens * heads * d), rng);
  Buffer cached = keys, direct = keys;
  posenc::RopeArgs args;
  args.positions = std::span<const std::int64_t>(pos);
  args.q = posenc::TensorView::contiguous(cached.bytes.data(), DType::kF32, tokens, heads, d);
  posenc::apply_rope(from, args);
  posenc::rerotate_keys(from, to, args.q, args.positions);
  args.q = posenc::TensorView::contiguous(direct.bytes.data(), DType::kF32, tokens, heads, d);
  posenc::apply_rope(to, args);
  for (std::size_t i = 0; i < cached.bytes.size() / 4; ++i) {
    EXPECT_NEAR(cached.get(i), direct.get(i), 8 * std::ldexp(8.0, -23) * to.attention_factor)
        << what << " " << i;
  }
}

TEST(RerotateKeys, DynamicNtkGrowth) {
  posenc::RopeSpec s = Spec(128, 128, 0, Layout::kHalfSplit);
  s.method = posenc::Method::kDynamic;
  s.factor = 4;
  s.max_position_embeddings = 4096;
  CheckRerotation(posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 4096),
                  posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 16384), "dynamic");
}

// A prefill's consecutive positions: precise rows come from rerotate_keys' stepped rows of
// the frequency differences (exact anchors, stepped rows in between) instead of exact ones.
TEST(RerotateKeys, ConsecutivePositionsUseSteppedRows) {
  posenc::RopeSpec s = Spec(64, 64, 0, Layout::kInterleaved);
  s.method = posenc::Method::kDynamic;
  s.factor = 4;
  s.max_position_embeddings = 512;
  std::vector<std::int64_t> pos(3000);
  std::iota(pos.begin(), pos.end(), std::int64_t{1000});
  CheckRerotation(posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 2048),
                  posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 4000), "stepped", pos);
}

// hf numerics: the composite of transformers' float32 rows (not the exact rotation).
TEST(RerotateKeys, HfNumericsComposeTheEnginesRows) {
  posenc::RopeSpec s = Spec(64, 64, 0, Layout::kHalfSplit);
  s.method = posenc::Method::kDynamic;
  s.factor = 4;
  s.max_position_embeddings = 4096;
  CheckRerotation(posenc::compute_frequencies(s, posenc::Numerics::kHf, 4096),
                  posenc::compute_frequencies(s, posenc::Numerics::kHf, 16384), "hf");
}

TEST(RerotateKeys, DynamicYarnChangesTheAttentionFactor) {
  posenc::RopeSpec s = YarnSpec(64, Layout::kInterleaved);
  s.method = posenc::Method::kDynamicYarn;
  const auto from = posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 4096);
  const auto to = posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 16384);
  ASSERT_NE(from.attention_factor, to.attention_factor);
  CheckRerotation(from, to, "dynamic-yarn");
}

TEST(RerotateKeys, LongropeShortToLong) {
  posenc::RopeSpec s = Spec(64, 64, 0, Layout::kHalfSplit);
  s.method = posenc::Method::kLongrope;
  s.factor = 8;
  s.original_max_position_embeddings = 4096;
  for (int i = 0; i < 32; ++i) {
    s.longrope.short_factor.push_back(1.0 + 0.05 * i);
    s.longrope.long_factor.push_back(1.0 + 0.5 * i);
  }
  CheckRerotation(posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 4096),
                  posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 8192), "longrope");
}

}  // namespace

namespace {

// A bad key view is refused in rerotate_keys' own name (it once said "apply_rope: k: ...").
TEST(RerotateKeys, ViewErrorsNameRerotateKeys) {
  const posenc::Frequencies f = posenc::compute_frequencies(Spec(16, 16, 0, Layout::kHalfSplit));
  std::vector<float> k(3 * 2 * 8);
  const std::vector<std::int64_t> pos = {0, 1, 2};
  std::string err;
  try {
    posenc::rerotate_keys(f, f, posenc::TensorView::contiguous(k.data(), DType::kF32, 3, 2, 8),
                          std::span<const std::int64_t>(pos));
  } catch (const posenc::Error& e) {
    err = e.what();
  }
  EXPECT_EQ(err.rfind("rerotate_keys: k: head_dim (8)", 0), 0u) << err;
}

}  // namespace
