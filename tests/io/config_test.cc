// posenc/io/config.h: RopeSpec from Hugging Face config.json.
//
// Golden values come from the published configs in ../shared/testdata/hf-configs (copied from
// each model's config.json) and from transformers' rules in modeling_rope_utils.py; the
// derivation of each number is written beside it. Errors for invalid values that are not type
// errors are in spec_validation_test.cc.
#include "posenc/io/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/error.h"
#include "support/config_test_support.h"

namespace posenc {
namespace {

using ::testing::AllOf;
using testing::config_path;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::HasWarning;
using ::testing::Not;
using ::testing::StartsWith;

std::string error_of(std::string_view json) { return testing::config_error_of(json); }

// ---------------------------------------------------------------------------------------------
// Published configs

TEST(ConfigReal, Llama2DefaultRope) {
  const ModelConfig c = load_hf_config(config_path("llama-2-7b.json"));
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.spec.method, Method::kNone);  // "rope_scaling": null
  EXPECT_EQ(c.spec.head_dim, 128);          // 4096 / 32
  EXPECT_EQ(c.spec.rotary_dim, 128);
  EXPECT_EQ(c.spec.rotary_offset, 0);
  EXPECT_EQ(c.spec.layout, Layout::kHalfSplit);
  EXPECT_EQ(c.spec.rope_theta, 10000.0);  // no rope_theta: transformers' default_theta
  EXPECT_EQ(c.spec.max_position_embeddings, 4096);
  EXPECT_THAT(c.warnings, ElementsAre());
  EXPECT_THAT(c.ignored_keys, ElementsAre());
  EXPECT_THAT(c.source, HasSubstr("llama-2-7b.json"));
}

TEST(ConfigReal, Llama31Llama3Scaling) {
  const ModelConfig c = load_hf_config(config_path("llama-3.1-8b.json"));
  EXPECT_EQ(c.spec.method, Method::kLlama3);
  EXPECT_EQ(c.spec.factor, 8.0);
  EXPECT_EQ(c.spec.llama3.low_freq_factor, 1.0);
  EXPECT_EQ(c.spec.llama3.high_freq_factor, 4.0);
  EXPECT_EQ(c.spec.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.spec.max_position_embeddings, 131072);
  EXPECT_EQ(c.spec.rope_theta, 500000.0);
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.rotary_dim, 128);
  EXPECT_THAT(c.warnings, ElementsAre());
}

TEST(ConfigReal, Qwen25Yarn) {
  const ModelConfig c = load_hf_config(config_path("qwen2.5-7b-instruct-yarn.json"));
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.spec.method, Method::kYarn);  // legacy "type": "yarn"
  EXPECT_EQ(c.spec.factor, 4.0);
  EXPECT_EQ(c.spec.original_max_position_embeddings, 32768);
  EXPECT_EQ(c.spec.rope_theta, 1e6);
  EXPECT_EQ(c.spec.head_dim, 128);  // 3584 / 28
  EXPECT_EQ(c.spec.rotary_dim, 128);
  EXPECT_EQ(c.spec.layout, Layout::kHalfSplit);
  EXPECT_EQ(c.spec.yarn.beta_fast, 32.0);  // `or 32`
  EXPECT_EQ(c.spec.yarn.beta_slow, 1.0);   // `or 1`
  EXPECT_TRUE(c.spec.yarn.truncate);
  EXPECT_FALSE(c.spec.yarn.attention_factor.has_value());
  EXPECT_FALSE(c.spec.yarn.mscale.has_value());
  EXPECT_FALSE(c.spec.yarn.mscale_all_dim.has_value());
  // max_position_embeddings == original: implicit factor 1, which transformers does not flag.
  EXPECT_THAT(c.warnings, ElementsAre());
}

