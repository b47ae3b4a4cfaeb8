// The attention kernel of the Llama forward pass (src/llama/kernels.h, internal), on every SIMD
// target: its exponential against float64 exp2 over its whole range, softmax weights below 2^-64
// exactly 0 (so exp and the weighted sum never underflow towards subnormals, which made plain RoPE
// at ctx 2048 slower than ntk; docs/eval.md), the tile and per-query paths bit for bit equal, and
// both against a float64 softmax attention.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "llama/kernels.h"
#include "support/simd_targets.h"

namespace {

using posenc::llama::detail::AttentionArgs;
using posenc::llama::detail::AttentionPath;

// cache_attention.cc derives |2^x (computed) / 2^x - 1| <= 2.7e-7 (4.5 2^-24) on [-64, 0] without
// FMA, 2.1e-7 with it: 9.2e-8 of the degree-5 polynomial plus the rounding of its Horner steps.
constexpr double kExp2Bound = 2.7e-7;

TEST(LlamaAttentionKernel, Exp2WithinItsBoundOverItsRangeOnEveryTarget) {
  // 2^22 + 1 points evenly over [-64, 0] (spacing 1.5e-5, so f of the reduction densely at every
  // n), and every float32 in [-1e-3, 0), where f is tiny.
  std::vector<float> x;
  constexpr int kPoints = 1 << 22;
  for (int i = 0; i <= kPoints; ++i)
    x.push_back(static_cast<float>(-64.0 * static_cast<double>(i) / kPoints));
  for (float v = -1e-3f; v < 0.0f; v = std::nextafter(v, 0.0f)) {
    if (x.size() > (1u << 23)) break;
    x.push_back(v);
  }
  std::vector<float> out(x.size());
  posenc_test::ForEachTarget([&](const std::string& target) {
    posenc::llama::detail::exp2_weights(x.data(), out.data(), static_cast<std::int64_t>(x.size()));
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp2(static_cast<double>(x[i]));
      worst = std::max(worst, std::abs(static_cast<double>(out[i]) / want - 1.0));
    }
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", worst);
    RecordProperty("max_relative_exp2_error_" + target, text);
    EXPECT_LE(worst, kExp2Bound) << target;
  });
}

TEST(LlamaAttentionKernel, Exp2IsZeroBelowTwoToTheMinus64OnEveryTarget) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {
      -64.0f, std::nextafter(-64.0f, -inf), -65.0f, -100.0f, -1e30f, -inf, 0.0f, -0.0f};
  std::vector<float> out(x.size(), -1.0f);
  posenc_test::ForEachTarget([&](const std::string& target) {
    posenc::llama::detail::exp2_weights(x.data(), out.data(), static_cast<std::int64_t>(x.size()));
    EXPECT_EQ(out[0], std::ldexp(1.0f, -64)) << target;  // 2^-64 p(0), p(0) = 1 exactly
    for (std::size_t i = 1; i < 6; ++i) EXPECT_EQ(out[i], 0.0f) << target << " x = " << x[i];
    EXPECT_EQ(out[6], 1.0f) << target;
    EXPECT_EQ(out[7], 1.0f) << target;
  });
}

// One query at position 1 against keys 0 and 1; q . k0 = 0 and q . k1 = score (scale 1), v0 = 0
// and v1 = 1e30 in every dim: out = 1e30 e^score / (1 + e^score), or 0 when the weight is cut.
float attend_two_keys(float score, AttentionPath path) {
  constexpr std::int64_t hd = 8;
  std::vector<float> q(hd, 0.0f), k(2 * hd, 0.0f), v(2 * hd, 0.0f), out(hd, -1.0f);
  q[0] = 1.0f;
  k[hd] = score;
  for (std::int64_t e = 0; e < hd; ++e) v[hd + e] = 1e30f;
  const std::int32_t position = 1;
  AttentionArgs a;
  a.q = q.data();
  a.q_stride = hd;
  a.positions = &position;
  a.tokens = 1;
  a.k = k.data();
  a.k_stride = hd;
  a.v = v.data();
  a.v_stride = hd;
  a.head_dim = hd;
  a.scale = 1.0f;
  a.out = out.data();
  a.out_stride = hd;
  a.path = path;
  posenc::llama::detail::attend(a);
  for (std::int64_t e = 1; e < hd; ++e)
    EXPECT_TRUE(out[e] == out[0] || (std::isnan(out[e]) && std::isnan(out[0]))) << out[e];
  return out[0];
}

