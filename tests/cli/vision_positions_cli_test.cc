// `posenc vision-positions` and `posenc mrope-positions --cos-sin` end to end: the table, the
// --json contract, cos/sin against the float64 formula, the config's keys and warnings, and
// every error path (status 1, the key or option and the value named).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cli_expect.h"
#include "support/cli_runner.h"
#include "support/temp_files.h"

namespace {

using posenc_cli::CliRun;
using ::testing::HasSubstr;

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "posenc_vision_positions_cli_test");
}

std::string config(const std::string& name, const std::string& text) {
  return posenc_test::write_temp_file("posenc_vision_cli", name, text);
}

// Qwen2-VL-7B-Instruct config.json: text rope_theta 1e6, 3584 / 28 = 128, legacy "type": "mrope"
// with mrope_section [16, 24, 24]; vision_config embed_dim 1280, num_heads 16, patch_size 14.
std::string qwen2() {
  return config("qwen2_vl.json", R"({"model_type": "qwen2_vl", "hidden_size": 3584,
      "num_attention_heads": 28, "num_key_value_heads": 4, "rope_theta": 1000000.0,
      "max_position_embeddings": 32768,
      "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
      "vision_config": {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "num_heads": 16,
                        "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}})");
}
// Qwen2.5-VL-7B-Instruct config.json vision_config (window_size 112, fullatt_block_indexes).
std::string qwen25() {
  return config("qwen25_vl.json", R"({"model_type": "qwen2_5_vl", "vision_config":
      {"hidden_size": 1280, "num_heads": 16, "patch_size": 14, "spatial_merge_size": 2,
       "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2}})");
}
// Llama-4-Scout-17B-16E config.json vision_config.
std::string llama4() {
  return config("llama4.json", R"({"model_type": "llama4", "vision_config":
      {"hidden_size": 1408, "num_attention_heads": 16, "image_size": 336, "patch_size": 14,
       "rope_theta": 10000}})");
}

nlohmann::json json_of(const std::string& args) {
  const CliRun r = posenc(args + " --json");
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  return nlohmann::json::parse(r.out);
}

void expect_error(const std::string& args, const std::vector<std::string>& words) {
  const CliRun r = posenc(args);
  posenc_cli::expect_refused(r, words, args);
  EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
}

TEST(VisionPositionsCli, HelpNamesTheCommandAndItsOptions) {
  EXPECT_THAT(posenc("--help").out, HasSubstr("vision-positions"));
  const CliRun r = posenc("vision-positions --help");
  EXPECT_EQ(r.status, 0);
  for (const char* w : {"--grid", "--window", "--json", "--cos-sin", "--numerics"})
    EXPECT_THAT(r.out, HasSubstr(w)) << w;
  EXPECT_THAT(posenc("mrope-positions --help").out, HasSubstr("--cos-sin"));
}

TEST(VisionPositionsCli, QwenJsonHoldsMergeBlockPositionsAndCosSin) {
  const nlohmann::json j = json_of("vision-positions " + qwen2() + " --grid 1x4x4 --cos-sin");
  EXPECT_EQ(j["model"], "qwen2-vl");
  EXPECT_EQ(j["head_dim"], 80);
  EXPECT_EQ(j["sections"], nlohmann::json::array({20, 20}));
  EXPECT_EQ(j["layout"], "half-split");
  EXPECT_EQ(j["tokens"], 16);
  EXPECT_EQ(j["position_ids"][0],
            nlohmann::json::array({0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3}));
  EXPECT_EQ(j["position_ids"][1],
            nlohmann::json::array({0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3}));
  EXPECT_EQ(j["numerics"], "precise");
  ASSERT_EQ(j["cos"].size(), 16u);
  ASSERT_EQ(j["cos"][0].size(), 80u);
  // Patch 5 is (row 0, col 3): slot 21 (the column ladder's k = 1) has angle 3 * 10^-0.2, in
  // both halves of cat(freqs, freqs); slot 1 (the row's) has angle 0.
  const double a = 3 * std::pow(10.0, -0.2);
  EXPECT_NEAR(j["cos"][5][21].get<double>(), std::cos(a), 6e-8);
  EXPECT_NEAR(j["sin"][5][61].get<double>(), std::sin(a), 6e-8);
  EXPECT_EQ(j["cos"][5][1].get<double>(), 1.0);
  EXPECT_EQ(j["sin"][5][41].get<double>(), 0.0);
  const CliRun text = posenc("vision-positions " + qwen2() + " --grid 1x4x4");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("sections [20, 20] (row, col) restarted ladder"));
  EXPECT_THAT(text.out, HasSubstr("merge-block order"));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("cos")));
}

