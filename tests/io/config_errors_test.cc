// posenc/io/config.h: what the config.json parser refuses: malformed JSON (line and column), wrong
// types (the key and the value), unreadable files, and odd inputs that must throw only
// posenc::Error. Values of the right type that a method refuses are in spec_validation_test.cc;
// what the parser reads is config_test.cc.
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
// Malformed input and type errors: each names the key (or the position) and the value.

TEST(ConfigMalformed, SyntaxErrorNamesLineAndColumn) {
  const std::string msg = error_of("{\n  \"head_dim\": 64,\n  oops\n}");
  EXPECT_THAT(msg, StartsWith("config.json: "));
  EXPECT_THAT(msg, HasSubstr("line 3"));
  EXPECT_THAT(msg, HasSubstr("column"));
}

TEST(ConfigMalformed, TruncatedFile) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "rope_scaling": {"factor": )"),
              AllOf(HasSubstr("malformed JSON"), HasSubstr("line 1")));
}

TEST(ConfigMalformed, NumberOverflowNamesLineAndLiteral) {
  const std::string msg = error_of("{\"head_dim\": 64,\n \"rope_theta\": 1e400}");
  EXPECT_THAT(msg, HasSubstr("line 2"));
  EXPECT_THAT(msg, HasSubstr("1e400"));
}

TEST(ConfigMalformed, NanLiteral) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "rope_theta": NaN})"),
              AllOf(HasSubstr("malformed JSON"), HasSubstr("line 1"), HasSubstr("column")));
}

TEST(ConfigMalformed, SourceNameAppears) {
  try {
    parse_hf_config("[", "my/config.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("my/config.json: "));
  }
}

TEST(ConfigMalformed, TopLevelMustBeAnObject) {
  EXPECT_THAT(error_of("[1, 2]"), AllOf(HasSubstr("top level"), HasSubstr("[1, 2]")));
}

TEST(ConfigTypeErrors, StringWhereNumberExpected) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear",
                            "factor": "x"}})"),
              HasSubstr(R"(config.json: rope_scaling.factor ("x") must be a number)"));
}

TEST(ConfigTypeErrors, BoolWhereNumberExpected) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "rope_theta": true})"),
              AllOf(HasSubstr("rope_theta"), HasSubstr("(true)"), HasSubstr("must be a number")));
}

TEST(ConfigTypeErrors, NegativeHeadDim) {
  EXPECT_THAT(error_of(R"({"head_dim": -3})"),
              AllOf(HasSubstr("head_dim"), HasSubstr("(-3)"), HasSubstr("positive integer")));
}

TEST(ConfigTypeErrors, ZeroHeadDim) {
  EXPECT_THAT(error_of(R"({"head_dim": 0})"), AllOf(HasSubstr("head_dim"), HasSubstr("(0)")));
}

TEST(ConfigTypeErrors, FractionalHeadDim) {
  EXPECT_THAT(error_of(R"({"head_dim": 64.5})"),
              AllOf(HasSubstr("head_dim"), HasSubstr("(64.5)"), HasSubstr("integer")));
}

TEST(ConfigTypeErrors, StringHeadDim) {
  EXPECT_THAT(error_of(R"({"head_dim": "64"})"),
              AllOf(HasSubstr("head_dim"), HasSubstr(R"(("64"))")));
}

TEST(ConfigTypeErrors, IntegerPastInt64) {
  // 2^64 - 1 fits nlohmann's uint64; a longer literal becomes a double.
  EXPECT_THAT(error_of(R"({"head_dim": 64, "max_position_embeddings": 18446744073709551615})"),
              AllOf(HasSubstr("max_position_embeddings"), HasSubstr("18446744073709551615"),
                    HasSubstr("2^63")));
  EXPECT_THAT(error_of(R"({"head_dim": 64, "max_position_embeddings": 99999999999999999999})"),
              AllOf(HasSubstr("max_position_embeddings"), HasSubstr("1e+20"), HasSubstr("2^63")));
}

TEST(ConfigTypeErrors, HugeFloatWhereIntegerExpected) {
  EXPECT_THAT(error_of(R"({"head_dim": 1e300})"),
              AllOf(HasSubstr("head_dim"), HasSubstr("1e+300")));
}

TEST(ConfigTypeErrors, RopeScalingNotAnObject) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "rope_scaling": "yarn"})"),
              AllOf(HasSubstr("rope_scaling"), HasSubstr(R"(("yarn"))"), HasSubstr("object")));
}

TEST(ConfigTypeErrors, RopeParametersNotAnObject) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "rope_parameters": [1]})"),
              AllOf(HasSubstr("rope_parameters"), HasSubstr("([1])")));
}

TEST(ConfigTypeErrors, RopeTypeNotAString) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "rope_scaling": {"rope_type": 3}})"),
              AllOf(HasSubstr("rope_scaling.rope_type"), HasSubstr("(3)"), HasSubstr("string")));
}