TEST(ConfigReal, DeepseekV3YarnWithMscale) {
  const ModelConfig c = load_hf_config(config_path("deepseek-v3.json"));
  EXPECT_EQ(c.spec.method, Method::kYarn);
  EXPECT_EQ(c.spec.head_dim, 64);  // qk_rope_head_dim
  EXPECT_EQ(c.spec.rotary_dim, 64);
  EXPECT_EQ(c.spec.layout, Layout::kInterleaved);  // rope_interleave defaults to true
  EXPECT_EQ(c.spec.factor, 40.0);
  EXPECT_EQ(c.spec.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.spec.max_position_embeddings, 163840);  // 40 * 4096
  EXPECT_EQ(c.spec.rope_theta, 10000.0);
  ASSERT_TRUE(c.spec.yarn.mscale.has_value());
  ASSERT_TRUE(c.spec.yarn.mscale_all_dim.has_value());
  EXPECT_EQ(*c.spec.yarn.mscale, 1.0);
  EXPECT_EQ(*c.spec.yarn.mscale_all_dim, 1.0);
  EXPECT_EQ(c.spec.yarn.beta_fast, 32.0);
  EXPECT_EQ(c.spec.yarn.beta_slow, 1.0);
  // "factor": 40 is a JSON integer: transformers 4.x's _validate_yarn_parameters warns.
  EXPECT_THAT(c.warnings, HasWarning("rope_scaling.factor", "got 40"));
  EXPECT_THAT(c.warnings, HasWarning("rope_scaling.beta_fast", "got 32"));
  EXPECT_THAT(c.warnings, HasWarning("rope_scaling.beta_slow", "got 1"));
  // DeepSeek's RoPE dims come from qk_rope_head_dim, so these do not affect it.
  EXPECT_THAT(c.ignored_keys,
              ElementsAre("hidden_size", "num_attention_heads", "qk_nope_head_dim"));
}

TEST(ConfigReal, GptOssYarnWithoutTruncation) {
  const ModelConfig c = load_hf_config(config_path("gpt-oss-20b.json"));
  EXPECT_EQ(c.spec.method, Method::kYarn);
  EXPECT_FALSE(c.spec.yarn.truncate);
  EXPECT_EQ(c.spec.head_dim, 64);  // explicit head_dim, not 2880 / 64 = 45
  EXPECT_EQ(c.spec.rotary_dim, 64);
  EXPECT_EQ(c.spec.rope_theta, 150000.0);
  EXPECT_EQ(c.spec.factor, 32.0);
  EXPECT_EQ(c.spec.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.spec.max_position_embeddings, 131072);  // 32 * 4096
  EXPECT_THAT(c.warnings, ElementsAre());
  EXPECT_THAT(c.ignored_keys, ElementsAre("hidden_size", "num_attention_heads"));
}

TEST(ConfigReal, Phi3LongRope) {
  const ModelConfig c = load_hf_config(config_path("phi-3-mini-128k-instruct.json"));
  EXPECT_EQ(c.spec.method, Method::kLongrope);
  EXPECT_EQ(c.spec.original_max_position_embeddings, 4096);  // top level, as Phi-3 keeps it
  EXPECT_EQ(c.spec.factor, 32.0);                            // 131072 / 4096
  EXPECT_EQ(c.spec.max_position_embeddings, 131072);
  EXPECT_EQ(c.spec.head_dim, 96);  // 3072 / 32
  EXPECT_EQ(c.spec.rotary_dim, 96);
  ASSERT_EQ(c.spec.longrope.short_factor.size(), 48u);  // rotary_dim / 2
  ASSERT_EQ(c.spec.longrope.long_factor.size(), 48u);
  EXPECT_EQ(c.spec.longrope.short_factor.front(), 1.1);
  EXPECT_EQ(c.spec.longrope.short_factor.back(), 3.049999999999997);
  EXPECT_EQ(c.spec.longrope.long_factor.front(), 1.0700000524520874);
  EXPECT_EQ(c.spec.longrope.long_factor.back(), 64.76000213623047);
  EXPECT_FALSE(c.spec.longrope.attention_factor.has_value());
  EXPECT_EQ(c.spec.rope_theta, 10000.0);
}

TEST(ConfigReal, PythiaGptNeoxPartialRotary) {
  const ModelConfig c = load_hf_config(config_path("pythia-410m.json"));
  EXPECT_EQ(c.spec.method, Method::kNone);
  EXPECT_EQ(c.spec.head_dim, 64);         // 1024 / 16
  EXPECT_EQ(c.spec.rotary_dim, 16);       // int(64 * rotary_pct 0.25)
  EXPECT_EQ(c.spec.rope_theta, 10000.0);  // rotary_emb_base
  EXPECT_EQ(c.spec.layout, Layout::kHalfSplit);
  EXPECT_EQ(c.spec.max_position_embeddings, 2048);
  EXPECT_THAT(c.warnings, ElementsAre());
}

// ---------------------------------------------------------------------------------------------
// v5 rope_parameters