TEST(VisionPositionsCli, Qwen25WindowOrderAndHfValues) {
  const nlohmann::json j =
      json_of("vision-positions " + qwen25() + " --grid 1x4x12 --window --cos-sin --numerics hf");
  EXPECT_EQ(j["window_index"], nlohmann::json::array({0, 1, 2, 3, 6, 7, 8, 9, 4, 5, 10, 11}));
  EXPECT_EQ(j["fullatt_block_indexes"], nlohmann::json::array({7, 15, 23, 31}));
  EXPECT_EQ(j["numerics"], "hf");
  for (const auto& row : j["cos"]) {
    for (const auto& v : row) {
      const double x = v.get<double>();
      EXPECT_EQ(static_cast<double>(static_cast<float>(x)), x);
    }
  }
  const CliRun text = posenc("vision-positions " + qwen25() + " --grid 1x4x12 --window --cos-sin");
  EXPECT_THAT(text.out, HasSubstr("merge units in window order"));
  EXPECT_THAT(text.out, HasSubstr("cos / sin (precise, [patches][80]"));
}

TEST(VisionPositionsCli, Llama4DefaultsToItsTileAndPutsTheClassTokenLast) {
  const nlohmann::json j = json_of("vision-positions " + llama4() + " --cos-sin");
  EXPECT_EQ(j["grid"], "1x24x24");
  EXPECT_EQ(j["tokens"], 577);
  EXPECT_EQ(j["class_token"], 576);
  EXPECT_EQ(j["layout"], "interleaved");
  EXPECT_EQ(j["axes"], nlohmann::json::array({"x", "y"}));
  EXPECT_EQ(j["position_ids"][0][0], 1);
  EXPECT_EQ(j["position_ids"][0][576], 0);
  ASSERT_EQ(j["cos"][0].size(), 44u);
  EXPECT_EQ(j["cos"][576][30].get<double>(), 1.0);
  // idx 30: x = 30 % 24 + 1 = 7, y = 30 / 24 + 1 = 2; slot 23 is y with k = 1.
  EXPECT_NEAR(j["sin"][30][23].get<double>(), std::sin(2 * std::pow(1e4, -2.0 / 44)), 6e-8);
  EXPECT_NEAR(j["sin"][30][1].get<double>(), std::sin(7 * std::pow(1e4, -2.0 / 44)), 6e-8);
}

TEST(VisionPositionsCli, BadInputIsRefusedNamingTheValue) {
  expect_error("vision-positions " + qwen2() + " --grid 1x5x4", {"grid 1x5x4", "H (5)"});
  expect_error("vision-positions " + qwen2(), {"--grid is required for qwen2-vl"});
  expect_error("vision-positions " + qwen2() + " --grid 1x4", {"--grid (1x4)", "TxHxW"});
  expect_error("vision-positions " + qwen2() + " --grid 1x4x4 --window",
               {"--window", "only Qwen2.5-VL"});
  expect_error("vision-positions " + llama4() + " --grid 1x20x24", {"grid 1x20x24", "1x24x24"});
  expect_error("vision-positions " + qwen2() + " --grid 1x4x4 --numerics hf",
               {"--numerics (hf)", "give --cos-sin too"});
  expect_error("vision-positions " + qwen2() + " --grid 1x4x4 --cos-sin --numerics ggml",
               {"--numerics (ggml)", "precise or hf"});
  expect_error("vision-positions " + qwen2() + " --grid 1x4x4 --cos-sin --numerics fast",
               {"--numerics", "fast"});
  expect_error("vision-positions " +
                   config("glm.json", R"({"model_type": "glm4v", "vision_config": {}})") +
                   " --grid 1x4x4",
               {"model_type (\"glm4v\") has no vision tower RoPE", "llama4"});
  expect_error(
      "vision-positions " + config("novc.json", R"({"model_type": "qwen2_vl"})") + " --grid 1x4x4",
      {"vision_config is missing"});
  expect_error("vision-positions " +
                   config("nohead.json",
                          R"({"model_type": "qwen2_vl", "vision_config": {"num_heads": 16}})") +
                   " --grid 1x4x4",
               {"vision_config.embed_dim is missing", "embed_dim / num_heads"});
  expect_error("vision-positions " +
                   config("odd.json", R"({"model_type": "qwen3_vl", "vision_config":
                       {"hidden_size": 1000, "num_heads": 16}})") +
                   " --grid 1x4x4",
               {"vision_config.hidden_size (1000) must be a multiple of vision_config.num_heads"});
  expect_error("vision-positions " +
                   config("head.json", R"({"model_type": "qwen3_vl", "vision_config":
                       {"hidden_size": 96, "num_heads": 16}})") +
                   " --grid 1x4x4",
               {"vision head_dim (6) must be a positive multiple of 4"});
  expect_error(
      "vision-positions " + config("theta.json", R"({"model_type": "llama4", "vision_config":
                       {"hidden_size": 1408, "num_attention_heads": 16, "rope_theta": -1}})"),
      {"vision_config.rope_theta", "-1", "finite number > 1"});
  expect_error("vision-positions " +
                   config("fa.json", R"({"model_type": "qwen2_5_vl", "vision_config":
                       {"hidden_size": 1280, "num_heads": 16, "fullatt_block_indexes": [7.5]}})") +
                   " --grid 1x4x4",
               {"vision_config.fullatt_block_indexes", "layer indices"});
  expect_error("vision-positions " +
                   config("win.json", R"({"model_type": "qwen2_5_vl", "vision_config":
                       {"hidden_size": 1280, "num_heads": 16, "window_size": 100}})") +
                   " --grid 1x4x4 --window",
               {"vision_config.window_size (100)", "multiple of spatial_merge_size * patch_size"});
}