TEST(ConfigTypeErrors, ModelTypeNotAString) {
  EXPECT_THAT(error_of(R"({"model_type": ["llama"], "head_dim": 64})"),
              AllOf(HasSubstr("model_type"), HasSubstr(R"((["llama"]))")));
}

TEST(ConfigTypeErrors, TruncateNotABool) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "max_position_embeddings": 16384,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "truncate": "no",
                       "original_max_position_embeddings": 4096}})"),
              AllOf(HasSubstr("rope_scaling.truncate"), HasSubstr(R"(("no"))"),
                    HasSubstr("true or false")));
}

TEST(ConfigTypeErrors, RopeInterleaveNotABool) {
  EXPECT_THAT(error_of(R"({"model_type": "deepseek_v3", "qk_rope_head_dim": 64,
                           "rope_interleave": 1})"),
              AllOf(HasSubstr("rope_interleave"), HasSubstr("(1)")));
}

TEST(ConfigTypeErrors, FactorListNotAList) {
  EXPECT_THAT(error_of(R"({"head_dim": 4, "max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "longrope", "short_factor": 1.0, "long_factor": [1, 1]}})"),
              AllOf(HasSubstr("rope_scaling.short_factor"), HasSubstr("(1.0)"),
                    HasSubstr("list of numbers")));
}

TEST(ConfigTypeErrors, FactorListEntryNotANumber) {
  EXPECT_THAT(error_of(R"({"head_dim": 4, "max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "longrope", "short_factor": [1, 1],
                       "long_factor": [1, null]}})"),
              AllOf(HasSubstr("rope_scaling.long_factor[1]"), HasSubstr("(null)")));
}

TEST(ConfigTypeErrors, NestedLayerDictValue) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": {"x": 1}}}})"),
              AllOf(HasSubstr("rope_parameters.full_attention.factor"), HasSubstr(R"({"x": 1})")));
}

TEST(ConfigTypeErrors, LayerTypesNotAList) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "layer_types": "full_attention",
      "rope_parameters": {"full_attention": {"rope_type": "default"}}})"),
              AllOf(HasSubstr("layer_types"), HasSubstr(R"(("full_attention"))")));
}

TEST(ConfigTypeErrors, LayerTypesEntryNotAString) {
  EXPECT_THAT(error_of(R"({"head_dim": 64, "layer_types": ["full_attention", 2],
      "rope_parameters": {"full_attention": {"rope_type": "default"}}})"),
              AllOf(HasSubstr("layer_types[1]"), HasSubstr("(2)")));
}

TEST(ConfigTypeErrors, LongValuesAreShortenedInMessages) {
  const std::string msg = error_of(R"({"head_dim": ")" + std::string(5000, 'a') + R"("})");
  EXPECT_THAT(msg, HasSubstr("head_dim"));
  EXPECT_LT(msg.size(), 400u);
}

// ---------------------------------------------------------------------------------------------
// Files and robustness

TEST(ConfigFiles, MissingFileNamesPathAndReason) {
  const std::filesystem::path path = config_path("no-such-config.json");
  try {
    load_hf_config(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("cannot read " + path.string() + ": "));
    EXPECT_THAT(e.what(), HasSubstr("No such file or directory"));
  }
}

TEST(ConfigFiles, DirectoryIsNotAConfig) {
  EXPECT_THROW(load_hf_config(std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs"), Error);
}

TEST(ConfigRobustness, OddInputsThrowOnlyPosencError) {
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  const std::vector<std::string> inputs = {
      "",
      " ",
      "null",
      "0",
      "\"x\"",
      "{",
      "{}",
      "[]",
      deep,
      R"({"rope_scaling": )" + deep + "}",
      R"({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": )" + deep + "}}",
      R"({"hidden_size": 4096, "num_attention_heads": 0})",
      R"({"hidden_size": 9223372036854775807, "num_attention_heads": 1})",
      R"({"head_dim": 9223372036854775807, "partial_rotary_factor": 1.0,
          "rope_parameters": {"rope_type": "default"}})",
      R"({"model_type": "gptj", "n_embd": 64, "n_head": 1, "rotary_dim": 9223372036854775807})",
      R"({"head_dim": 64, "partial_rotary_factor": 1e308, "rope_parameters": {}})",
      R"({"head_dim": 64, "partial_rotary_factor": -0.5, "rope_parameters": {"rope_type": "default"}})",
      R"({"head_dim": 64, "max_position_embeddings": 1, "rope_scaling": {"rope_type": "longrope",
          "short_factor": [], "long_factor": []}})",
      R"({"head_dim": 64, "rope_parameters": {"a": null}})",
      R"({"head_dim": 64, "rope_parameters": {"a": {}, "b": 1}})",
      "{\"head_dim\": 64, \"\xff\": 1}",
  };
  for (const std::string& input : inputs) {
    try {
      parse_hf_config(input);
    } catch (const Error&) {
    } catch (...) {
      ADD_FAILURE() << "a non-posenc exception for input starting " << input.substr(0, 80);
    }
  }
}

}  // namespace
}  // namespace posenc
