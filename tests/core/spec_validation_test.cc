// Every error that RopeSpec validation (src/core/spec.cc) raises, one test each: the message must
// name the field and the value (docs/design.md §6). The config.json parser's own errors are in
// config_validation_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"
#include "posenc/io/config.h"
#include "support/error_of.h"
#include "support/spec_builder.h"

namespace posenc {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;
using testing::Names;
using ::testing::StartsWith;

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string validate_error(const RopeSpec& spec) {
  return error_of([&] { validate(spec); });
}

// Valid specs that each test breaks in exactly one way.
RopeSpec plain() { return testing::make_spec(Method::kNone, 128); }

RopeSpec with_method(Method m) {
  return testing::make_spec(m, 128, kDefaultRopeTheta, 4, 4096, 16384);
}

RopeSpec longrope() {
  RopeSpec s = with_method(Method::kLongrope);
  s.longrope.short_factor.assign(64, 1.0);
  s.longrope.long_factor.assign(64, 2.0);
  return s;
}

RopeSpec proportional() {
  RopeSpec s = with_method(Method::kProportional);
  s.partial_rotary_factor = 0.25;
  return s;
}

TEST(SpecValidation, BaseSpecsAreValid) {
  EXPECT_NO_THROW(validate(plain()));
  for (Method m : {Method::kLinear, Method::kNtk, Method::kDynamic, Method::kYarn,
                   Method::kDynamicYarn, Method::kLlama3}) {
    EXPECT_NO_THROW(validate(with_method(m))) << method_name(m);
  }
  EXPECT_NO_THROW(validate(longrope()));
  EXPECT_NO_THROW(validate(proportional()));
}

// --- set_method

TEST(SpecValidation, UnknownMethodName) {
  RopeSpec s;
  EXPECT_THAT(error_of([&] { set_method(s, "yarn2", "rope_type"); }),
              Names("rope_type", "(\"yarn2\")"));
}

// --- check_dims

TEST(SpecValidation, HeadDimNotPositive) {
  RopeSpec s = plain();
  s.head_dim = 0;
  EXPECT_THAT(validate_error(s), Names("head_dim", "(0)"));
}

TEST(SpecValidation, HeadDimTooLarge) {
  RopeSpec s = plain();
  s.head_dim = std::int64_t{1} << 40;
  EXPECT_THAT(validate_error(s), Names("head_dim", "(1099511627776)"));
}

TEST(SpecValidation, FactorTimesContextOverflows) {
  RopeSpec s = with_method(Method::kLinear);
  s.factor = 1e300;
  EXPECT_THAT(validate_error(s), Names("factor", "(1e+300)"));
}

TEST(SpecValidation, RotaryDimOdd) {
  RopeSpec s = plain();
  s.rotary_dim = 7;
  EXPECT_THAT(validate_error(s), Names("rotary_dim", "(7)"));
}

TEST(SpecValidation, RotaryOffsetNegative) {
  RopeSpec s = plain();
  s.rotary_dim = 64;
  s.rotary_offset = -2;
  EXPECT_THAT(validate_error(s), Names("rotary_offset", "(-2)"));
}

TEST(SpecValidation, RotaryDimsPastHeadDim) {
  RopeSpec s = plain();
  s.rotary_dim = 64;
  s.rotary_offset = 96;
  EXPECT_THAT(validate_error(s),
              AllOf(Names("rotary_offset + rotary_dim", "(96 + 64)"), Names("head_dim", "(128)")));
}

TEST(SpecValidation, RopeThetaNotAboveOne) {
  RopeSpec s = plain();
  s.rope_theta = 1;
  EXPECT_THAT(validate_error(s), Names("rope_theta", "(1)"));
}

TEST(SpecValidation, RopeThetaNotFinite) {
  RopeSpec s = plain();
  s.rope_theta = kInf;
  EXPECT_THAT(validate_error(s), Names("rope_theta", "(inf)"));
}

TEST(SpecValidation, MaxPositionEmbeddingsNegative) {
  RopeSpec s = plain();
  s.max_position_embeddings = -1;
  EXPECT_THAT(validate_error(s), Names("max_position_embeddings", "(-1)"));
}

TEST(SpecValidation, OriginalMaxPositionEmbeddingsNegative) {
  RopeSpec s = plain();
  s.original_max_position_embeddings = -5;
  EXPECT_THAT(validate_error(s), Names("original_max_position_embeddings", "(-5)"));
}

// --- check_factor

TEST(SpecValidation, FactorNotPositive) {
  RopeSpec s = with_method(Method::kLinear);
  s.factor = 0;
  EXPECT_THAT(validate_error(s), Names("factor", "(0)"));
}

TEST(SpecValidation, FactorNaN) {
  RopeSpec s = with_method(Method::kNtk);
  s.factor = std::nan("");
  EXPECT_THAT(validate_error(s), Names("factor", "(nan)"));
}

// --- ntk and dynamic

TEST(SpecValidation, NtkRotaryDimTooSmall) {
  RopeSpec s = with_method(Method::kNtk);
  s.rotary_dim = 2;
  EXPECT_THAT(validate_error(s), Names("rotary_dim", "(2)"));
}

TEST(SpecValidation, DynamicNeedsMaxPositionEmbeddings) {
  RopeSpec s = with_method(Method::kDynamic);
  s.max_position_embeddings = 0;
  EXPECT_THAT(validate_error(s), Names("max_position_embeddings", "(0)"));
}

// --- yarn

TEST(SpecValidation, YarnNeedsOriginalContext) {
  RopeSpec s = with_method(Method::kYarn);
  s.original_max_position_embeddings = 0;
  EXPECT_THAT(validate_error(s), Names("original_max_position_embeddings", "(0)"));
}

TEST(SpecValidation, YarnBetaFastNotFinite) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.beta_fast = kInf;
  EXPECT_THAT(validate_error(s), Names("beta_fast", "(inf)"));
}

