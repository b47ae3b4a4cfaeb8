// The VL config reader of M-RoPE positions (posenc/io/vision_config.h): the families, the keys it
// reads, transformers' defaults when they are missing, and its errors.
#include "posenc/io/vision_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "posenc/core/error.h"

namespace posenc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

VisionConfig parse(const std::string& json) { return parse_vision_config(json, "vl.json"); }

std::string error_of(const std::string& json) {
  try {
    parse(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(VisionConfig, ReadsTheFamilyAndTheVisionKeys) {
  const VisionConfig q = parse(
      R"({"model_type": "qwen2_5_vl", "vision_config": {"spatial_merge_size": 2,
          "tokens_per_second": 2, "depth": 32}})");
  EXPECT_EQ(q.model_type, "qwen2_5_vl");
  EXPECT_EQ(q.vision.model, MropeModel::kQwen25Vl);
  EXPECT_EQ(q.vision.spatial_merge_size, 2);
  EXPECT_EQ(q.vision.tokens_per_second, 2);
  EXPECT_THAT(q.warnings, IsEmpty());
  EXPECT_EQ(parse(R"({"model_type": "qwen2_vl", "vision_config": {"spatial_merge_size": 4}})")
                .vision.spatial_merge_size,
            4);
  EXPECT_EQ(parse(R"({"model_type": "qwen3_vl_moe"})").vision.model, MropeModel::kQwen3Vl);
  EXPECT_EQ(parse(R"({"model_type": "glm4v_moe"})").vision.model, MropeModel::kGlm4v);
  EXPECT_EQ(parse(R"({"model_type": "glm4v"})").vision.model, MropeModel::kGlm4v);
}

// transformers' class defaults: spatial_merge_size 2, Qwen2_5_VLVisionConfig tokens_per_second 4.
TEST(VisionConfig, MissingKeysTakeTransformersDefaultsAndSaySo) {
  const VisionConfig q = parse(R"({"model_type": "qwen2_5_vl"})");
  EXPECT_EQ(q.vision.spatial_merge_size, 2);
  EXPECT_EQ(q.vision.tokens_per_second, 4);
  EXPECT_THAT(q.warnings,
              ElementsAre(HasSubstr("vision_config.spatial_merge_size is missing; using "
                                    "transformers' default 2"),
                          HasSubstr("vision_config.tokens_per_second is missing; using "
                                    "Qwen2_5_VLVisionConfig's default 4")));
  const VisionConfig g = parse(R"({"model_type": "glm4v", "vision_config": null})");
  EXPECT_EQ(g.vision.spatial_merge_size, 2);
  EXPECT_THAT(g.warnings, ElementsAre(HasSubstr("spatial_merge_size is missing")));
}

TEST(VisionConfig, WarnsOfATokensPerSecondTheRuleDoesNotRead) {
  const VisionConfig q = parse(
      R"({"model_type": "qwen2_vl", "vision_config": {"spatial_merge_size": 2,
          "tokens_per_second": 2}})");
  EXPECT_THAT(q.warnings, ElementsAre(HasSubstr("vision_config.tokens_per_second (2) is not read "
                                                "by qwen2-vl's position rule")));
}

TEST(VisionConfig, ErrorsNameTheKeyAndTheValue) {
  EXPECT_THAT(error_of("[1]"), HasSubstr("vl.json: the top level ([1]) must be a JSON object"));
  EXPECT_THAT(error_of("{"), HasSubstr("vl.json"));
  EXPECT_THAT(error_of("{}"), HasSubstr("model_type is missing"));
  EXPECT_THAT(error_of(R"({"model_type": 3})"), HasSubstr("model_type (3)"));
  EXPECT_THAT(error_of(R"({"model_type": "llama"})"),
              HasSubstr("model_type (\"llama\") has no M-RoPE position rule in posenc; expected "
                        "a vision-language model: qwen2_vl, qwen2_5_vl"));
  EXPECT_THAT(error_of(R"({"model_type": "qwen2_vl", "vision_config": [2]})"),
              HasSubstr("vision_config ([2]) must be an object"));
  for (const char* bad : {"0", "-2", "1.5", "\"2\""}) {
    EXPECT_THAT(error_of(std::string(R"({"model_type": "qwen2_vl", "vision_config":
                                         {"spatial_merge_size": )") +
                         bad + "}}"),
                HasSubstr("vision_config.spatial_merge_size (" + std::string(bad) +
                          ") must be a positive integer"))
        << bad;
  }
  for (const char* bad : {"0", "-1"}) {
    EXPECT_THAT(error_of(std::string(R"({"model_type": "qwen2_5_vl", "vision_config":
                                         {"tokens_per_second": )") +
                         bad + "}}"),
                HasSubstr("vision_config.tokens_per_second (" + std::string(bad) +
                          ") must be a finite number > 0"))
        << bad;
  }
  EXPECT_THAT(error_of(R"({"model_type": "qwen2_5_vl", "vision_config":
                          {"tokens_per_second": "2"}})"),
              HasSubstr("vision_config.tokens_per_second (\"2\") must be a number"));
}

TEST(VisionConfig, LoadRefusesWhatIsNotAConfig) {
  EXPECT_THAT(
      [] {
        try {
          load_vision_config("/nonexistent/vl.json");
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("cannot read /nonexistent/vl.json"));
  EXPECT_THROW(load_vision_config("/dev/zero"), Error);
}

}  // namespace
}  // namespace posenc
