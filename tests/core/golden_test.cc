// tests/core/golden_test.cc: golden values of real models, each with its source and derivation.
//
// These numbers come from model configs, papers and hand derivations (written beside each),
// never from posenc's output. Tolerances: values derived to full double precision are checked
// to a few ulps (1e-15 relative or so: the library computes them with a log or a pow, each
// within an ulp); values quoted to 10 digits are checked to 1e-10.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>

#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"
#include "support/spec_builder.h"

namespace {

using posenc::Method;
using posenc::Numerics;
using posenc::RopeSpec;
using posenc::testing::make_spec;

// Plain RoPE, RoFormer / Llama 2 7B (head_dim 128, theta 10000).
TEST(GoldenTest, PlainRopeLlama2) {
  const RopeSpec spec = make_spec(Method::kNone, 128, 10000.0, 1.0, 0, 4096);
  const posenc::Frequencies f = posenc::compute_frequencies(spec);
  ASSERT_EQ(f.pair_count(), 64);
  EXPECT_EQ(f.inv_freq[0], 1.0);  // b^0
  // w_1 = 10000^(-2/128) = 10^(-1/16) = 10^-0.0625 = 0.8659643233600653.
  EXPECT_NEAR(f.inv_freq[1], 0.8659643233600653, 2e-16);
  // w_32 = 10000^(-64/128) = 10^-2 = 0.01.
  EXPECT_NEAR(f.inv_freq[32], 0.01, 0.01 * 2e-16);
  // docs/design.md §7 claim 2: the last wavelength is 2 pi 10000^((d-2)/d) = 2 pi 10^3.9375
  // = 2 pi * 8659.643233600653 = 54410.14313077674 (not 1000 * 2 pi as the seed writes).
  EXPECT_NEAR(2.0 * std::numbers::pi / f.inv_freq[63], 54410.14313077674, 54410.0 * 4e-16 * 8);
}

// Llama 2 7B with YaRN x16 (YaRN paper's Llama 2 models: head_dim 128, theta 10000,
// original context 4096, beta_fast 32, beta_slow 1).
// Correction dims c(beta) = D ln(L / (2 pi beta)) / (2 ln b):
//   c(32) = 128 ln(4096 / (64 pi)) / (2 ln 10^4) = 128 * 3.014135 / 18.420681 = 20.944 -> floor 20
//   c(1)  = 128 ln(4096 / (2 pi))  / (2 ln 10^4) = 128 * 6.479905 / 18.420681 = 45.027 -> ceil 46
// Attention factor 0.1 ln 16 + 1 = 0.4 ln 2 + 1 = 1.2772588722239781 (ln 2 = 0.693147180559945).
TEST(GoldenTest, YarnLlama2x16) {
  const RopeSpec spec = make_spec(Method::kYarn, 128, 10000.0, 16.0, 4096, 65536);
  const posenc::Frequencies f = posenc::compute_frequencies(spec, Numerics::kPrecise);
  ASSERT_TRUE(f.correction_low.has_value());
  ASSERT_TRUE(f.correction_high.has_value());
  EXPECT_EQ(*f.correction_low, 20.0);
  EXPECT_EQ(*f.correction_high, 46.0);
  EXPECT_NEAR(f.attention_factor, 1.2772588722, 1e-10);
  EXPECT_NEAR(f.attention_factor, 0.4 * 0.69314718055994531 + 1.0, 4e-16);
  EXPECT_EQ(f.softmax_scale_multiplier, 1.0);
  // Pairs up to lo = 20 keep w (ramp 0); pairs from hi = 46 get w / 16 (ramp 1).
  for (int i = 0; i <= 20; ++i) EXPECT_EQ(f.inv_freq[i], f.unscaled_inv_freq[i]) << i;
  for (int i = 46; i < 64; ++i) {
    EXPECT_NEAR(f.inv_freq[i], f.unscaled_inv_freq[i] / 16.0, f.unscaled_inv_freq[i] * 1e-16) << i;
  }
  // The ramp's midpoint: pair 33 has ramp (33 - 20) / 26 = 0.5, so w_33 (1/16 * 0.5 + 0.5).
  EXPECT_NEAR(f.inv_freq[33] / f.unscaled_inv_freq[33], 0.5 / 16.0 + 0.5, 1e-15);
}

// Llama 3.1 8B (config.json: rope_theta 500000, rope_scaling {factor 8, low_freq_factor 1,
// high_freq_factor 4, original_max_position_embeddings 8192}, head_dim 128).
// Pair i has wavelength 2 pi 500000^(i/64). It is below L/hf = 2048 iff
//   i < 64 ln(2048 / 2 pi) / ln 500000 = 64 * 5.786727 / 13.122363 = 28.223  -> pairs 0..28 kept
// and above L/lf = 8192 iff
//   i > 64 ln(8192 / 2 pi) / ln 500000 = 64 * 7.173022 / 13.122363 = 34.984  -> pairs 35..63 / 8
// and pairs 29..34 blend strictly between w/8 and w.
TEST(GoldenTest, Llama31) {
  RopeSpec spec = make_spec(Method::kLlama3, 128, 500000.0, 8.0, 8192, 131072);
  spec.llama3.low_freq_factor = 1.0;
  spec.llama3.high_freq_factor = 4.0;
  const posenc::Frequencies f = posenc::compute_frequencies(spec, Numerics::kPrecise);
  ASSERT_EQ(f.pair_count(), 64);
  for (int i = 0; i <= 28; ++i) EXPECT_EQ(f.inv_freq[i], f.unscaled_inv_freq[i]) << i;
  for (int i = 35; i < 64; ++i) {
    EXPECT_NEAR(f.inv_freq[i], f.unscaled_inv_freq[i] / 8.0, f.unscaled_inv_freq[i] / 8.0 * 1e-15)
        << i;
  }
  for (int i = 29; i <= 34; ++i) {
    EXPECT_GT(f.inv_freq[i], f.unscaled_inv_freq[i] / 8.0) << i;
    EXPECT_LT(f.inv_freq[i], f.unscaled_inv_freq[i]) << i;
  }
  // Unscaled w_0 = 1, w_32 = 500000^(-1/2) = 1 / 707.10678118654752 = 0.0014142135623730950.
  EXPECT_EQ(f.unscaled_inv_freq[0], 1.0);
  EXPECT_NEAR(f.unscaled_inv_freq[32], 0.0014142135623730950, 0.0014142135623730950 * 4e-16);
  EXPECT_EQ(f.attention_factor, 1.0);
}

// DeepSeek-V3 (config.json: qk_rope_head_dim 64, rope_theta 10000, rope_scaling {type yarn,
// factor 40, mscale 1.0, mscale_all_dim 1.0, original_max_position_embeddings 4096,
// beta_fast 32, beta_slow 1}).
// Attention factor g(40, 1) / g(40, 1) = 1 exactly. Softmax multiplier g(40, 1)^2 =
// (0.1 ln 40 + 1)^2 = 1.36888794541139363^2 = 1.8738542070926265 (ln 40 = 3.6888794541139363).
// Correction dims: c(32) = 64 * 3.014135 / 18.420681 = 10.472 -> 10;
//                  c(1)  = 64 * 6.479905 / 18.420681 = 22.513 -> 23.
TEST(GoldenTest, DeepSeekV3) {
  RopeSpec spec = make_spec(Method::kYarn, 64, 10000.0, 40.0, 4096, 163840);
  spec.layout = posenc::Layout::kInterleaved;
  spec.yarn.mscale = 1.0;
  spec.yarn.mscale_all_dim = 1.0;
  const posenc::Frequencies f = posenc::compute_frequencies(spec, Numerics::kPrecise);
  EXPECT_EQ(f.attention_factor, 1.0);
  EXPECT_NEAR(f.softmax_scale_multiplier, 1.8738542071, 1e-10);
  EXPECT_NEAR(f.softmax_scale_multiplier, 1.8738542070926265, 1.8738542070926265 * 1e-15);
  ASSERT_TRUE(f.correction_low.has_value());
  EXPECT_EQ(*f.correction_low, 10.0);
  EXPECT_EQ(*f.correction_high, 23.0);
}

// gpt-oss-20b (config.json: head_dim 64, rope_theta 150000, rope_scaling {rope_type yarn,
// factor 32, beta_fast 32, beta_slow 1, original_max_position_embeddings 4096, truncate false}).
// Without truncation the ramp bounds are the correction dims themselves:
//   c(32) = 64 ln(4096 / (64 pi)) / (2 ln 150000) = 64 * 3.0141345 / 23.836787 = 8.092779115512402
//   c(1)  = 64 ln(4096 / (2 pi))  / (2 ln 150000) = 64 * 6.4799046 / 23.836787 = 17.39802450158856
// (digits: the same expression in IEEE double, which is accurate to ~1e-15 here).
// Attention factor 0.1 ln 32 + 1 = 0.5 ln 2 + 1 = 1.3465735902799727.
TEST(GoldenTest, GptOss20b) {
  RopeSpec spec = make_spec(Method::kYarn, 64, 150000.0, 32.0, 4096, 131072);
  spec.yarn.truncate = false;
  const posenc::Frequencies f = posenc::compute_frequencies(spec, Numerics::kPrecise);
  ASSERT_TRUE(f.correction_low.has_value());
  EXPECT_NEAR(*f.correction_low, 8.092779115512402, 1e-12);
  EXPECT_NEAR(*f.correction_high, 17.39802450158856, 1e-12);
  EXPECT_NEAR(f.attention_factor, 0.5 * 0.69314718055994531 + 1.0, 4e-16);
  // Pairs 0..8 lie below the lower bound: kept. Pairs 18..31 lie above the upper: divided.
  for (int i = 0; i <= 8; ++i) EXPECT_EQ(f.inv_freq[i], f.unscaled_inv_freq[i]) << i;
  for (int i = 18; i < 32; ++i) {
    EXPECT_NEAR(f.inv_freq[i], f.unscaled_inv_freq[i] / 32.0, f.unscaled_inv_freq[i] * 1e-16) << i;
  }
}

// Phi-3-mini-128k (config.json: original_max_position_embeddings 4096,
// max_position_embeddings 131072, so s = 32): LongRoPE's attention factor
// sqrt(1 + ln 32 / ln 4096) = sqrt(1 + 5 ln 2 / (12 ln 2)) = sqrt(17/12) = 1.1902380714238083.
TEST(GoldenTest, Phi3LongropeAttentionFactor) {
  RopeSpec spec = make_spec(Method::kLongrope, 96, 10000.0, 32.0, 4096, 131072);
  spec.longrope.short_factor.assign(48, 1.0);
  spec.longrope.long_factor.assign(48, 2.0);
  const posenc::Frequencies f = posenc::compute_frequencies(spec, Numerics::kPrecise, 8192);
  EXPECT_NEAR(f.attention_factor, 1.1902380714238083, 4e-16);
  EXPECT_TRUE(f.uses_long_factors);
  // Long factor 2 everywhere: every pair is w / 2.
  for (int i = 0; i < 48; ++i) {
    EXPECT_NEAR(f.inv_freq[i], f.unscaled_inv_freq[i] / 2.0, f.unscaled_inv_freq[i] * 1e-16) << i;
  }
}

// Static NTK-aware scaling, s = 8, D = 128, b = 10000: the new base is
// 10000 * 8^(128/126) = 10000 * 2^(64/21) = 80000 * 2^(1/21), and
// 2^(1/21) = exp(ln 2 / 21) = exp(0.0330070085980926) = 1.0335577830070277, so 82684.62264056221.
TEST(GoldenTest, NtkBase) {
  const RopeSpec spec = make_spec(Method::kNtk, 128, 10000.0, 8.0, 0, 4096);
  const posenc::Frequencies f = posenc::compute_frequencies(spec, Numerics::kPrecise);
  EXPECT_NEAR(f.base, 82684.62264056221, 82684.62264056221 * 4e-15);
  // The last pair: base^(-126/128) = (10000 * 8^(128/126))^(-126/128) = 10000^(-126/128) / 8,
  // exactly plain RoPE's last frequency divided by s (NTK-aware's defining property). Both sides
  // are pows with |ln w| = 11: (2 * 11 + 8) * 2^-53 = 3.3e-15 relative, as in the reference test.
  EXPECT_NEAR(f.inv_freq[63], f.unscaled_inv_freq[63] / 8.0, f.unscaled_inv_freq[63] * 4e-15);
}

// Hunyuan-7B's rope_scaling {"type": "dynamic", "alpha": 1000.0} over b = 10000, D = 128: the
// base is 10000 * 1000^(128/126) = 10^(4 + 384/126) = 10^7 * 10^(1/21), and
// 10^(1/21) = exp(ln 10 / 21) = exp(0.10964690919019266) = 1.1158839925077485, so
// 11158839.925077485.
TEST(GoldenTest, NtkAlphaBaseHunyuan) {
  RopeSpec spec = make_spec(Method::kNtkAlpha, 128, 10000.0, 1.0, 0, 262144);
  spec.alpha = 1000.0;
  const posenc::Frequencies f = posenc::compute_frequencies(spec, Numerics::kPrecise);
  EXPECT_NEAR(f.base, 11158839.925077485, 11158839.925077485 * 4e-15);
  // As static NTK: the last pair is plain RoPE's divided by alpha.
  EXPECT_NEAR(f.inv_freq[63], f.unscaled_inv_freq[63] / 1000.0, f.unscaled_inv_freq[63] * 4e-15);
}

}  // namespace
