// posenc/io/extend.h: extending a model with a method of the caller's choice.
//
// Golden values are hand derivations: L0 the model's original context, s = N / L0, and YaRN's
// attention factor 0.1 ln s + 1 (YaRN paper eq. 22).
#include "posenc/io/extend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/io/presets.h"
#include "support/error_of.h"

namespace posenc {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

RopeSpec preset(const char* name) { return load_preset(name).spec; }

ExtendOptions with(const std::string& scaling, std::optional<std::int64_t> target = std::nullopt,
                   std::optional<double> factor = std::nullopt) {
  ExtendOptions o;
  o.scaling = scaling;
  o.target_context = target;
  o.factor = factor;
  return o;
}

// The message of the Error extend_spec throws; "(no error)" when none.
std::string error_of(const RopeSpec& base, const ExtendOptions& o) {
  return posenc::testing::error_of([&] { extend_spec(base, o, nullptr); });
}

TEST(Extend, NoOptionsReturnTheModelUnchanged) {
  const RopeSpec base = preset("llama-3.1-8b");
  std::vector<std::string> warnings;
  const RopeSpec s = extend_spec(base, ExtendOptions{}, &warnings);
  EXPECT_TRUE(ExtendOptions{}.empty());
  EXPECT_EQ(s.method, base.method);
  EXPECT_EQ(s.factor, base.factor);
  EXPECT_THAT(warnings, IsEmpty());
}

// Llama 2 (L' 4096, no original) to 65536 tokens with YaRN: s = 65536 / 4096 = 16, L = 4096,
// L' = 65536, attention factor 0.1 ln 16 + 1 = 1.2772588722239781.
TEST(Extend, Llama2YarnTo65536IsFactor16) {
  std::vector<std::string> warnings;
  const RopeSpec s = extend_spec(preset("llama-2-7b"), with("yarn", 65536), &warnings);
  EXPECT_EQ(s.method, Method::kYarn);
  EXPECT_EQ(s.factor, 16.0);
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_EQ(s.max_position_embeddings, 65536);
  EXPECT_EQ(s.yarn.beta_fast, kYarnBetaFast);
  EXPECT_EQ(s.yarn.beta_slow, kYarnBetaSlow);
  EXPECT_THAT(warnings, IsEmpty());  // the model had no scaling to replace
  EXPECT_NEAR(compute_frequencies(s).attention_factor, 1.2772588722239781, 1e-15);
  EXPECT_EQ(extended_context(s), 65536);
}

TEST(Extend, FactorAloneSetsTheContextsAsExtendedConfigsDo) {
  const RopeSpec s = extend_spec(preset("llama-2-7b"), with("yarn", std::nullopt, 16.0), nullptr);
  EXPECT_EQ(s.factor, 16.0);
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_EQ(s.max_position_embeddings, 65536);  // s * L0, as gpt-oss and DeepSeek write it
}

TEST(Extend, FactorAndTargetMustAgree) {
  const RopeSpec s = extend_spec(preset("llama-2-7b"), with("yarn", 65536, 16.0), nullptr);
  EXPECT_EQ(s.factor, 16.0);
  EXPECT_EQ(s.max_position_embeddings, 65536);
  EXPECT_THAT(error_of(preset("llama-2-7b"), with("yarn", 65536, 8.0)),
              AllOf(HasSubstr("--factor (8)"), HasSubstr("--target-context (65536)"),
                    HasSubstr("65536 / 4096 = 16")));
}

// Llama 3.1 already scales (llama3, factor 8 over 8192). --scaling yarn replaces it, says so,
// and keeps the context the model reaches (131072): s = 131072 / 8192 = 16.
TEST(Extend, ReplacingAModelsScalingWarns) {
  std::vector<std::string> warnings;
  const RopeSpec s = extend_spec(preset("llama-3.1-8b"), with("yarn"), &warnings);
  EXPECT_EQ(s.method, Method::kYarn);
  EXPECT_EQ(s.factor, 16.0);
  EXPECT_EQ(s.original_max_position_embeddings, 8192);
  EXPECT_EQ(s.max_position_embeddings, 131072);
  ASSERT_THAT(warnings, SizeIs(2));
  EXPECT_THAT(warnings[0], AllOf(HasSubstr("--scaling yarn replaces the model's own llama3"),
                                 HasSubstr("factor 8"), HasSubstr("original context 8192")));
  EXPECT_THAT(warnings[1], HasSubstr("keeps the context the model reaches (131072)"));

  // With a target: s = 262144 / 8192 = 32.
  warnings.clear();
  const RopeSpec t = extend_spec(preset("llama-3.1-8b"), with("yarn", 262144), &warnings);
  EXPECT_EQ(t.factor, 32.0);
  EXPECT_EQ(t.max_position_embeddings, 262144);
  EXPECT_THAT(warnings, ElementsAre(HasSubstr("replaces the model's own llama3")));
}

// The YaRN variants share their parameters: DeepSeek's mscale survives a switch to the paper's
// ramp, and the warning says so.
TEST(Extend, YarnVariantsKeepTheModelsYarnParameters) {
  std::vector<std::string> warnings;
  const RopeSpec s = extend_spec(preset("deepseek-v2-lite"), with("yarn-paper"), &warnings);
  EXPECT_EQ(method_name(s), "yarn-paper");
  EXPECT_EQ(s.yarn.mscale, 0.707);
  EXPECT_EQ(s.yarn.mscale_all_dim, 0.707);
  EXPECT_EQ(s.factor, 40.0);  // the context it reaches: 163840 / 4096
  ASSERT_THAT(warnings, SizeIs(2));
  EXPECT_THAT(warnings[0], HasSubstr("its YaRN parameters are kept"));
}

// Every parameter flag lands in the spec.
TEST(Extend, EveryYarnFlagLandsInTheSpec) {
  ExtendOptions o = with("yarn", 65536);
  o.rope_theta = 20000.0;
  o.beta_fast = 16.0;
  o.beta_slow = 2.0;
  o.attention_factor = 1.5;
  o.mscale = 0.8;
  o.mscale_all_dim = 0.9;
  o.truncate = false;
  o.extrapolation_factor = 0.5;
  const RopeSpec s = extend_spec(preset("llama-2-7b"), o, nullptr);
  EXPECT_EQ(s.rope_theta, 20000.0);
  EXPECT_EQ(s.yarn.beta_fast, 16.0);
  EXPECT_EQ(s.yarn.beta_slow, 2.0);
  EXPECT_EQ(s.yarn.attention_factor, 1.5);
  EXPECT_EQ(s.yarn.mscale, 0.8);
  EXPECT_EQ(s.yarn.mscale_all_dim, 0.9);
  EXPECT_FALSE(s.yarn.truncate);
  EXPECT_EQ(s.yarn.extrapolation_factor, 0.5);
  EXPECT_EQ(compute_frequencies(s).attention_factor, 1.5);
  EXPECT_EQ(o.flags(),
            "--scaling yarn --target-context 65536 --rope-theta 20000 --beta-fast 16 --beta-slow 2 "
            "--attention-factor 1.5 --mscale 0.8 --mscale-all-dim 0.9 --extrapolation-factor 0.5 "
            "--truncate false");
}

TEST(Extend, Llama3AndLongropeFlagsLandInTheSpec) {
  ExtendOptions o;
  o.low_freq_factor = 2.0;
  o.high_freq_factor = 8.0;
  const RopeSpec s = extend_spec(preset("llama-3.1-8b"), o, nullptr);
  EXPECT_EQ(s.llama3.low_freq_factor, 2.0);
  EXPECT_EQ(s.llama3.high_freq_factor, 8.0);
  EXPECT_EQ(s.factor, 8.0);  // untouched without --factor or --target-context

  ExtendOptions a;
  a.attention_factor = 1.25;
  const RopeSpec l = extend_spec(preset("phi-3-mini-128k"), a, nullptr);
  EXPECT_EQ(l.longrope.attention_factor, 1.25);
  EXPECT_EQ(compute_frequencies(l).attention_factor, 1.25);
}

TEST(Extend, AFlagTheMethodDoesNotReadIsAnError) {
  ExtendOptions o = with("yarn", 65536);
  o.low_freq_factor = 2.0;
  EXPECT_EQ(error_of(preset("llama-2-7b"), o),
            "--low-freq-factor (2) applies to llama3, not to rope_type \"yarn\"");
  ExtendOptions b;
  b.beta_fast = 16.0;
  EXPECT_THAT(error_of(preset("llama-2-7b"), b),
              HasSubstr("--beta-fast (16) applies to yarn, yarn-paper and dynamic-yarn, not to "
                        "rope_type \"default\""));
  ExtendOptions t = with("linear", 8192);
  t.truncate = true;
  EXPECT_THAT(error_of(preset("llama-2-7b"), t), HasSubstr("--truncate (true) applies to yarn"));
}

// A target at or below the original context is legal (a user may want to see it), with a warning.
TEST(Extend, TargetBelowTheOriginalContextWarns) {
  std::vector<std::string> warnings;
  const RopeSpec s = extend_spec(preset("llama-2-7b"), with("yarn", 1000), &warnings);
  EXPECT_EQ(s.factor, 1000.0 / 4096.0);
  EXPECT_EQ(s.max_position_embeddings, 1000);
  ASSERT_FALSE(warnings.empty());
  EXPECT_THAT(warnings[0], HasSubstr("--target-context (1000) is not larger than the original "
                                     "context (4096)"));
}

TEST(Extend, LongropeNeedsTheModelsFactorLists) {
  EXPECT_THAT(error_of(preset("llama-2-7b"), with("longrope", 65536)),
              AllOf(HasSubstr("--scaling (\"longrope\")"), HasSubstr("short_factor"),
                    HasSubstr("long_factor")));
  // A LongRoPE model can be stretched further with its own lists: s = 262144 / 4096 = 64.
  const RopeSpec s = extend_spec(preset("phi-3-mini-128k"), with("longrope", 262144), nullptr);
  EXPECT_EQ(s.factor, 64.0);
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_EQ(s.max_position_embeddings, 262144);
}

TEST(Extend, NoneRemovesTheScaling) {
  std::vector<std::string> warnings;
  const RopeSpec s = extend_spec(preset("llama-3.1-8b"), with("none"), &warnings);
  EXPECT_EQ(s.method, Method::kNone);
  EXPECT_EQ(s.factor, 1.0);
  EXPECT_EQ(s.max_position_embeddings, 8192);
  EXPECT_THAT(warnings, ElementsAre(HasSubstr("replaces the model's own llama3"),
                                    HasSubstr("default RoPE over its original context (8192)")));
  EXPECT_THAT(error_of(preset("llama-3.1-8b"), with("none", 65536)),
              HasSubstr("--target-context (65536) needs a scaling method"));
}

TEST(Extend, AFactorNeedsAMethod) {
  EXPECT_EQ(error_of(preset("llama-2-7b"), with("yarn")),
            "--scaling yarn needs --factor or --target-context");
  ExtendOptions o;
  o.factor = 4.0;
  EXPECT_THAT(error_of(preset("llama-2-7b"), o),
              HasSubstr("--factor (4) needs a scaling method, and rope_type is \"default\""));
}

// Dynamic NTK reads L' as the trained length: it stays L0, and the factor is N / L0.
TEST(Extend, DynamicKeepsTheTrainedLength) {
  const RopeSpec s = extend_spec(preset("llama-2-7b"), with("dynamic", 16384), nullptr);
  EXPECT_EQ(s.method, Method::kDynamic);
  EXPECT_EQ(s.factor, 4.0);
  EXPECT_EQ(s.max_position_embeddings, 4096);
}

TEST(Extend, OtherMethods) {
  for (const char* m : {"linear", "ntk", "llama3", "yarn-paper"}) {
    const RopeSpec s = extend_spec(preset("mistral-7b-v0.1"), with(m, 131072), nullptr);
    EXPECT_EQ(method_name(s), m);
    EXPECT_EQ(s.factor, 4.0) << m;  // 131072 / 32768
    EXPECT_EQ(s.original_max_position_embeddings, 32768) << m;
  }
  const RopeSpec d = extend_spec(preset("llama-2-7b"), with("dynamic-yarn"), nullptr);
  EXPECT_EQ(d.method, Method::kDynamicYarn);
  EXPECT_EQ(d.original_max_position_embeddings, 4096);
}

// Qwen3's card block leaves L' at 40960; a target sets it, and the spec's own warning about
// factor vs L' / L is gone rather than repeated.
TEST(Extend, TargetOnAnExtendedModelUsesItsOriginalContext) {
  std::vector<std::string> warnings;
  ExtendOptions o;
  o.target_context = 131072;
  const RopeSpec s = extend_spec(preset("qwen3-8b-yarn4"), o, &warnings);
  EXPECT_EQ(s.factor, 4.0);
  EXPECT_EQ(s.original_max_position_embeddings, 32768);
  EXPECT_EQ(s.max_position_embeddings, 131072);
  EXPECT_THAT(warnings, IsEmpty());
  EXPECT_THAT(validate(s), IsEmpty());
}

TEST(Extend, ErrorsNameTheFlagAndTheValue) {
  EXPECT_EQ(error_of(preset("llama-2-7b"), with("yarn", std::nullopt, 0.0)),
            "--factor (0) must be a finite number greater than 0");
  EXPECT_EQ(error_of(preset("llama-2-7b"), with("yarn", -5)),
            "--target-context (-5) must be a positive integer");
  EXPECT_THAT(error_of(preset("llama-2-7b"), with("bogus", 65536)),
              HasSubstr("--scaling (\"bogus\") must be one of"));
  EXPECT_THAT(error_of(preset("llama-2-7b"), with("proportional", 65536)),
              HasSubstr("--scaling (\"proportional\")"));
  ExtendOptions theta;
  theta.rope_theta = 0.5;
  EXPECT_EQ(error_of(preset("llama-2-7b"), theta),
            "--rope-theta (0.5) must be a finite number greater than 1");
  // Rules between fields come from the spec's validation, with the flags that led there.
  ExtendOptions beta = with("yarn", 65536);
  beta.beta_fast = 0.5;
  EXPECT_EQ(error_of(preset("llama-2-7b"), beta),
            "yarn: beta_fast (0.5) must be greater than beta_slow (1) (with --scaling yarn "
            "--target-context 65536 --beta-fast 0.5)");
  // A factor whose context overflows: refused before it is rounded (it was undefined behaviour
  // and printed max_position_embeddings (-9223372036854775808)).
  EXPECT_EQ(error_of(preset("llama-2-7b"), with("linear", std::nullopt, 1e300)),
            "--factor (1e+300) times the original context (4096) exceeds 2^53 positions");
}

// Llama 3.2 1B: llama3 factor 32 over 8192, but 131072 in all: the llama3 factor is not the
// extension ratio, so the context it reaches is max_position_embeddings, and replacing the
// method aims at 131072 (factor 16), not 32 * 8192.
TEST(Extend, IntendedContext) {
  EXPECT_EQ(reachable_context(preset("llama-3.2-1b")), 131072);
  EXPECT_EQ(reachable_context(preset("llama-3.1-8b")), 131072);
  EXPECT_EQ(reachable_context(preset("qwen3-8b-yarn4")), 131072);  // 4 * 32768 > L' 40960
  EXPECT_EQ(reachable_context(preset("qwen2.5-7b-instruct-yarn4")), 131072);
  EXPECT_EQ(reachable_context(preset("deepseek-v3")), 163840);
  EXPECT_EQ(reachable_context(preset("phi-3.5-mini")), 131072);
  EXPECT_EQ(reachable_context(preset("llama-2-7b")), 4096);
  const RopeSpec s = extend_spec(preset("llama-3.2-1b"), with("yarn"), nullptr);
  EXPECT_EQ(s.factor, 16.0);
  EXPECT_EQ(s.max_position_embeddings, 131072);
}

TEST(Extend, TargetNeedsAContext) {
  RopeSpec bare;
  bare.head_dim = 64;
  bare.rotary_dim = 64;
  EXPECT_THAT(error_of(bare, with("yarn", 8192)),
              HasSubstr("--target-context (8192) needs the model's original context"));
}

}  // namespace
}  // namespace posenc
