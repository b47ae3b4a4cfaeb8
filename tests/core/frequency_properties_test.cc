// tests/core/frequency_properties_test.cc: algebraic properties of the scaling methods, which hold
// whatever the exact formula details (docs/design.md, tests: properties).
//
// - Every method at its identity setting equals plain RoPE. Methods that only divide by s = 1
//   or raise s = 1 to a power must be exact (x / 1 and b * 1^e are exact). Methods that blend
//   w/s and w with weights u and v (yarn, llama3) may be off by at most 2 ulps: with u + v = 1
//   each rounded product is within w u 2^-53 and w v 2^-53 of its value, fl(1 - gamma) adds at
//   most w 2^-54, so the exact sum is within 1.5 ulp(w) of w and rounds to at most 2 ulps away.
// - yarn and llama3 keep the high-frequency pairs exactly and divide the low-frequency ones by
//   s (1e-15 relative: one division by s, or the reference's w/s, half an ulp each).
// - dynamic NTK at seq_len <= max_position_embeddings is plain RoPE, exactly.
// - every method's inv_freq is non-increasing in the pair index (the LongRoPE factor lists of
//   the grid are non-decreasing), in every numerics.
// - interpolation weights lie in [0, 1] for the methods that blend or rescale the base.
// - the paper's YaRN ramp and the implementations' ramp differ, but both keep pair 0 and
//   divide the last pair by s for Llama 2 x16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"
#include "support/spec_adapters.h"
#include "support/spec_grid.h"

namespace {

using posenc::Method;
using posenc::Numerics;
using posenc::RopeSpec;
using posenc_test::BaseSpec;
using posenc_test::Describe;
using posenc_test::UlpDistance;

// Largest distance, in ulps of the numerics' own type, between two inv_freq vectors.
std::int64_t MaxUlps(const std::vector<double>& a, const std::vector<double>& b,
                     Numerics numerics) {
  EXPECT_EQ(a.size(), b.size());
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const std::int64_t d = numerics == Numerics::kPrecise
                               ? UlpDistance(a[i], b[i])
                               : UlpDistance(static_cast<float>(a[i]), static_cast<float>(b[i]));
    worst = std::max(worst, d);
  }
  return worst;
}

struct IdentityCase {
  std::string name;
  RopeSpec spec;
  std::int64_t seq_len;
  std::int64_t max_ulps;  // 0 for pure rescalings, 2 for blends (see the header)
};

std::vector<IdentityCase> IdentityCases(std::int64_t d, double theta) {
  std::vector<IdentityCase> cases;
  RopeSpec linear = BaseSpec(Method::kLinear, d, d, theta, 1.0);
  cases.push_back({"linear s=1", linear, 0, 0});
  RopeSpec ntk = BaseSpec(Method::kNtk, d, d, theta, 1.0);
  cases.push_back({"ntk s=1", ntk, 0, 0});
  for (std::int64_t seq_len : {0, 1, 2048, 4096}) {
    RopeSpec dynamic = BaseSpec(Method::kDynamic, d, d, theta, 4.0);
    dynamic.max_position_embeddings = 4096;
    cases.push_back({"dynamic s=4 at seq_len <= L'", dynamic, seq_len, 0});
  }
  RopeSpec yarn = BaseSpec(Method::kYarn, d, d, theta, 1.0);
  yarn.original_max_position_embeddings = 4096;
  yarn.max_position_embeddings = 4096;
  cases.push_back({"yarn s=1", yarn, 0, 2});
  yarn.yarn.mscale = 0.707;
  yarn.yarn.mscale_all_dim = 0.707;
  cases.push_back({"yarn s=1 with DeepSeek mscale", yarn, 0, 2});
  RopeSpec dyarn = BaseSpec(Method::kDynamicYarn, d, d, theta, 4.0);
  dyarn.original_max_position_embeddings = 4096;
  dyarn.max_position_embeddings = 16384;
  for (std::int64_t seq_len : {0, 100, 4096}) {
    cases.push_back({"dynamic-yarn at seq_len <= L", dyarn, seq_len, 2});
  }
  RopeSpec llama3 = BaseSpec(Method::kLlama3, d, d, theta, 1.0);
  llama3.original_max_position_embeddings = 8192;
  llama3.max_position_embeddings = 8192;
  cases.push_back({"llama3 s=1", llama3, 0, 2});
  RopeSpec longrope = BaseSpec(Method::kLongrope, d, d, theta, 1.0);
  longrope.original_max_position_embeddings = 4096;
  longrope.max_position_embeddings = 4096;
  longrope.longrope.short_factor.assign(static_cast<std::size_t>(d / 2), 1.0);
  longrope.longrope.long_factor.assign(static_cast<std::size_t>(d / 2), 1.0);
  cases.push_back({"longrope factors 1, s=1", longrope, 0, 0});
  cases.push_back({"longrope factors 1, s=1, long", longrope, 8192, 0});
  RopeSpec prop = BaseSpec(Method::kProportional, d, d, theta, 1.0);
  prop.partial_rotary_factor = 1.0;
  cases.push_back({"proportional rho=1 s=1", prop, 0, 0});
  return cases;
}

