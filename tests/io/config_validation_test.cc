// Every error that the config.json parser (src/config*.cc) raises on values of the right type,
// one test each: the message must name the key and the value (docs/design.md §6). The parser's
// type errors (a string or bool where a number is expected, a fractional or negative integer,
// ...) are tested in config_errors_test.cc (suite ConfigTypeErrors); RopeSpec validation's own in
// spec_validation_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <string_view>

#include "posenc/core/error.h"
#include "posenc/io/config.h"
#include "support/config_test_support.h"
#include "support/error_of.h"

namespace posenc {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;
using testing::Names;
using ::testing::StartsWith;

std::string config_error(std::string_view json) { return testing::config_error_of(json); }

// --- The parser (config.cc, config_rope.cc): errors other than type errors

TEST(ConfigValidation, ValidateErrorsNameTheSource) {
  EXPECT_THAT(config_error(R"({"head_dim": 64, "max_position_embeddings": 16384,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 0.5,
                       "original_max_position_embeddings": 4096}})"),
              AllOf(StartsWith("config.json: yarn: "), Names("beta_fast", "(0.5)")));
}

TEST(ConfigValidation, PerLayerValidateErrorsNameTheLayer) {
  EXPECT_THAT(config_error(R"({"head_dim": 64, "rope_parameters": {
      "sliding_attention": {"rope_type": "linear", "factor": -2.0}}})"),
              AllOf(HasSubstr("rope_parameters.sliding_attention"), Names("factor", "(-2)")));
}

TEST(ConfigValidation, UnknownRopeType) {
  EXPECT_THAT(config_error(R"({"head_dim": 64, "rope_scaling": {"rope_type": "yarnn"}})"),
              Names("rope_scaling.rope_type", "(\"yarnn\")"));
}

TEST(ConfigValidation, RopeTypeAndTypeDisagree) {
  EXPECT_THAT(
      config_error(R"({"head_dim": 64,
      "rope_scaling": {"rope_type": "yarn", "type": "linear", "factor": 2.0}})"),
      AllOf(Names("rope_scaling.rope_type", "\"yarn\""), Names("rope_scaling.type", "\"linear\"")));
}

TEST(ConfigValidation, MissingFactor) {
  EXPECT_THAT(config_error(R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear"}})"),
              Names("rope_scaling.factor", "\"linear\""));
}

TEST(ConfigValidation, NullRequiredFactor) {
  EXPECT_THAT(config_error(R"({"head_dim": 64,
      "rope_scaling": {"rope_type": "dynamic", "factor": null}})"),
              Names("rope_scaling.factor", "(null)"));
}

TEST(ConfigValidation, Llama3MissingKey) {
  EXPECT_THAT(config_error(R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3",
      "factor": 8.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})"),
              Names("rope_scaling.low_freq_factor", "\"llama3\""));
}

TEST(ConfigValidation, Llama3NullOriginalContext) {
  EXPECT_THAT(config_error(R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3",
      "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": null}})"),
              Names("rope_scaling.original_max_position_embeddings", "(null)"));
}

TEST(ConfigValidation, LongropeMissingList) {
  EXPECT_THAT(config_error(R"({"head_dim": 4, "rope_scaling": {"rope_type": "longrope",
      "short_factor": [1, 1]}})"),
              Names("rope_scaling.long_factor", "\"longrope\""));
}

TEST(ConfigValidation, YarnWithoutAnyContextLength) {
  EXPECT_THAT(config_error(R"({"head_dim": 64,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})"),
              AllOf(HasSubstr("rope_scaling.original_max_position_embeddings is missing"),
                    HasSubstr("max_position_embeddings is not set"), HasSubstr("\"yarn\"")));
}

TEST(ConfigValidation, LongropeTopLevelContextWithoutMaxPositions) {
  EXPECT_THAT(config_error(R"({"head_dim": 4, "original_max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "longrope", "short_factor": [1, 1],
                       "long_factor": [1, 1]}})"),
              AllOf(Names("original_max_position_embeddings", "(4096)"),
                    HasSubstr("needs max_position_embeddings")));
}

