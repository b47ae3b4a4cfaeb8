// The attention kernel of the Llama forward pass (src/llama/kernels.h, internal): softmax weights
// below 2^-64 are exactly 0, so exp and the weighted sum never underflow towards subnormals
// (which made plain RoPE at ctx 2048 slower than ntk; docs/eval.md).
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "llama/kernels.h"

namespace {

// One query at position 1 against keys 0 and 1; q . k0 = 0 and q . k1 = score (scale 1), v0 = 0
// and v1 = 1e30 in every dim: out = 1e30 e^score / (1 + e^score), or 0 when the weight is cut.
float attend_two_keys(float score) {
  constexpr std::int64_t hd = 8;
  std::vector<float> q(hd, 0.0f), k(2 * hd, 0.0f), v(2 * hd, 0.0f), out(hd, -1.0f);
  q[0] = 1.0f;
  k[hd] = score;
  for (std::int64_t e = 0; e < hd; ++e) v[hd + e] = 1e30f;
  const std::int32_t position = 1;
  posenc::llama::detail::AttentionArgs a;
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
  posenc::llama::detail::attend(a);
  for (std::int64_t e = 1; e < hd; ++e) EXPECT_EQ(out[e], out[0]);
  return out[0];
}

TEST(LlamaAttentionKernel, WeightsBelowTwoToTheMinus64AreZero) {
  EXPECT_EQ(attend_two_keys(-50.0f), 0.0f);   // e^-50 = 1.9e-22 < 2^-64 = 5.4e-20
  EXPECT_EQ(attend_two_keys(-100.0f), 0.0f);  // exp alone would give a subnormal (3.7e-44)
}

TEST(LlamaAttentionKernel, WeightsAboveTheCutAreKept) {
  const double want = 1e30 * std::exp(-40.0);  // 4.2e12: e^-40 = 4.2e-18 > 2^-64
  EXPECT_NEAR(attend_two_keys(-40.0f), want, 1e-5 * want);
  EXPECT_NEAR(attend_two_keys(-2.0f), 1e30 * std::exp(-2.0) / (1 + std::exp(-2.0)), 1e24);
}

}  // namespace