TEST(LlamaAttentionKernel, WeightsBelowTwoToTheMinus64AreZero) {
  posenc_test::ForEachTarget([&](const std::string&) {
    for (AttentionPath path : {AttentionPath::kTile, AttentionPath::kPerQuery}) {
      EXPECT_EQ(attend_two_keys(-50.0f, path), 0.0f);   // e^-50 = 1.9e-22 < 2^-64 = 5.4e-20
      EXPECT_EQ(attend_two_keys(-100.0f, path), 0.0f);  // exp alone would give a subnormal
    }
  });
}

TEST(LlamaAttentionKernel, ANaNScoreGivesNaN) {
  // A score of inf: what an attention factor of 1e30 makes of q . k (cli_limits_test); s - max is
  // then inf - inf. The exponential's clamp would turn a NaN into the weight 2^-64.
  posenc_test::ForEachTarget([&](const std::string& target) {
    for (AttentionPath path : {AttentionPath::kTile, AttentionPath::kPerQuery}) {
      EXPECT_TRUE(std::isnan(attend_two_keys(std::nanf(""), path))) << target;
      EXPECT_TRUE(std::isnan(attend_two_keys(std::numeric_limits<float>::infinity(), path)))
          << target << ": inf - inf";
    }
  });
}

TEST(LlamaAttentionKernel, WeightsAboveTheCutAreKept) {
  posenc_test::ForEachTarget([&](const std::string&) {
    for (AttentionPath path : {AttentionPath::kTile, AttentionPath::kPerQuery}) {
      // e^-40 = 4.2e-18 > 2^-64. The score is -40 log2 e in base 2, rounded: its error (2^-24
      // relative, 58 2^-24 absolute) becomes a relative error of 58 2^-24 ln 2 = 2.4e-6 in the
      // weight, plus exp2's 2e-7.
      const double want = 1e30 * std::exp(-40.0);
      EXPECT_NEAR(attend_two_keys(-40.0f, path), want, 3e-6 * want);
      EXPECT_NEAR(attend_two_keys(-2.0f, path), 1e30 * std::exp(-2.0) / (1 + std::exp(-2.0)), 1e24);
    }
  });
}

// Random q, k, v (normal, sd 1; scale 1/sqrt(hd) as the model's) in caches with strides larger
// than a head; `tokens` queries at the last positions of `keys` keys.
struct Case {
  std::int64_t hd, keys, tokens;
};

struct Data {
  std::int64_t hd = 0, keys = 0, tokens = 0, k_stride = 0, q_stride = 0;
  std::vector<float> q, k, v;
  std::vector<std::int32_t> positions;

  explicit Data(const Case& c) : hd(c.hd), keys(c.keys), tokens(c.tokens) {
    k_stride = 4 * hd + 3;
    q_stride = 2 * hd + 1;
    std::mt19937 rng(static_cast<unsigned>(hd * 1000 + keys * 7 + tokens));
    std::normal_distribution<float> normal;
    k.resize(static_cast<std::size_t>(keys * k_stride));
    v.resize(k.size());
    q.resize(static_cast<std::size_t>(tokens * q_stride));
    for (auto* buf : {&k, &v, &q})
      for (float& x : *buf) x = normal(rng);
    for (std::int64_t t = 0; t < tokens; ++t)
      positions.push_back(static_cast<std::int32_t>(keys - tokens + t));
  }

