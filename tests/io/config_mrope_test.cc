// config.json of vision-language models: mrope_section (rope_scaling or rope_parameters, the
// legacy "type": "mrope"), mrope_interleaved, xdrope_section, and the nested text_config that
// holds the text model's RoPE. The JSON below carries the published configs' RoPE values (the
// other keys trimmed); the source of each is named at its test.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/spec.h"
#include "posenc/io/config.h"
#include "support/config_test_support.h"

namespace {

using posenc::AxisRule;
using posenc::Layout;
using posenc::Method;
using posenc::ModelConfig;
using posenc::parse_hf_config;
using posenc::testing::config_error_of;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Sections = std::vector<std::int64_t>;

// Qwen/Qwen2-VL-7B-Instruct config.json (Qwen2.5-VL-7B-Instruct ships the same rope_scaling):
// the legacy type "mrope", which Qwen2VLConfig maps to "default".
TEST(ConfigMrope, Qwen2VlLegacyMropeType) {
  const ModelConfig c = parse_hf_config(R"({
    "model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
    "max_position_embeddings": 32768, "rope_theta": 1000000.0,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32, "embed_dim": 1280, "spatial_merge_size": 2}})");
  EXPECT_EQ(c.spec.method, Method::kNone);
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.axis_map, posenc::mrope_sections(Sections{16, 24, 24}));
  EXPECT_EQ(c.spec.layout, Layout::kHalfSplit);
  EXPECT_THAT(c.warnings, ElementsAre());
  EXPECT_THAT(c.ignored_keys, Contains("vision_config"));
}

// Qwen/Qwen3-VL-8B-Instruct config.json: text_config.rope_scaling with mrope_interleaved.
TEST(ConfigMrope, Qwen3VlNestedTextConfigInterleaved) {
  const ModelConfig c = parse_hf_config(R"({
    "model_type": "qwen3_vl", "image_token_id": 151655,
    "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096,
      "num_attention_heads": 32, "max_position_embeddings": 262144, "rope_theta": 5000000,
      "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20],
                       "rope_type": "default"},
      "vocab_size": 151936},
    "vision_config": {"depth": 27, "hidden_size": 1152}})");
  EXPECT_EQ(c.model_type, "qwen3_vl");
  EXPECT_EQ(c.spec.rope_theta, 5000000);
  EXPECT_EQ(c.spec.max_position_embeddings, 262144);
  EXPECT_EQ(c.spec.axis_map, posenc::mrope_interleaved(Sections{24, 20, 20}));
  EXPECT_THAT(c.warnings, ElementsAre());
  EXPECT_THAT(c.ignored_keys, Contains("vision_config"));
  EXPECT_THAT(c.ignored_keys, Contains("image_token_id"));
  EXPECT_THAT(c.ignored_keys, Contains("text_config.vocab_size"));
}

// Qwen3-VL's YaRN (vLLM PR #25384: factor 3.0 over 256k) composes with the axis map, here in
// v5's rope_parameters.
TEST(ConfigMrope, YarnWithMropeInRopeParameters) {
  const ModelConfig c = parse_hf_config(R"({
    "model_type": "qwen3_vl",
    "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096,
      "num_attention_heads": 32, "max_position_embeddings": 1000000,
      "rope_parameters": {"rope_type": "yarn", "rope_theta": 5000000, "factor": 3.0,
        "original_max_position_embeddings": 262144, "mrope_interleaved": true,
        "mrope_section": [24, 20, 20]}}})");
  EXPECT_EQ(c.spec.method, Method::kYarn);
  EXPECT_EQ(c.spec.factor, 3.0);
  EXPECT_EQ(c.spec.axis_map.rule, AxisRule::kInterleaved);
}

// zai-org/GLM-4.1V-9B-Thinking config.json: half the head, adjacent pairs.
TEST(ConfigMrope, Glm41vHalfHeadAdjacentPairs) {
  const ModelConfig c = parse_hf_config(R"({
    "model_type": "glm4v",
    "text_config": {"model_type": "glm4v_text", "hidden_size": 4096, "num_attention_heads": 32,
      "partial_rotary_factor": 0.5, "rope_theta": 10000, "max_position_embeddings": 65536,
      "rope_scaling": {"type": "default", "mrope_section": [8, 12, 12]}},
    "vision_config": {"depth": 24}})");
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.rotary_dim, 64);
  EXPECT_EQ(c.spec.layout, Layout::kInterleaved);
  EXPECT_EQ(c.spec.axis_map, posenc::mrope_sections(Sections{8, 12, 12}));
  EXPECT_THAT(c.warnings, ElementsAre());
}