TEST(FrequencyPropertiesTest, IdentitySettingsEqualPlainRope) {
  for (Numerics numerics : {Numerics::kPrecise, Numerics::kHf}) {
    for (std::int64_t d : {64, 96, 128}) {
      for (double theta : {1e4, 5e5}) {
        const RopeSpec plain = BaseSpec(Method::kNone, d, d, theta, 1.0);
        const posenc::Frequencies want = posenc::compute_frequencies(plain, numerics);
        for (const IdentityCase& c : IdentityCases(d, theta)) {
          SCOPED_TRACE(c.name + ", " + Describe(c.spec, c.seq_len) + ", numerics " +
                       std::string(posenc::numerics_name(numerics)));
          const posenc::Frequencies got = posenc::compute_frequencies(c.spec, numerics, c.seq_len);
          EXPECT_LE(MaxUlps(got.inv_freq, want.inv_freq, numerics), c.max_ulps);
          EXPECT_EQ(got.attention_factor, 1.0);
          EXPECT_EQ(got.softmax_scale_multiplier, 1.0);
        }
      }
    }
  }
}

TEST(FrequencyPropertiesTest, YarnKeepsHighFrequenciesAndDividesLowOnes) {
  for (std::int64_t d : {64, 128, 256}) {
    for (double theta : {1e4, 1e6}) {
      for (double s : {2.0, 16.0, 40.0}) {
        RopeSpec spec = BaseSpec(Method::kYarn, d, d, theta, s);
        spec.original_max_position_embeddings = 4096;
        spec.max_position_embeddings = static_cast<std::int64_t>(4096 * s);
        SCOPED_TRACE(Describe(spec, 0));
        const posenc::Frequencies f = posenc::compute_frequencies(spec);
        ASSERT_TRUE(f.correction_low && f.correction_high);
        const double lo = *f.correction_low;
        const double hi = *f.correction_high;
        int kept = 0, divided = 0;
        for (std::int64_t i = 0; i < f.pair_count(); ++i) {
          const double w = f.unscaled_inv_freq[i];
          if (static_cast<double>(i) <= lo) {
            EXPECT_EQ(f.inv_freq[i], w) << "pair " << i;
            EXPECT_EQ(f.interpolation_weight[i], 0.0) << "pair " << i;
            ++kept;
          } else if (static_cast<double>(i) >= hi) {
            EXPECT_NEAR(f.inv_freq[i], w / s, w / s * 1e-15) << "pair " << i;
            EXPECT_EQ(f.interpolation_weight[i], 1.0) << "pair " << i;
            ++divided;
          } else {
            EXPECT_LT(f.inv_freq[i], w) << "pair " << i;
            EXPECT_GT(f.inv_freq[i], w / s) << "pair " << i;
          }
        }
        EXPECT_GT(kept, 0);
        EXPECT_GT(divided, 0);
      }
    }
  }
}