TEST(ConfigValidation, LongropeWithoutAnyContextLength) {
  EXPECT_THAT(config_error(R"({"head_dim": 4, "rope_scaling": {"rope_type": "longrope",
      "factor": 4.0, "short_factor": [1, 1], "long_factor": [1, 1]}})"),
              AllOf(HasSubstr("rope_scaling.original_max_position_embeddings is missing"),
                    HasSubstr("max_position_embeddings is not set")));
}

TEST(ConfigValidation, LongropeWithoutFactorOrMaxPositions) {
  EXPECT_THAT(config_error(R"({"head_dim": 4, "rope_scaling": {"rope_type": "longrope",
      "original_max_position_embeddings": 4096, "short_factor": [1, 1],
      "long_factor": [1, 1]}})"),
              AllOf(HasSubstr("rope_scaling.factor is missing"),
                    HasSubstr("max_position_embeddings is not set")));
}

TEST(ConfigValidation, MissingHiddenSize) {
  EXPECT_THAT(config_error(R"({"num_attention_heads": 32})"),
              AllOf(HasSubstr("hidden_size is missing"), HasSubstr("head_dim")));
}

TEST(ConfigValidation, NullNumAttentionHeads) {
  EXPECT_THAT(config_error(R"({"hidden_size": 4096, "num_attention_heads": null})"),
              Names("num_attention_heads", "(null)"));
}

TEST(ConfigValidation, HiddenSizeNotDivisible) {
  EXPECT_THAT(config_error(R"({"hidden_size": 4096, "num_attention_heads": 48})"),
              AllOf(Names("hidden_size", "(4096)"), Names("num_attention_heads", "(48)")));
}

TEST(ConfigValidation, DeepseekWithoutRopeHeadDim) {
  EXPECT_THAT(config_error(R"({"model_type": "deepseek_v3", "hidden_size": 7168,
                               "num_attention_heads": 128})"),
              AllOf(HasSubstr("qk_rope_head_dim is missing"), HasSubstr("deepseek_v3")));
}

TEST(ConfigValidation, PartialRotaryFactorOutOfRange) {
  EXPECT_THAT(config_error(R"({"model_type": "phi", "head_dim": 64,
                               "partial_rotary_factor": 1.5})"),
              Names("partial_rotary_factor", "(1.5)"));
}

TEST(ConfigValidation, PartialRotaryFactorGivesOddRotaryDim) {
  // transformers: int(100 * 0.25) = 25, an odd number of dims.
  EXPECT_THAT(
      config_error(R"({"model_type": "phi", "head_dim": 100,
                               "partial_rotary_factor": 0.25})"),
      AllOf(Names("partial_rotary_factor", "(0.25)"), Names("head_dim", "(100)"), HasSubstr("25")));
}

TEST(ConfigValidation, RotaryPctGivesNoDims) {
  EXPECT_THAT(config_error(R"({"model_type": "gpt_neox", "hidden_size": 1024,
                               "num_attention_heads": 16, "rotary_pct": 0.01})"),
              AllOf(Names("rotary_pct", "(0.01)"), Names("head_dim", "(64)")));
}

TEST(ConfigValidation, EveryLayerTypeNull) {
  EXPECT_THAT(config_error(R"({"head_dim": 64, "layer_types": ["full_attention"],
                               "rope_parameters": {"full_attention": null}})"),
              Names("rope_parameters", "{\"full_attention\": null}"));
}

TEST(ConfigValidation, RopeParametersMixNestedAndFlat) {
  EXPECT_THAT(config_error(R"({"head_dim": 64, "rope_parameters": {
      "rope_type": "linear", "full_attention": {"rope_type": "default"}}})"),
              AllOf(Names("rope_parameters.rope_type", "(\"linear\")"), HasSubstr("mixes")));
}

TEST(ConfigValidation, UnreadableFile) {
  EXPECT_THAT(error_of([] { load_hf_config("/nonexistent/dir/config.json"); }),
              AllOf(HasSubstr("cannot read /nonexistent/dir/config.json"),
                    HasSubstr("No such file or directory")));
}

}  // namespace
}  // namespace posenc