// ERNIE-4.5-VL (../shared/docs/rope-in-engines.md 1.1: mrope_section [22, 22, 20] ordered h, w,
// t; GPT-J pairs).
TEST(ConfigMrope, Ernie45VlHwtSections) {
  const ModelConfig c = parse_hf_config(R"({
    "model_type": "ernie4_5_vl_moe",
    "text_config": {"model_type": "ernie4_5_vl_moe_text", "head_dim": 128, "hidden_size": 2560,
      "num_attention_heads": 20, "rope_theta": 500000,
      "rope_parameters": {"rope_type": "default", "mrope_section": [22, 22, 20]}}})");
  EXPECT_EQ(c.spec.axis_map, posenc::ernie_mrope(Sections{22, 22, 20}));
  EXPECT_EQ(c.spec.layout, Layout::kInterleaved);
}

// HunYuan-VL (vLLM xdrope.py; rope-in-engines.md 2): {type: "xdrope", alpha: 1000,
// xdrope_section: [16, 16, 16, 16]}: the NTK-alpha base with four axes.
TEST(ConfigMrope, HunyuanXdrope) {
  const ModelConfig c = parse_hf_config(R"({
    "model_type": "hunyuan_vl", "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "xdrope", "alpha": 1000.0, "xdrope_section": [16, 16, 16, 16]}})");
  EXPECT_EQ(c.spec.method, Method::kNtkAlpha);
  EXPECT_EQ(c.spec.alpha, 1000.0);
  EXPECT_EQ(c.spec.axis_map, posenc::xdrope_sections(Sections{16, 16, 16, 16}));
  EXPECT_EQ(c.spec.axis_map.axes, 4);
}

TEST(ConfigMrope, BadAxisKeysAreErrorsNamingTheField) {
  // Sections that do not cover the 64 slots of a 128-dim head.
  EXPECT_THAT(config_error_of(R"({"head_dim": 128,
      "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 20]}})"),
              HasSubstr("mrope_section ([16, 24, 20]) sums to 60, but rotary_dim / 2 is 64"));
  EXPECT_THAT(config_error_of(R"({"head_dim": 128, "rope_scaling": {"type": "mrope"}})"),
              HasSubstr("rope_scaling.type (\"mrope\") needs rope_scaling.mrope_section"));
  EXPECT_THAT(config_error_of(R"({"head_dim": 128,
      "rope_scaling": {"rope_type": "default", "mrope_section": [16, 24.5, 24]}})"),
              HasSubstr("rope_scaling.mrope_section"));
  EXPECT_THAT(
      config_error_of(R"({"head_dim": 128,
      "rope_scaling": {"rope_type": "default", "mrope_section": [16, 48]}})"),
      HasSubstr("rope_scaling.mrope_section: mrope_section ([16, 48]) must have 3 entries"));
  EXPECT_THAT(config_error_of(R"({"head_dim": 128,
      "rope_scaling": {"rope_type": "default", "mrope_interleaved": true}})"),
              HasSubstr("rope_scaling.mrope_interleaved (true) needs rope_scaling.mrope_section"));
  EXPECT_THAT(config_error_of(R"({"head_dim": 128,
      "rope_scaling": {"type": "xdrope", "alpha": 1000.0}})"),
              HasSubstr("needs rope_scaling.xdrope_section"));
  // Nested: messages name text_config.
  EXPECT_THAT(config_error_of(R"({"text_config": {"head_dim": 128,
      "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 20]}}})"),
              HasSubstr("mrope_section ([16, 24, 20])"));
}

// A RoPE key beside text_config is not applied: say so unless it repeats text_config's value.
TEST(ConfigMrope, RopeKeysBesideTextConfigAreNotDroppedSilently) {
  const ModelConfig c = parse_hf_config(R"({
    "model_type": "qwen2_5_vl", "rope_theta": 1000000.0, "rope_scaling": {"type": "linear", "factor": 2.0},
    "text_config": {"head_dim": 128, "rope_theta": 1000000.0,
      "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}})");
  EXPECT_EQ(c.spec.method, Method::kNone);
  EXPECT_THAT(c.warnings, ElementsAre(::testing::AllOf(HasSubstr("rope_scaling ("),
                                                       HasSubstr("beside text_config"))));
  EXPECT_THAT(c.ignored_keys, Contains("rope_theta"));
}

}  // namespace