  // The keys in attention's blocks (kernels.h: AttentionArgs::k_blocks).
  std::vector<float> blocks() const {
    constexpr std::int64_t kb = posenc::llama::detail::kKeyBlock;
    std::vector<float> b(static_cast<std::size_t>((keys + kb - 1) / kb * kb * hd), 0.0f);
    for (std::int64_t j = 0; j < keys; ++j)
      for (std::int64_t e = 0; e < hd; ++e)
        b[static_cast<std::size_t>(j / kb * hd * kb + e * kb + j % kb)] =
            k[static_cast<std::size_t>(j * k_stride + e)];
    return b;
  }

  std::vector<float> attend(AttentionPath path, const float* k_blocks = nullptr) const {
    std::vector<float> out(static_cast<std::size_t>(tokens * hd), -1.0f);
    AttentionArgs a;
    a.q = q.data();
    a.q_stride = q_stride;
    a.positions = positions.data();
    a.tokens = tokens;
    a.k = k.data();
    a.k_stride = k_stride;
    a.v = v.data();
    a.v_stride = k_stride;
    a.k_blocks = k_blocks;
    a.head_dim = hd;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    a.out = out.data();
    a.out_stride = hd;
    a.path = path;
    posenc::llama::detail::attend(a);
    return out;
  }

  // Float64 softmax attention with exact exp; max over outputs of |got - want| / max |v|.
  double error(const std::vector<float>& got) const {
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    double worst = 0;
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t n = positions[static_cast<std::size_t>(t)] + 1;
      std::vector<double> s(static_cast<std::size_t>(n));
      double mx = -1e300;
      for (std::int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (std::int64_t e = 0; e < hd; ++e)
          dot += static_cast<double>(q[static_cast<std::size_t>(t * q_stride + e)]) *
                 k[static_cast<std::size_t>(j * k_stride + e)];
        s[static_cast<std::size_t>(j)] = dot * scale;
        mx = std::max(mx, dot * scale);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (std::int64_t e = 0; e < hd; ++e) {
        double o = 0;
        for (std::int64_t j = 0; j < n; ++j)
          o += s[static_cast<std::size_t>(j)] * v[static_cast<std::size_t>(j * k_stride + e)];
        worst =
            std::max(worst, std::abs(got[static_cast<std::size_t>(t * hd + e)] - o / sum) / 4.0);
      }
    }
    return worst;  // |v| < 4 almost surely (sd 1): dividing by 4 makes it relative to max |v|
  }
};

// Tolerance: a score is a float32 sum of hd products (|s| < ~8 here), off by at most hd 2^-24
// sum |q_e k_e| ~ 1e-5 absolute in the worst case (1e-6 typically); that is the relative error
// of its weight, plus 2e-7 of exp2; the output, a weighted mean of values, inherits it and the
// rounding of its sums over up to 300 keys (300 2^-24 = 1.8e-5 relative in the worst case, sqrt
// of it typically). 2e-5 of max |v|; measured: a few 1e-7.
TEST(LlamaAttentionKernel, PathsGiveTheSameBitsAndMatchFloat64OnEveryTarget) {
  posenc_test::ForEachTarget([&](const std::string& target) {
    const std::int64_t lanes = posenc_test::FloatLanes(target);
    for (std::int64_t hd : {2, 6, 8, 10, 16}) {
      for (std::int64_t keys : {1, 5, 127, 128, 129, 300}) {
        for (std::int64_t tokens : posenc_test::AwkwardCounts(lanes)) {
          if (tokens > keys || tokens > lanes) continue;
          const Data data({hd, keys, tokens});
          const auto tile = data.attend(AttentionPath::kTile);
          EXPECT_EQ(tile, data.attend(AttentionPath::kPerQuery))
              << target << " hd " << hd << " keys " << keys << " tokens " << tokens;
          EXPECT_EQ(tile, data.attend(AttentionPath::kAuto));
          EXPECT_EQ(tile, data.attend(AttentionPath::kPerQuery, data.blocks().data()));
          EXPECT_LT(data.error(tile), 2e-5)
              << target << " hd " << hd << " keys " << keys << " tokens " << tokens;
        }
      }
    }
  });
}

}  // namespace