TEST(ConfigRopeParameters, SingleDict) {
  const ModelConfig c = parse_hf_config(R"({
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192}})");
  EXPECT_EQ(c.spec.method, Method::kLlama3);
  EXPECT_EQ(c.spec.rope_theta, 500000.0);
  EXPECT_EQ(c.spec.factor, 8.0);
  EXPECT_EQ(c.spec.original_max_position_embeddings, 8192);
  EXPECT_TRUE(c.layer_specs.empty());
  EXPECT_THAT(c.warnings, ElementsAre());
}

TEST(ConfigRopeParameters, TopLevelThetaIsTheDefault) {
  // convert_rope_params_to_dict: rope_parameters.setdefault("rope_theta", rope_theta).
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "rope_theta": 250000.0,
      "rope_parameters": {"rope_type": "linear", "factor": 2.0}})");
  EXPECT_EQ(c.spec.method, Method::kLinear);
  EXPECT_EQ(c.spec.rope_theta, 250000.0);
  EXPECT_EQ(c.spec.factor, 2.0);
}

TEST(ConfigRopeParameters, PartialRotaryFactorIsHonouredEvenForLlama) {
  // v5 moved partial_rotary_factor into rope_parameters, where every rope init function reads
  // it: int(128 * 0.5) = 64.
  const ModelConfig c = parse_hf_config(R"({"model_type": "llama", "head_dim": 128,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                          "partial_rotary_factor": 0.5}})");
  EXPECT_EQ(c.spec.method, Method::kNone);
  EXPECT_EQ(c.spec.rotary_dim, 64);
}

TEST(ConfigRopeParameters, PerLayerType) {
  // Gemma 3 in transformers v5: linear x8 with base 1e6 on full attention, plain RoPE with
  // base 10000 on sliding-window layers.
  const ModelConfig c = parse_hf_config(R"({
    "model_type": "gemma3_text", "head_dim": 256, "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
    "rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": 8.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  ASSERT_EQ(c.layer_specs.size(), 2u);
  const RopeSpec& full = c.layer_specs.at("full_attention");
  const RopeSpec& sliding = c.layer_specs.at("sliding_attention");
  EXPECT_EQ(full.method, Method::kLinear);
  EXPECT_EQ(full.factor, 8.0);
  EXPECT_EQ(full.rope_theta, 1e6);  // the top-level rope_theta as its default
  EXPECT_EQ(sliding.method, Method::kNone);
  EXPECT_EQ(sliding.rope_theta, 10000.0);
  EXPECT_EQ(sliding.head_dim, 256);
  // spec is full attention's.
  EXPECT_EQ(c.spec.method, Method::kLinear);
  EXPECT_EQ(c.spec.factor, 8.0);
  EXPECT_THAT(c.warnings, ElementsAre());
  EXPECT_THAT(c.ignored_keys, ElementsAre());  // layer_types was read
}

TEST(ConfigRopeParameters, PerLayerWithoutFullAttentionTakesTheFirst) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "rope_parameters": {
      "local": {"rope_type": "default", "rope_theta": 10000.0},
      "global": {"rope_type": "linear", "factor": 4.0}}})");
  ASSERT_EQ(c.layer_specs.size(), 2u);
  EXPECT_EQ(c.spec.method, Method::kLinear);  // "global" < "local"
}

TEST(ConfigRopeParameters, NullLayerTypeHasNoRope) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "rope_parameters": {
      "full_attention": null, "sliding_attention": {"rope_type": "default"}}})");
  ASSERT_EQ(c.layer_specs.size(), 1u);
  EXPECT_EQ(c.layer_specs.count("sliding_attention"), 1u);
  EXPECT_THAT(c.warnings, HasWarning("rope_parameters.full_attention", "null"));
}

TEST(ConfigRopeParameters, LayerTypesMismatchWarns) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64,
      "layer_types": ["full_attention", "chunked_attention"],
      "rope_parameters": {"full_attention": {"rope_type": "default"},
                          "sliding_attention": {"rope_type": "default"}}})");
  EXPECT_THAT(c.warnings, HasWarning("rope_parameters.sliding_attention", "layer_types"));
  EXPECT_THAT(c.warnings, HasWarning("chunked_attention", "layer_types"));
}