TEST(SpecValidation, YarnBetaSlowNotPositive) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.beta_slow = -1;
  EXPECT_THAT(validate_error(s), Names("beta_slow", "(-1)"));
}

TEST(SpecValidation, YarnBetaFastNotAboveBetaSlow) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.beta_fast = 0.5;
  EXPECT_THAT(validate_error(s), AllOf(Names("beta_fast", "(0.5)"), Names("beta_slow", "(1)")));
}

TEST(SpecValidation, YarnAttentionFactorNotPositive) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.attention_factor = -0.5;
  EXPECT_THAT(validate_error(s), Names("attention_factor", "(-0.5)"));
}

TEST(SpecValidation, YarnMscaleNotFinite) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.mscale = kInf;
  EXPECT_THAT(validate_error(s), Names("mscale", "(inf)"));
}

TEST(SpecValidation, YarnMscaleAllDimNotFinite) {
  RopeSpec s = with_method(Method::kDynamicYarn);
  s.yarn.mscale_all_dim = std::nan("");
  EXPECT_THAT(validate_error(s), Names("mscale_all_dim", "(nan)"));
}

TEST(SpecValidation, YarnExtrapolationFactorNotFinite) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.extrapolation_factor = -kInf;
  EXPECT_THAT(validate_error(s), Names("extrapolation_factor", "(-inf)"));
}

// --- llama3

TEST(SpecValidation, Llama3NeedsOriginalContext) {
  RopeSpec s = with_method(Method::kLlama3);
  s.original_max_position_embeddings = 0;
  EXPECT_THAT(validate_error(s), Names("original_max_position_embeddings", "(0)"));
}

TEST(SpecValidation, Llama3LowFreqFactorNotPositive) {
  RopeSpec s = with_method(Method::kLlama3);
  s.llama3.low_freq_factor = 0;
  EXPECT_THAT(validate_error(s), Names("low_freq_factor", "(0)"));
}

TEST(SpecValidation, Llama3HighFreqFactorNotPositive) {
  RopeSpec s = with_method(Method::kLlama3);
  s.llama3.high_freq_factor = -4;
  EXPECT_THAT(validate_error(s), Names("high_freq_factor", "(-4)"));
}

TEST(SpecValidation, Llama3HighFreqFactorNotAboveLow) {
  RopeSpec s = with_method(Method::kLlama3);
  s.llama3.high_freq_factor = 1;
  s.llama3.low_freq_factor = 2;
  EXPECT_THAT(validate_error(s),
              AllOf(Names("high_freq_factor", "(1)"), Names("low_freq_factor", "(2)")));
}

// --- longrope

TEST(SpecValidation, LongropeNeedsOriginalContext) {
  RopeSpec s = longrope();
  s.original_max_position_embeddings = 0;
  EXPECT_THAT(validate_error(s), Names("original_max_position_embeddings", "(0)"));
}