TEST(FrequencyPropertiesTest, Llama3KeepsHighFrequenciesAndDividesLowOnes) {
  for (std::int64_t d : {64, 128}) {
    for (double theta : {5e5, 1e6}) {
      for (double s : {8.0, 32.0}) {
        RopeSpec spec = BaseSpec(Method::kLlama3, d, d, theta, s);
        spec.original_max_position_embeddings = 8192;
        spec.max_position_embeddings = static_cast<std::int64_t>(8192 * s);
        SCOPED_TRACE(Describe(spec, 0));
        const posenc::Frequencies f = posenc::compute_frequencies(spec);
        const double high_wavelen = 8192.0 / spec.llama3.high_freq_factor;
        const double low_wavelen = 8192.0 / spec.llama3.low_freq_factor;
        int kept = 0, divided = 0;
        for (std::int64_t i = 0; i < f.pair_count(); ++i) {
          const double w = f.unscaled_inv_freq[i];
          const double wavelen = 2.0 * std::numbers::pi / w;
          if (wavelen < high_wavelen * (1 - 1e-12)) {
            EXPECT_EQ(f.inv_freq[i], w) << "pair " << i;
            ++kept;
          } else if (wavelen > low_wavelen * (1 + 1e-12)) {
            EXPECT_NEAR(f.inv_freq[i], w / s, w / s * 1e-15) << "pair " << i;
            ++divided;
          } else {
            EXPECT_LE(f.inv_freq[i], w) << "pair " << i;
            EXPECT_GE(f.inv_freq[i], w / s) << "pair " << i;
          }
        }
        EXPECT_GT(kept, 0);
        EXPECT_GT(divided, 0);
      }
    }
  }
}

TEST(FrequencyPropertiesTest, DynamicAtOrBelowMaxPositionsIsPlainAndAboveIsNot) {
  for (Numerics numerics : {Numerics::kPrecise, Numerics::kHf}) {
    for (double s : {2.0, 8.0}) {
      RopeSpec spec = BaseSpec(Method::kDynamic, 128, 128, 1e4, s);
      spec.max_position_embeddings = 2048;
      const RopeSpec plain = BaseSpec(Method::kNone, 128, 128, 1e4, 1.0);
      const posenc::Frequencies want = posenc::compute_frequencies(plain, numerics);
      for (std::int64_t seq_len : {0, 1, 1000, 2047, 2048}) {
        SCOPED_TRACE(Describe(spec, seq_len));
        const posenc::Frequencies f = posenc::compute_frequencies(spec, numerics, seq_len);
        EXPECT_EQ(f.inv_freq, want.inv_freq);
      }
      // One token more and the base grows: every pair but pair 0 (b^0 = 1) slows down.
      for (std::int64_t seq_len : {2049, 4096, 20480}) {
        SCOPED_TRACE(Describe(spec, seq_len));
        const posenc::Frequencies f = posenc::compute_frequencies(spec, numerics, seq_len);
        EXPECT_EQ(f.inv_freq[0], 1.0);
        for (std::int64_t i = 1; i < f.pair_count(); ++i) {
          EXPECT_LT(f.inv_freq[i], want.inv_freq[i]) << "pair " << i;
        }
      }
    }
  }
}

// Methods llama.cpp can express (kGgml maps these; the paper ramp, truncate false and
// dynamic-yarn have no ggml_rope_ext equivalent).
bool GgmlHas(const RopeSpec& spec) {
  return spec.method != Method::kDynamicYarn && spec.yarn.ramp == posenc::YarnRamp::kPairIndex &&
         spec.yarn.truncate;
}