TEST(ConfigRopeParameters, RopeScalingWinsAsInTransformersV5) {
  // transformers v5 convert_rope_params_to_dict: `rope_parameters = rope_scaling or
  // rope_parameters`.
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64,
      "rope_scaling": {"rope_type": "linear", "factor": 2.0},
      "rope_parameters": {"rope_type": "linear", "factor": 4.0}})");
  EXPECT_EQ(c.spec.factor, 2.0);
  EXPECT_THAT(c.warnings, HasWarning("rope_parameters", "disagree"));
  EXPECT_THAT(c.warnings, HasWarning("factor 4.0", "2.0"));
}

TEST(ConfigRopeParameters, AgreeingRopeScalingIsSilent) {
  // 8 and 8.0 are the same value; "type" stands for "rope_type".
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64,
      "rope_scaling": {"type": "linear", "factor": 8},
      "rope_parameters": {"rope_type": "linear", "factor": 8.0, "rope_theta": 10000.0}})");
  EXPECT_EQ(c.spec.factor, 8.0);
  EXPECT_THAT(c.warnings, Not(Contains(HasSubstr("disagree"))));
}

// ---------------------------------------------------------------------------------------------
// v4 rope_scaling details

TEST(ConfigRopeScaling, LegacyTypeKey) {
  const ModelConfig c =
      parse_hf_config(R"({"head_dim": 64, "rope_scaling": {"type": "linear", "factor": 2.0}})");
  EXPECT_EQ(c.spec.method, Method::kLinear);
  EXPECT_EQ(c.spec.factor, 2.0);
  EXPECT_THAT(c.warnings, ElementsAre());
}

TEST(ConfigRopeScaling, SuIsLongrope) {
  // Phi-3's first configs said "su"; head_dim 8 gives 4 factors per list.
  const ModelConfig c = parse_hf_config(R"({"model_type": "phi3", "head_dim": 8,
      "max_position_embeddings": 8192, "original_max_position_embeddings": 2048,
      "rope_scaling": {"type": "su", "short_factor": [1, 1, 1, 1],
                       "long_factor": [1.0, 2.0, 3.0, 4.0]}})");
  EXPECT_EQ(c.spec.method, Method::kLongrope);
  EXPECT_EQ(c.spec.factor, 4.0);  // 8192 / 2048
  EXPECT_THAT(c.spec.longrope.long_factor, ElementsAre(1.0, 2.0, 3.0, 4.0));
}

TEST(ConfigRopeScaling, NtkIsNotATransformersType) {
  // transformers has no "ntk" (ROPE_INIT_FUNCTIONS raises); vLLM's "ntk" is another formula.
  const std::string e =
      error_of(R"({"head_dim": 64, "rope_scaling": {"type": "ntk", "factor": 2.0}})");
  EXPECT_THAT(e, AllOf(HasSubstr("rope_scaling.type (\"ntk\")"),
                       HasSubstr("default, linear, dynamic, yarn"), HasSubstr("--rope-type"),
                       HasSubstr("\"dynamic\"")));
}

TEST(ConfigRopeScaling, PosencOnlyNamesWarn) {
  for (const char* name : {"yarn-paper", "dynamic_yarn"}) {
    const ModelConfig c =
        parse_hf_config(std::string(R"({"head_dim": 64, "max_position_embeddings": 16384,
        "rope_scaling": {"rope_type": ")") +
                        name + R"(", "factor": 4.0, "original_max_position_embeddings": 4096}})");
    EXPECT_THAT(c.warnings,
                HasWarning(std::string("(\"") + name + "\")", "not a transformers rope_type"))
        << name;
  }
}

TEST(ConfigRopeScaling, LongropeOriginalContextAboveMaxWarns) {
  // Phi-3 style: transformers takes factor = 4096 / 8192 = 0.5 and says nothing.
  const ModelConfig c = parse_hf_config(R"({"model_type": "phi3", "head_dim": 8,
      "max_position_embeddings": 4096, "original_max_position_embeddings": 8192,
      "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1],
                       "long_factor": [1.0, 2.0, 3.0, 4.0]}})");
  EXPECT_EQ(c.spec.factor, 0.5);
  EXPECT_THAT(
      c.warnings,
      HasWarning("original_max_position_embeddings (8192) is above max_position_embeddings (4096)",
                 "factor (0.5)"));
}

TEST(ConfigRopeScaling, DefaultRopeType) {
  const ModelConfig c =
      parse_hf_config(R"({"head_dim": 64, "rope_scaling": {"rope_type": "default"}})");
  EXPECT_EQ(c.spec.method, Method::kNone);
  EXPECT_THAT(c.warnings, ElementsAre());
}