TEST(SpecValidation, LongropeFactorNotPositive) {
  RopeSpec s = longrope();
  s.factor = 0;
  EXPECT_THAT(validate_error(s), Names("factor", "(0)"));
}

TEST(SpecValidation, LongropeShortFactorLength) {
  RopeSpec s = longrope();
  s.longrope.short_factor.resize(3);
  EXPECT_THAT(validate_error(s), AllOf(Names("short_factor", "has 3 entries"), HasSubstr("64")));
}

TEST(SpecValidation, LongropeLongFactorLength) {
  RopeSpec s = longrope();
  s.longrope.long_factor.resize(65, 1.0);
  EXPECT_THAT(validate_error(s), AllOf(Names("long_factor", "has 65 entries"), HasSubstr("64")));
}

TEST(SpecValidation, LongropeFactorEntryNotPositive) {
  RopeSpec s = longrope();
  s.longrope.short_factor[5] = 0;
  EXPECT_THAT(validate_error(s), Names("short_factor[5]", "(0)"));
}

TEST(SpecValidation, LongropeAttentionFactorNotPositive) {
  RopeSpec s = longrope();
  s.longrope.attention_factor = 0;
  EXPECT_THAT(validate_error(s), Names("attention_factor", "(0)"));
}

// --- proportional

TEST(SpecValidation, ProportionalFactorOutOfRange) {
  RopeSpec s = proportional();
  s.partial_rotary_factor = 1.5;
  EXPECT_THAT(validate_error(s), Names("partial_rotary_factor", "(1.5)"));
}

TEST(SpecValidation, ProportionalTableNarrowerThanHead) {
  RopeSpec s = proportional();
  s.rotary_dim = 64;
  EXPECT_THAT(validate_error(s), AllOf(Names("rotary_dim", "(64)"), Names("head_dim", "(128)")));
}

TEST(SpecValidation, ProportionalRotatesNoPair) {
  RopeSpec s = proportional();
  s.partial_rotary_factor = 0.01;  // int(0.01 * 128 / 2) = 0 pairs
  EXPECT_THAT(validate_error(s), AllOf(Names("partial_rotary_factor", "(0.01)"), HasSubstr("128")));
}

// --- Derived scalars: finite and positive, named by the fields that produced them

TEST(SpecValidation, YarnMscaleMakesAttentionFactorNegative) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.mscale = -20;  // g(4, -20) = 0.1 * -20 * ln 4 + 1 = -1.77
  s.yarn.mscale_all_dim = 1;
  EXPECT_THAT(validate_error(s), AllOf(Names("mscale", "(-20)"), HasSubstr("greater than 0")));
}

TEST(SpecValidation, YarnMscaleAllDimMakesDenominatorNegative) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.mscale = 1;
  s.yarn.mscale_all_dim = -10;  // g(4, -10) = -0.386: attention factor and softmax multiplier
  EXPECT_THAT(validate_error(s), Names("mscale_all_dim", "(-10)"));
}

TEST(SpecValidation, YarnMscaleAllDimAloneStillNeedsPositiveMultiplier) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.mscale_all_dim =
      -10;  // no mscale: attention factor g(s, 1), softmax multiplier g(s, -10)^2
  EXPECT_THAT(validate_error(s), Names("mscale_all_dim", "(-10)"));
}

TEST(SpecValidation, YarnMscaleOverflowsAttentionFactor) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.mscale = 1e300;  // finite, but g is 1.4e299: no float32 holds it
  s.yarn.mscale_all_dim = 1;
  EXPECT_THAT(validate_error(s),
              AllOf(Names("mscale", "(1e+300)"), HasSubstr("1.2e-38 .. 3.4e38")));
}

TEST(SpecValidation, DynamicYarnAttentionFactorCheckedAtEachLength) {
  RopeSpec s = with_method(Method::kDynamicYarn);
  s.yarn.mscale = -3;  // g(s, -3) = 1 - 0.3 ln s: positive at s = 4, negative from s = 28
  s.yarn.mscale_all_dim = 1;
  EXPECT_NO_THROW(validate(s));
  EXPECT_NO_THROW(compute_frequencies(s, Numerics::kPrecise, 16384));
  const std::string e = error_of([&] { compute_frequencies(s, Numerics::kHf, 40 * 4096); });
  EXPECT_THAT(
      e, AllOf(HasSubstr("seq_len 163840"), HasSubstr("attention factor"), Names("mscale", "-3")));
}

