// The method parameters beyond the factor (posenc/llama/rope_params.h): each lands in its RopeSpec
// field, a method that does not read one refuses it naming it (as a key or a flag), and the
// validation of the result names the parameters it came from.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/llama/llama.h"
#include "posenc/llama/rope_params.h"

namespace {

using posenc::RopeSpec;
using posenc::llama::apply_rope_params;
using posenc::llama::ParamNames;
using posenc::llama::RopeParams;
using ::testing::HasSubstr;

// stories260K's shape: dim 64, 8 heads (head_dim 8), L = 512.
posenc::llama::Config config() {
  posenc::llama::Config c;
  c.dim = 64;
  c.hidden_dim = 172;
  c.layers = 5;
  c.heads = 8;
  c.kv_heads = 4;
  c.vocab_size = 512;
  c.max_seq_len = 512;
  return c;
}

std::string error_of(RopeSpec spec, const std::string& method, const RopeParams& p,
                     ParamNames names) {
  try {
    apply_rope_params(spec, p, method, names);
  } catch (const posenc::Error& e) {
    return e.what();
  }
  return "";
}

TEST(RopeParams, EachLandsInItsSpecField) {
  RopeParams p;
  p.attention_factor = 1.5;
  p.beta_fast = 16;
  p.beta_slow = 2;
  p.mscale = 0.8;
  p.mscale_all_dim = 0.5;
  p.extrapolation_factor = 0.25;
  p.truncate = false;
  RopeSpec yarn = posenc::llama::rope_spec(config(), "yarn", 4.0);
  apply_rope_params(yarn, p, "yarn", ParamNames::kKeys);
  EXPECT_EQ(yarn.yarn.attention_factor, 1.5);
  EXPECT_EQ(yarn.yarn.beta_fast, 16.0);
  EXPECT_EQ(yarn.yarn.beta_slow, 2.0);
  EXPECT_EQ(yarn.yarn.mscale, 0.8);
  EXPECT_EQ(yarn.yarn.mscale_all_dim, 0.5);
  EXPECT_EQ(yarn.yarn.extrapolation_factor, 0.25);
  EXPECT_FALSE(yarn.yarn.truncate);
  // The explicit attention factor is the one the frequencies carry.
  EXPECT_EQ(posenc::compute_frequencies(yarn, posenc::Numerics::kPrecise).attention_factor, 1.5);

  RopeParams l3;
  l3.low_freq_factor = 2;
  l3.high_freq_factor = 8;
  RopeSpec llama3 = posenc::llama::rope_spec(config(), "llama3", 4.0);
  apply_rope_params(llama3, l3, "llama3", ParamNames::kFlags);
  EXPECT_EQ(llama3.llama3.low_freq_factor, 2.0);
  EXPECT_EQ(llama3.llama3.high_freq_factor, 8.0);
}

TEST(RopeParams, ChangeTheFrequenciesTheMethodComputes) {
  // beta_fast 4 instead of 32 moves YaRN's ramp: some pair's frequency must change.
  RopeSpec base = posenc::llama::rope_spec(config(), "yarn", 4.0);
  RopeSpec moved = base;
  RopeParams p;
  p.beta_fast = 4;
  apply_rope_params(moved, p, "yarn", ParamNames::kKeys);
  const auto a = posenc::compute_frequencies(base, posenc::Numerics::kPrecise).inv_freq;
  const auto b = posenc::compute_frequencies(moved, posenc::Numerics::kPrecise).inv_freq;
  EXPECT_NE(a, b);
}

TEST(RopeParams, AMethodThatDoesNotReadOneRefusesIt) {
  RopeParams p;
  p.beta_fast = 16;
  const RopeSpec linear = posenc::llama::rope_spec(config(), "linear", 4.0);
  EXPECT_THAT(error_of(linear, "linear", p, ParamNames::kKeys),
              HasSubstr("beta_fast (16) has no effect on method linear: only yarn"));
  EXPECT_THAT(error_of(linear, "linear", p, ParamNames::kFlags),
              HasSubstr("--beta-fast (16) has no effect on method linear"));
  EXPECT_EQ(posenc::llama::unread_params(p, linear, ParamNames::kFlags),
            std::vector<std::string>{"--beta-fast"});
  RopeParams t;
  t.truncate = false;
  // yarn-paper's ramp is on the wavelength ratio: it has no correction dims to truncate.
  const RopeSpec paper = posenc::llama::rope_spec(config(), "yarn-paper", 4.0);
  EXPECT_THAT(error_of(paper, "yarn-paper", t, ParamNames::kKeys),
              HasSubstr("truncate (false) has no effect on method yarn-paper"));
  RopeParams l3;
  l3.low_freq_factor = 2;
  EXPECT_THAT(
      error_of(posenc::llama::rope_spec(config(), "yarn", 4.0), "yarn", l3, ParamNames::kFlags),
      HasSubstr("--low-freq-factor (2) has no effect on method yarn: only llama3"));
}

TEST(RopeParams, BadValuesAreRefusedNamingWhereTheyCameFrom) {
  const RopeSpec yarn = posenc::llama::rope_spec(config(), "yarn", 4.0);
  RopeParams zero;
  zero.attention_factor = 0;
  EXPECT_THAT(error_of(yarn, "yarn", zero, ParamNames::kFlags),
              HasSubstr("--attention-factor (0) must be positive"));
  RopeParams nan;
  nan.beta_slow = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(error_of(yarn, "yarn", nan, ParamNames::kKeys),
              HasSubstr("beta_slow (nan) must be finite"));
  // validate() of the result: its message names the spec field, and the flags behind it.
  RopeParams crossed;
  crossed.beta_fast = 2;
  crossed.beta_slow = 8;
  const std::string e = error_of(yarn, "yarn", crossed, ParamNames::kFlags);
  EXPECT_THAT(e, HasSubstr("beta_fast (2) must be greater than beta_slow (8)"));
  EXPECT_THAT(e, HasSubstr("(from --beta-fast 2 --beta-slow 8)"));
}

TEST(RopeParams, FlagsOverridesAndTheTable) {
  RopeParams sidecar;
  sidecar.beta_fast = 16;
  sidecar.truncate = true;
  RopeParams flags;
  flags.truncate = false;
  flags.attention_factor = 1.25;
  EXPECT_TRUE(RopeParams{}.empty());
  EXPECT_FALSE(sidecar.empty());
  sidecar.override_with(flags);
  EXPECT_EQ(sidecar.flags(), "--attention-factor 1.25 --beta-fast 16 --truncate false");
  // Every key is its flag in snake_case, and the lookup finds each one.
  for (const posenc::llama::RopeParamInfo& info : posenc::llama::rope_param_table()) {
    std::string flag = "--" + std::string(info.key);
    for (char& c : flag) c = c == '_' ? '-' : c;
    EXPECT_EQ(info.flag, flag);
    EXPECT_EQ(&posenc::llama::rope_param_info(info.key), &info);
  }
  EXPECT_THROW(posenc::llama::rope_param_info("beta_fst"), posenc::Error);
}

}  // namespace