TEST(ConfigRopeScaling, UnknownKeyWarnsNamingKeyAndMethod) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 16384,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                       "original_max_position_embeddings": 4096, "foo": 1}})");
  EXPECT_EQ(c.spec.method, Method::kYarn);
  EXPECT_THAT(c.warnings, HasWarning("Unrecognized keys", "'foo'"));
  EXPECT_THAT(c.warnings, HasWarning("'foo'", "'rope_type'='yarn'"));
}

TEST(ConfigRopeScaling, KeyOfAnotherMethodWarns) {
  // low_freq_factor belongs to llama3; linear does not read it.
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64,
      "rope_scaling": {"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0}})");
  EXPECT_THAT(c.warnings, HasWarning("'low_freq_factor'", "'rope_type'='linear'"));
}

TEST(ConfigRopeScaling, IntegerFactorWarns) {
  const ModelConfig c =
      parse_hf_config(R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 4}})");
  EXPECT_EQ(c.spec.factor, 4.0);
  EXPECT_THAT(c.warnings, HasWarning("rope_scaling.factor field must be a float", "got 4"));
}

TEST(ConfigRopeScaling, YarnOriginalContextFromTopLevel) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 32768,
      "original_max_position_embeddings": 8192,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})");
  EXPECT_EQ(c.spec.original_max_position_embeddings, 8192);
  EXPECT_THAT(c.warnings, ElementsAre());
}

TEST(ConfigRopeScaling, YarnOriginalContextInferredFromMaxPositions) {
  // standardize_rope_params: setdefault("original_max_position_embeddings",
  // max_position_embeddings)
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 32768,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})");
  EXPECT_EQ(c.spec.original_max_position_embeddings, 32768);
  EXPECT_THAT(c.warnings, HasWarning("original_max_position_embeddings", "inferred"));
  EXPECT_THAT(c.warnings, HasWarning("original_max_position_embeddings", "32768"));
}

TEST(ConfigRopeScaling, YarnNullBetasTakeDefaultsAndZeroToo) {
  // `rope_scaling.get("beta_fast") or 32`: None and 0 are both falsy.
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 16384,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": null, "beta_slow": 0.0,
                       "original_max_position_embeddings": 4096}})");
  EXPECT_EQ(c.spec.yarn.beta_fast, 32.0);
  EXPECT_EQ(c.spec.yarn.beta_slow, 1.0);
  EXPECT_THAT(c.warnings, HasWarning("beta_slow (0)", "1 is used"));
}

TEST(ConfigRopeScaling, YarnNullFactorIsTheContextRatio) {
  // v5 _compute_yarn_parameters: `if factor is None: factor = max_pos / original_max_pos`.
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 16384,
      "rope_scaling": {"rope_type": "yarn", "factor": null,
                       "original_max_position_embeddings": 4096}})");
  EXPECT_EQ(c.spec.factor, 4.0);  // 16384 / 4096
  EXPECT_THAT(c.warnings, HasWarning("rope_scaling.factor", "null"));
}

TEST(ConfigRopeScaling, YarnAllKeys) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 16384,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5,
                       "beta_fast": 16.0, "beta_slow": 2.0, "mscale": 0.0,
                       "mscale_all_dim": 0.707, "truncate": true, "extrapolation_factor": 0.5,
                       "original_max_position_embeddings": 4096}})");
  EXPECT_EQ(*c.spec.yarn.attention_factor, 1.5);
  EXPECT_EQ(c.spec.yarn.beta_fast, 16.0);
  EXPECT_EQ(c.spec.yarn.beta_slow, 2.0);
  ASSERT_TRUE(c.spec.yarn.mscale.has_value());  // kept although 0
  EXPECT_EQ(*c.spec.yarn.mscale, 0.0);
  EXPECT_EQ(*c.spec.yarn.mscale_all_dim, 0.707);
  EXPECT_TRUE(c.spec.yarn.truncate);
  EXPECT_EQ(c.spec.yarn.extrapolation_factor, 0.5);
  EXPECT_THAT(c.warnings, ElementsAre());
}

TEST(ConfigRopeScaling, YarnPaperName) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 16384,
      "rope_scaling": {"rope_type": "yarn-paper", "factor": 4.0,
                       "original_max_position_embeddings": 4096}})");
  EXPECT_EQ(c.spec.method, Method::kYarn);
  EXPECT_EQ(c.spec.yarn.ramp, YarnRamp::kPaper);
}