TEST(SpecValidation, LongropeAttentionFactorDividesByLnOne) {
  RopeSpec s = longrope();
  s.original_max_position_embeddings = 1;  // sqrt(1 + ln s / ln 1)
  s.max_position_embeddings = 4;
  EXPECT_THAT(validate_error(s),
              AllOf(Names("original_max_position_embeddings", "(1)"), HasSubstr("ln(1) = 0")));
  s.longrope.attention_factor = 1.5;
  EXPECT_NO_THROW(validate(s));
}

// --- Values that the hf and ggml numerics round to float32

TEST(SpecValidation, RopeThetaOutsideFloat32) {
  RopeSpec s = plain();
  s.rope_theta = 1e39;
  EXPECT_THAT(validate_error(s), AllOf(Names("rope_theta", "(1e+39)"),
                                       HasSubstr("float32's range, 1.2e-38 .. 3.4e38")));
  s.rope_theta = 1.00000001;  // > 1, but float32 1: ln(freq_base) = 0
  EXPECT_THAT(validate_error(s),
              AllOf(Names("rope_theta", "(1.00000001)"), HasSubstr("rounds to 1")));
}

TEST(SpecValidation, FactorOutsideFloat32) {
  for (double factor : {1e300, 1e-300, 1e39, 1e-39}) {
    RopeSpec s = with_method(Method::kLinear);
    s.original_max_position_embeddings = 0;  // keeps factor * L below 2^53
    s.factor = factor;
    EXPECT_THAT(validate_error(s),
                AllOf(HasSubstr("factor (" + std::string(factor > 1 ? "1e+" : "1e-")),
                      HasSubstr("float32's range")))
        << factor;
  }
}

TEST(SpecValidation, EveryFloat32FieldIsRangeChecked) {
  struct Case {
    const char* field;
    std::function<void(RopeSpec&)> set;
    RopeSpec base;
  };
  const std::vector<Case> cases = {
      {"beta_fast (1e+39)", [](RopeSpec& s) { s.yarn.beta_fast = 1e39; },
       with_method(Method::kYarn)},
      {"beta_slow (1e-40)", [](RopeSpec& s) { s.yarn.beta_slow = 1e-40; },
       with_method(Method::kYarn)},
      {"attention_factor (1e+39)", [](RopeSpec& s) { s.yarn.attention_factor = 1e39; },
       with_method(Method::kYarn)},
      {"attention_factor (1e-300)", [](RopeSpec& s) { s.yarn.attention_factor = 1e-300; },
       with_method(Method::kYarn)},
      {"mscale (-1e+39)", [](RopeSpec& s) { s.yarn.mscale = -1e39; }, with_method(Method::kYarn)},
      {"mscale_all_dim (1e+39)", [](RopeSpec& s) { s.yarn.mscale_all_dim = 1e39; },
       with_method(Method::kYarn)},
      {"extrapolation_factor (1e+39)", [](RopeSpec& s) { s.yarn.extrapolation_factor = 1e39; },
       with_method(Method::kYarn)},
      {"low_freq_factor (1e-39)", [](RopeSpec& s) { s.llama3.low_freq_factor = 1e-39; },
       with_method(Method::kLlama3)},
      {"high_freq_factor (1e+39)", [](RopeSpec& s) { s.llama3.high_freq_factor = 1e39; },
       with_method(Method::kLlama3)},
      {"short_factor[3] (1e-39)", [](RopeSpec& s) { s.longrope.short_factor[3] = 1e-39; },
       longrope()},
      {"long_factor[0] (1e+39)", [](RopeSpec& s) { s.longrope.long_factor[0] = 1e39; }, longrope()},
      {"attention_factor (1e+39)", [](RopeSpec& s) { s.longrope.attention_factor = 1e39; },
       longrope()},
      {"freq_factors[2] (1e-39)",
       [](RopeSpec& s) {
         s.freq_factors.assign(static_cast<std::size_t>(s.rotary_dim / 2), 1.0);
         s.freq_factors[2] = 1e-39;
       },
       with_method(Method::kNone)},
  };
  for (const Case& c : cases) {
    RopeSpec s = c.base;
    c.set(s);
    EXPECT_THAT(validate_error(s), AllOf(HasSubstr(c.field), HasSubstr("float32"))) << c.field;
  }
}

