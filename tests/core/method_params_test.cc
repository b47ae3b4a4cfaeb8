// A method's parameters beyond its factor (posenc/core/method_params.h): each lands in its
// RopeSpec field, a method that does not read one refuses it naming it (as a key or a flag), bad
// values are refused, and the validation of the result names the flags it came from. (Their use
// by --scaling: tests/io/extend_test.cc; by eval, generate and the sidecar:
// tests/cli/rope_sidecar_cli_test.cc; by posenc.finetune: tests/python/test_finetune.py.)
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/method_params.h"
#include "posenc/core/spec.h"

namespace {

using posenc::MethodParams;
using posenc::ParamNames;
using posenc::RopeSpec;
using ::testing::HasSubstr;

// stories260K's RoPE with `method` at s = 4: head_dim 8, interleaved, L = 512.
RopeSpec spec(const std::string& method) {
  RopeSpec s;
  posenc::set_method(s, method, "method");
  s.head_dim = s.rotary_dim = 8;
  s.layout = posenc::Layout::kInterleaved;
  s.factor = 4.0;
  s.original_max_position_embeddings = 512;
  posenc::validate(s);
  return s;
}

std::string error_of(RopeSpec s, const std::string& method, const MethodParams& p,
                     ParamNames names) {
  try {
    posenc::apply_method_params(s, p, names, "method " + method);
  } catch (const posenc::Error& e) {
    return e.what();
  }
  return "";
}

TEST(MethodParams, EachLandsInItsSpecField) {
  MethodParams p;
  p.attention_factor = 1.5;
  p.beta_fast = 16;
  p.beta_slow = 2;
  p.mscale = 0.8;
  p.mscale_all_dim = 0.5;
  p.extrapolation_factor = 0.25;
  p.truncate = false;
  RopeSpec yarn = spec("yarn");
  posenc::apply_method_params(yarn, p, ParamNames::kKeys, "method yarn");
  EXPECT_EQ(yarn.yarn.attention_factor, 1.5);
  EXPECT_EQ(yarn.yarn.beta_fast, 16.0);
  EXPECT_EQ(yarn.yarn.beta_slow, 2.0);
  EXPECT_EQ(yarn.yarn.mscale, 0.8);
  EXPECT_EQ(yarn.yarn.mscale_all_dim, 0.5);
  EXPECT_EQ(yarn.yarn.extrapolation_factor, 0.25);
  EXPECT_FALSE(yarn.yarn.truncate);
  // The explicit attention factor is the one the frequencies carry.
  EXPECT_EQ(posenc::compute_frequencies(yarn, posenc::Numerics::kPrecise).attention_factor, 1.5);

  MethodParams l3;
  l3.low_freq_factor = 2;
  l3.high_freq_factor = 8;
  RopeSpec llama3 = spec("llama3");
  posenc::apply_method_params(llama3, l3, ParamNames::kFlags, "method llama3");
  EXPECT_EQ(llama3.llama3.low_freq_factor, 2.0);
  EXPECT_EQ(llama3.llama3.high_freq_factor, 8.0);
}

TEST(MethodParams, ChangeTheFrequenciesTheMethodComputes) {
  // beta_fast 4 instead of 32 moves YaRN's ramp: some pair's frequency must change.
  RopeSpec base = spec("yarn");
  RopeSpec moved = base;
  MethodParams p;
  p.beta_fast = 4;
  posenc::apply_method_params(moved, p, ParamNames::kKeys, "method yarn");
  const auto a = posenc::compute_frequencies(base, posenc::Numerics::kPrecise).inv_freq;
  const auto b = posenc::compute_frequencies(moved, posenc::Numerics::kPrecise).inv_freq;
  EXPECT_NE(a, b);
}

TEST(MethodParams, AMethodThatDoesNotReadOneRefusesIt) {
  MethodParams p;
  p.beta_fast = 16;
  const RopeSpec linear = spec("linear");
  EXPECT_THAT(
      error_of(linear, "linear", p, ParamNames::kKeys),
      HasSubstr(
          "beta_fast (16) applies to yarn, yarn-paper and dynamic-yarn, not to method linear"));
  EXPECT_THAT(error_of(linear, "linear", p, ParamNames::kFlags),
              HasSubstr("--beta-fast (16) applies to yarn"));
  EXPECT_EQ(posenc::unread_method_params(p, linear, ParamNames::kFlags),
            std::vector<std::string>{"--beta-fast"});
  MethodParams t;
  t.truncate = false;
  // yarn-paper's ramp is on the wavelength ratio: it has no correction dims to truncate.
  const RopeSpec paper = spec("yarn-paper");
  EXPECT_THAT(
      error_of(paper, "yarn-paper", t, ParamNames::kKeys),
      HasSubstr("truncate (false) applies to yarn and dynamic-yarn, not to method yarn-paper"));
  MethodParams l3;
  l3.low_freq_factor = 2;
  EXPECT_THAT(error_of(spec("yarn"), "yarn", l3, ParamNames::kFlags),
              HasSubstr("--low-freq-factor (2) applies to llama3, not to method yarn"));
}

TEST(MethodParams, BadValuesAreRefusedNamingWhereTheyCameFrom) {
  const RopeSpec yarn = spec("yarn");
  MethodParams zero;
  zero.attention_factor = 0;
  EXPECT_THAT(error_of(yarn, "yarn", zero, ParamNames::kFlags),
              HasSubstr("--attention-factor (0) must be a finite number greater than 0"));
  MethodParams nan;
  nan.beta_slow = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(error_of(yarn, "yarn", nan, ParamNames::kKeys),
              HasSubstr("beta_slow (nan) must be a finite number"));
  // validate() of the result: its message names the spec field, and the flags behind it.
  MethodParams crossed;
  crossed.beta_fast = 2;
  crossed.beta_slow = 8;
  const std::string e = error_of(yarn, "yarn", crossed, ParamNames::kFlags);
  EXPECT_THAT(e, HasSubstr("beta_fast (2) must be greater than beta_slow (8)"));
  EXPECT_THAT(e, HasSubstr("(with --beta-fast 2 --beta-slow 8)"));
}

TEST(MethodParams, FlagsOverridesAndTheTable) {
  MethodParams sidecar;
  sidecar.beta_fast = 16;
  sidecar.truncate = true;
  MethodParams flags;
  flags.truncate = false;
  flags.attention_factor = 1.25;
  EXPECT_TRUE(MethodParams{}.params_empty());
  EXPECT_FALSE(sidecar.params_empty());
  sidecar.override_params(flags);
  EXPECT_EQ(sidecar.param_flags(), "--beta-fast 16 --attention-factor 1.25 --truncate false");
  // Every key is its flag in snake_case, and the lookup finds each one.
  for (const posenc::MethodParamInfo& info : posenc::method_param_table()) {
    std::string flag = "--" + std::string(info.key);
    for (char& c : flag) c = c == '_' ? '-' : c;
    EXPECT_EQ(info.flag, flag);
    EXPECT_EQ(&posenc::method_param_info(info.key), &info);
  }
  EXPECT_THROW(posenc::method_param_info("beta_fst"), posenc::Error);
}

}  // namespace