TEST(ConfigRopeScaling, DynamicKeepsMaxPositions) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})");
  EXPECT_EQ(c.spec.method, Method::kDynamic);
  EXPECT_EQ(c.spec.max_position_embeddings, 4096);
}

TEST(ConfigRopeScaling, LongropeWithoutTopLevelContextUsesItsFactor) {
  // v4 _compute_longrope_parameters without config.original_max_position_embeddings:
  // L = max_position_embeddings and the dict's factor.
  const ModelConfig c = parse_hf_config(R"({"model_type": "phi3", "head_dim": 4,
      "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "longrope",
      "factor": 8.0, "short_factor": [1.0, 1.0], "long_factor": [2.0, 3.0]}})");
  EXPECT_EQ(c.spec.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.spec.factor, 8.0);
}

TEST(ConfigRopeScaling, LongropeTopLevelContextOverridesFactor) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "phi3", "head_dim": 4,
      "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "longrope", "factor": 16.0,
                       "short_factor": [1.0, 1.0], "long_factor": [2.0, 3.0]}})");
  EXPECT_EQ(c.spec.factor, 32.0);  // 131072 / 4096, as transformers computes it
  EXPECT_THAT(c.warnings, HasWarning("rope_scaling.factor (16)", "32"));
}

TEST(ConfigRopeScaling, Proportional) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 256, "rope_parameters": {
      "rope_type": "proportional", "factor": 8.0, "partial_rotary_factor": 0.25,
      "rope_theta": 1000000.0}})");
  EXPECT_EQ(c.spec.method, Method::kProportional);
  EXPECT_EQ(c.spec.rotary_dim, 256);  // a head_dim-wide table
  EXPECT_EQ(c.spec.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.spec.factor, 8.0);
}

// Hunyuan ships {"type": "dynamic", "alpha": A, "factor": 1.0}: NTK alpha, not dynamic NTK.
TEST(ConfigRopeScaling, HunyuanDynamicWithAlphaIsNtkAlpha) {
  const ModelConfig c = parse_hf_config(R"({"hidden_size": 4096, "num_attention_heads": 32,
      "max_position_embeddings": 262144, "rope_theta": 10000.0,
      "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}})");
  EXPECT_EQ(c.spec.method, Method::kNtkAlpha);
  EXPECT_EQ(c.spec.alpha, 1000.0);
  EXPECT_EQ(method_name(c.spec), "ntk-alpha");
}

TEST(ConfigRopeScaling, NtkAlphaRefusesAnAlphaThatIsNotAPositiveNumber) {
  for (const char* alpha : {"0", "-2.0", "\"big\"", "null"}) {
    const std::string cfg = std::string(R"({"hidden_size": 64, "num_attention_heads": 1,
        "rope_scaling": {"type": "dynamic", "alpha": )") +
                            alpha + "}}";
    try {
      parse_hf_config(cfg);
      ADD_FAILURE() << "accepted alpha " << alpha;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("alpha")) << alpha;
      EXPECT_THAT(e.what(), HasSubstr("greater than 0")) << alpha;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Families: head_dim, rotary_dim, layout

TEST(ConfigFamilies, GptjInline) {
  // GPT-J 6B: n_embd 4096, n_head 16, rotary_dim 64.
  const ModelConfig c = parse_hf_config(R"({"model_type": "gptj", "n_embd": 4096,
      "n_head": 16, "n_positions": 2048, "rotary_dim": 64})");
  EXPECT_EQ(c.spec.head_dim, 256);  // 4096 / 16
  EXPECT_EQ(c.spec.rotary_dim, 64);
  EXPECT_EQ(c.spec.layout, Layout::kInterleaved);
  EXPECT_EQ(c.spec.max_position_embeddings, 2048);
  EXPECT_EQ(c.spec.rope_theta, 10000.0);
  EXPECT_THAT(c.warnings, ElementsAre());
}

TEST(ConfigFamilies, GptjDefaultRotaryDim) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "gptj", "n_embd": 4096, "n_head": 16})");
  EXPECT_EQ(c.spec.rotary_dim, 64);  // GPTJConfig(rotary_dim=64)
  EXPECT_THAT(c.warnings, HasWarning("rotary_dim", "64"));
}