TEST(VisionPositionsCli, MissingSizesTakeTheConfigClassDefaultsWithAWarning) {
  const std::string path = config("defaults.json", R"({"model_type": "qwen2_5_vl",
      "vision_config": {"hidden_size": 1280, "num_heads": 16}})");
  const CliRun r = posenc("vision-positions " + path + " --grid 1x8x8 --window --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("vision_config.window_size is missing; using "
                               "Qwen2_5_VLVisionConfig's default 112"));
  EXPECT_THAT(r.err, HasSubstr("vision_config.patch_size is missing"));
}

// mrope-positions --cos-sin: Qwen2-VL's text cos after the section selection, [tokens][128]:
// a token's slot j reads t (j < 16), h (< 40) or w, with inv_freq 1e6^(-2j/128), in both halves.
TEST(VisionPositionsCli, MropePositionsCosSinSelectsEachSlotsAxis) {
  const nlohmann::json j =
      json_of("mrope-positions " + qwen2() + " --layout text:2,image:1x4x4,text:1 --cos-sin");
  ASSERT_EQ(j["tokens"], 7);
  ASSERT_EQ(j["cos"].size(), 7u);
  ASSERT_EQ(j["cos"][0].size(), 128u);
  EXPECT_EQ(j["numerics"], "precise");
  const auto& ids = j["position_ids"];
  for (int k = 0; k < 7; ++k) {
    for (int slot = 0; slot < 128; ++slot) {
      const int i = slot % 64;
      const int axis = i < 16 ? 0 : i < 40 ? 1 : 2;
      const double angle = ids[axis][k].get<double>() * std::pow(1e6, -2.0 * i / 128);
      EXPECT_NEAR(j["cos"][k][slot].get<double>(), std::cos(angle), 6e-8) << k << " " << slot;
      EXPECT_NEAR(j["sin"][k][slot].get<double>(), std::sin(angle), 6e-8) << k << " " << slot;
    }
  }
  const CliRun text =
      posenc("mrope-positions " + qwen2() + " --layout text:2 --cos-sin --numerics hf");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("cos / sin (hf, [tokens][128]"));
  // Without --cos-sin the JSON has no cos (the contract of item 2 stays as it was).
  EXPECT_FALSE(json_of("mrope-positions " + qwen2() + " --layout text:2").contains("cos"));
}

TEST(VisionPositionsCli, MropePositionsCosSinRefusals) {
  expect_error("mrope-positions " + qwen2() + " --layout text:2 --numerics hf",
               {"--numerics (hf)", "give --cos-sin too"});
  expect_error("mrope-positions " + qwen2() + " --layout text:2 --cos-sin --numerics ggml",
               {"--numerics (ggml)", "precise or hf"});
  // A VL config whose text part has no mrope_section: no three-axis map to give cos/sin for.
  const std::string flat = config("flat.json", R"({"model_type": "qwen2_vl", "hidden_size": 3584,
      "num_attention_heads": 28, "rope_theta": 1000000.0,
      "vision_config": {"spatial_merge_size": 2}})");
  expect_error("mrope-positions " + flat + " --layout text:2 --cos-sin",
               {"single axis map (1 position axes)", "mrope_section"});
}

}  // namespace