TEST(FrequencyPropertiesTest, InvFreqIsNonIncreasingForEveryMethod) {
  int checked = 0;
  for (const posenc_test::GridCase& c : posenc_test::SpecGrid()) {
    for (Numerics numerics : {Numerics::kPrecise, Numerics::kHf, Numerics::kGgml}) {
      if (numerics == Numerics::kHf && !posenc_test::HfHas(c.spec)) continue;
      if (numerics == Numerics::kGgml && !GgmlHas(c.spec)) continue;
      for (std::int64_t seq_len : c.seq_lens) {
        posenc::Frequencies f;
        try {
          f = posenc::compute_frequencies(c.spec, numerics, seq_len);
        } catch (const posenc::Error& e) {
          ADD_FAILURE() << Describe(c.spec, seq_len) << " " << posenc::numerics_name(numerics)
                        << " threw: " << e.what();
          continue;
        }
        ++checked;
        for (std::int64_t i = 1; i < f.pair_count(); ++i) {
          if (!(f.inv_freq[i] <= f.inv_freq[i - 1])) {
            ADD_FAILURE() << Describe(c.spec, seq_len) << " " << posenc::numerics_name(numerics)
                          << ": inv_freq[" << i << "] = " << f.inv_freq[i] << " > inv_freq["
                          << i - 1 << "] = " << f.inv_freq[i - 1];
            break;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 20000);
}

TEST(FrequencyPropertiesTest, InterpolationWeightsLieInUnitInterval) {
  int checked = 0;
  for (const posenc_test::GridCase& c : posenc_test::SpecGrid()) {
    const Method m = c.spec.method;
    if (m != Method::kLinear && m != Method::kNtk && m != Method::kYarn &&
        m != Method::kDynamicYarn && m != Method::kLlama3) {
      continue;
    }
    for (std::int64_t seq_len : c.seq_lens) {
      const posenc::Frequencies f =
          posenc::compute_frequencies(c.spec, Numerics::kPrecise, seq_len);
      if (f.scale <= 1.0 || c.spec.factor <= 1.0) continue;
      ASSERT_EQ(f.interpolation_weight.size(), f.inv_freq.size()) << Describe(c.spec, seq_len);
      // Blend weights are exact ramp values; ntk's is ln(unscaled / w) / ln(s), a ratio of
      // logs that lands an ulp or two past 1 for the last pair (2i/(D-2) = 1 exactly):
      // 1e-13 covers it (frequencies_reference_test's tolerance for log-based weights).
      const double slack = m == Method::kNtk ? 1e-13 : 0.0;
      for (std::size_t i = 0; i < f.interpolation_weight.size(); ++i) {
        const double w = f.interpolation_weight[i];
        ASSERT_TRUE(w >= -slack && w <= 1.0 + slack)
            << Describe(c.spec, seq_len) << " pair " << i << " weight " << w;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

TEST(FrequencyPropertiesTest, ProportionalZeroesThePairsPastTheRotatedOnes) {
  for (double rho : {1.0, 0.5, 0.25, 0.3}) {
    for (std::int64_t head_dim : {64, 96, 256}) {
      RopeSpec spec = BaseSpec(Method::kProportional, head_dim, head_dim, 1e6, 1.0);
      spec.partial_rotary_factor = rho;
      SCOPED_TRACE(Describe(spec, 0));
      for (Numerics numerics : {Numerics::kPrecise, Numerics::kHf}) {
        const posenc::Frequencies f = posenc::compute_frequencies(spec, numerics);
        ASSERT_EQ(f.pair_count(), head_dim / 2);
        // int(rho * d_h / 2) pairs rotate: 0.3 * 96 / 2 = 14.4 -> 14.
        const auto rotated = static_cast<std::int64_t>(std::floor(rho * head_dim / 2.0));
        for (std::int64_t i = 0; i < f.pair_count(); ++i) {
          if (i < rotated) {
            EXPECT_GT(f.inv_freq[i], 0.0) << i;
          } else {
            EXPECT_EQ(f.inv_freq[i], 0.0) << i;
          }
        }
      }
    }
  }
}

// Llama 2 x16 (L 4096, D 128, b 1e4): the paper ramps in r = L / lambda between beta_slow and
// beta_fast; the implementations ramp linearly in the pair index between the correction dims
// 20 and 46. Pair 0 has r = 4096 / 2 pi = 652 > 32 (kept in both); pair 63 has
// r = 652 * 10^-3.9375 = 0.075 < 1 and index 63 > 46 (divided in both). In between they
// differ: at pair 33 the index ramp is (33 - 20) / 26 = 0.5, the paper's
// gamma = (652 * 10^-2.0625 - 1) / 31 = 0.150.
TEST(FrequencyPropertiesTest, YarnPaperRampDiffersButAgreesAtTheEnds) {
  RopeSpec spec = BaseSpec(Method::kYarn, 128, 128, 1e4, 16.0);
  spec.original_max_position_embeddings = 4096;
  spec.max_position_embeddings = 65536;
  const posenc::Frequencies index = posenc::compute_frequencies(spec);
  spec.yarn.ramp = posenc::YarnRamp::kPaper;
  EXPECT_EQ(posenc::method_name(spec), "yarn-paper");
  const posenc::Frequencies paper = posenc::compute_frequencies(spec);
  ASSERT_EQ(index.pair_count(), 64);
  ASSERT_EQ(paper.pair_count(), 64);
  EXPECT_EQ(index.inv_freq[0], index.unscaled_inv_freq[0]);
  EXPECT_EQ(paper.inv_freq[0], paper.unscaled_inv_freq[0]);
  EXPECT_NEAR(index.inv_freq[63], index.unscaled_inv_freq[63] / 16, index.inv_freq[63] * 1e-15);
  EXPECT_NEAR(paper.inv_freq[63], paper.unscaled_inv_freq[63] / 16, paper.inv_freq[63] * 1e-15);
  EXPECT_EQ(index.attention_factor, paper.attention_factor);
  // Pair 33: weight of the kept w is 0.5 (index) and 0.150 (paper).
  const double w33 = index.unscaled_inv_freq[33];
  EXPECT_NEAR(index.inv_freq[33] / w33, 0.5 + 0.5 / 16, 1e-12);
  const double r33 = 4096.0 * w33 / (2.0 * std::numbers::pi);
  const double gamma = (r33 - 1.0) / 31.0;
  EXPECT_NEAR(gamma, 0.150, 0.001);
  EXPECT_NEAR(paper.inv_freq[33] / w33, gamma + (1.0 - gamma) / 16, 1e-12);
  int differing = 0;
  for (int i = 0; i < 64; ++i) {
    if (std::fabs(index.inv_freq[i] - paper.inv_freq[i]) > 1e-6 * index.inv_freq[i]) ++differing;
  }
  EXPECT_GT(differing, 10);
}

}  // namespace

namespace {

// The ggml rendering of a yarn spec carries the spec's attention factor whether or not the ramp
// is on: ggml multiplies 1 + 0.1 ln s back only while ext_factor != 0, so the host-side division
// must follow the same condition (it did not: extrapolation_factor 0 lost 1 + 0.1 ln 16).
TEST(FrequencyPropertiesTest, GgmlYarnKeepsTheAttentionFactorWithoutTheRamp) {
  for (double ext : {0.0, 0.5, 1.0}) {
    posenc::RopeSpec s;
    s.method = posenc::Method::kYarn;
    s.head_dim = s.rotary_dim = 128;
    s.factor = 16;
    s.original_max_position_embeddings = 4096;
    s.yarn.extrapolation_factor = ext;
    const double want = posenc::compute_frequencies(s, posenc::Numerics::kPrecise).attention_factor;
    const double got = posenc::compute_frequencies(s, posenc::Numerics::kGgml).attention_factor;
    EXPECT_NEAR(got, want, 4e-7 * want) << "extrapolation_factor " << ext;  // float32 arithmetic
  }
}

}  // namespace