TEST(SpecValidation, NtkBaseOutsideFloat32) {
  RopeSpec s = with_method(Method::kNtk);
  s.rope_theta = 1e38;  // 1e38 * 4^(128/126) = 4.1e38
  EXPECT_THAT(validate_error(s),
              AllOf(Names("rope_theta", "(1e+38)"), Names("factor", "(4)"), HasSubstr("NTK base")));
}

TEST(SpecValidation, DynamicBaseCheckedAtEachLength) {
  RopeSpec s = with_method(Method::kDynamic);
  s.rope_theta = 1e36;
  EXPECT_NO_THROW(compute_frequencies(s, Numerics::kPrecise, 16384));
  // base 1e36 * (4 * 2^30 / 16384 - 3)^(128/126): far past float32
  const std::string e =
      error_of([&] { compute_frequencies(s, Numerics::kGgml, std::int64_t{1} << 30); });
  EXPECT_THAT(e, AllOf(HasSubstr("seq_len 1073741824"), HasSubstr("the base"),
                       Names("rope_theta", "1e+36"), HasSubstr("float32's range")));
}

// --- Legal but suspicious: warnings

TEST(SpecValidation, YarnInvertedCorrectionRangeWarns) {
  RopeSpec s = with_method(Method::kYarn);
  s.yarn.beta_fast = 1e30;
  s.yarn.beta_slow = 1e29;
  const std::vector<std::string> w = validate(s);
  EXPECT_THAT(w, ::testing::Contains(AllOf(Names("beta_fast", "(1e+30)"),
                                           Names("beta_slow", "(1e+29)"), HasSubstr("inverted"))));
  EXPECT_THAT(validate(with_method(Method::kYarn)), ::testing::IsEmpty());
}

TEST(SpecValidation, LongropeOriginalContextAboveMaxWarns) {
  RopeSpec s = longrope();
  s.original_max_position_embeddings = 8192;
  s.max_position_embeddings = 4096;
  s.factor = 0.5;
  EXPECT_THAT(validate(s),
              ::testing::Contains(AllOf(Names("original_max_position_embeddings", "(8192)"),
                                        Names("max_position_embeddings", "(4096)"),
                                        Names("factor", "(0.5)"))));
  EXPECT_THAT(validate(longrope()), ::testing::IsEmpty());
}

}  // namespace

// llama.cpp's rope_freqs as RopeSpec::freq_factors: n divisors > 0, not beside a method that has
// divisors of its own.
TEST(SpecValidation, FreqFactors) {
  RopeSpec s = plain();
  const auto n = static_cast<std::size_t>(s.rotary_dim / 2);
  s.freq_factors.assign(n - 1, 1.0);
  EXPECT_THAT(validate_error(s),
              HasSubstr("freq_factors has " + std::to_string(n - 1) +
                        " entries; expected rotary_dim / 2 = " + std::to_string(n)));
  s.freq_factors.assign(n, 1.0);
  EXPECT_NO_THROW(validate(s));
  s.freq_factors[1] = 0.0;
  EXPECT_THAT(validate_error(s),
              HasSubstr("freq_factors[1] (0) must be a finite number greater than 0"));
  s.freq_factors[1] = 2.0;
  for (Method m : {Method::kLlama3, Method::kLongrope, Method::kProportional}) {
    RopeSpec t = m == Method::kLongrope ? longrope() : with_method(m);
    t.freq_factors.assign(static_cast<std::size_t>(t.rotary_dim / 2), 2.0);
    EXPECT_THAT(validate_error(t), HasSubstr("cannot be combined with this method"))
        << method_name(t);
  }
  RopeSpec y = with_method(Method::kYarn);  // llama.cpp divides inside rope_yarn too
  y.freq_factors.assign(static_cast<std::size_t>(y.rotary_dim / 2), 2.0);
  EXPECT_NO_THROW(validate(y));
}

TEST(SpecValidation, LayoutNamesParseBack) {
  for (Layout l : {Layout::kHalfSplit, Layout::kInterleaved})
    EXPECT_EQ(parse_layout(layout_name(l)), l);
  EXPECT_EQ(error_of([] { parse_layout("concatenated"); }),
            "layout (\"concatenated\") must be half-split (pairs (i, i + n)) or interleaved (pairs "
            "(2i, 2i + 1))");
  EXPECT_THAT(error_of([] { parse_layout("neox", "--layout"); }),
              StartsWith("--layout (\"neox\")"));
}

}  // namespace posenc