TEST(ConfigFamilies, DeepseekRopeInterleaveFalse) {
  const ModelConfig c = parse_hf_config(
      R"({"model_type": "deepseek_v3", "qk_rope_head_dim": 64, "rope_interleave": false})");
  EXPECT_EQ(c.spec.layout, Layout::kHalfSplit);
  EXPECT_EQ(c.spec.rotary_dim, 64);
}

TEST(ConfigFamilies, DeepseekV2Interleaved) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "deepseek_v2", "qk_rope_head_dim": 64})");
  EXPECT_EQ(c.spec.layout, Layout::kInterleaved);
}

TEST(ConfigFamilies, PhiHonoursPartialRotaryFactor) {
  // Phi-2: hidden_size 2560, 32 heads, partial_rotary_factor 0.4: int(80 * 0.4) = 32.
  const ModelConfig c = parse_hf_config(R"({"model_type": "phi", "hidden_size": 2560,
      "num_attention_heads": 32, "partial_rotary_factor": 0.4})");
  EXPECT_EQ(c.spec.head_dim, 80);
  EXPECT_EQ(c.spec.rotary_dim, 32);
  EXPECT_THAT(c.warnings, ElementsAre());
}

TEST(ConfigFamilies, PhiDefaultPartialRotaryFactor) {
  const ModelConfig c =
      parse_hf_config(R"({"model_type": "phi", "hidden_size": 2048, "num_attention_heads": 32})");
  EXPECT_EQ(c.spec.rotary_dim, 32);  // PhiConfig's default 0.5 of head_dim 64
  EXPECT_THAT(c.warnings, HasWarning("partial_rotary_factor", "0.5"));
}

TEST(ConfigFamilies, GptNeoxDefaultRotaryPct) {
  const ModelConfig c = parse_hf_config(
      R"({"model_type": "gpt_neox", "hidden_size": 1024, "num_attention_heads": 16})");
  EXPECT_EQ(c.spec.rotary_dim, 16);  // GPTNeoXConfig(rotary_pct=0.25) of 64
  EXPECT_THAT(c.warnings, HasWarning("rotary_pct", "0.25"));
}

TEST(ConfigFamilies, LlamaIgnoresPartialRotaryFactorForDefaultRope) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "llama", "hidden_size": 4096,
      "num_attention_heads": 32, "partial_rotary_factor": 0.5})");
  EXPECT_EQ(c.spec.rotary_dim, 128);
  EXPECT_THAT(c.warnings, HasWarning("partial_rotary_factor (0.5)", "ignored"));
}

TEST(ConfigFamilies, LlamaHonoursPartialRotaryFactorForScaledRope) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "llama", "hidden_size": 4096,
      "num_attention_heads": 32, "partial_rotary_factor": 0.5,
      "max_position_embeddings": 16384, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 4096}})");
  EXPECT_EQ(c.spec.rotary_dim, 64);  // int(128 * 0.5)
  EXPECT_THAT(c.warnings, HasWarning("partial_rotary_factor (0.5)", "honoured"));
}

TEST(ConfigFamilies, HeadDimAsIntegralFloatWarns) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 128.0})");
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_THAT(c.warnings, HasWarning("head_dim", "128.0"));
}

TEST(ConfigFamilies, NullHeadDimFallsBackToHiddenSize) {
  const ModelConfig c =
      parse_hf_config(R"({"head_dim": null, "hidden_size": 4096, "num_attention_heads": 32})");
  EXPECT_EQ(c.spec.head_dim, 128);
}

// ---------------------------------------------------------------------------------------------
// Keys that are not applied

TEST(ConfigKeys, IgnoredKeysAreSortedAndExcludeReadOnes) {
  const ModelConfig c = parse_hf_config(R"({"vocab_size": 32000, "model_type": "llama",
      "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
      "torch_dtype": "bfloat16", "architectures": ["LlamaForCausalLM"]})");
  EXPECT_THAT(c.ignored_keys,
              ElementsAre("architectures", "num_hidden_layers", "torch_dtype", "vocab_size"));
}

TEST(ConfigKeys, UnknownRopeKeyAtTopLevelWarns) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64, "rope_foo": 3, "use_rotary": true})");
  EXPECT_THAT(c.warnings, HasWarning("rope_foo", "(3)"));
  EXPECT_THAT(c.warnings, HasWarning("use_rotary", "not applied"));
  EXPECT_THAT(c.ignored_keys, ElementsAre());
}

}  // namespace
}  // namespace posenc
