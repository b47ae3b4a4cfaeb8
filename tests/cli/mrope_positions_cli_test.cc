// `posenc mrope-positions` end to end: the table, the --json contract, both rules, the config's
// warnings, and every error path (status 1, the segment or key and the value named).
#include <unistd.h>

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
using ::testing::Not;

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "posenc_mrope_positions_cli_test");
}

std::string config(const std::string& name, const std::string& text) {
  return posenc_test::write_temp_file("posenc_mrope_cli", name, text);
}

// The vision_config of Qwen2.5-VL-7B-Instruct's config.json (spatial_merge_size 2,
// tokens_per_second 2), the keys the command reads.
std::string qwen25() {
  return config("qwen25.json", R"({"model_type": "qwen2_5_vl", "vision_config":
      {"spatial_merge_size": 2, "tokens_per_second": 2, "temporal_patch_size": 2}})");
}
std::string qwen25_merge1() {
  return config("qwen25_m1.json", R"({"model_type": "qwen2_5_vl", "vision_config":
      {"spatial_merge_size": 1, "tokens_per_second": 2}})");
}
std::string qwen3() {
  return config("qwen3.json", R"({"model_type": "qwen3_vl", "vision_config":
      {"spatial_merge_size": 2}})");
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

TEST(MropePositionsCli, HelpNamesTheCommandAndItsOptions) {
  const CliRun top = posenc("--help");
  EXPECT_THAT(top.out, HasSubstr("mrope-positions"));
  const CliRun r = posenc("mrope-positions --help");
  EXPECT_EQ(r.status, 0);
  for (const char* w : {"--layout", "--rule", "--json", "hf-4.5", "hf-5.3", "video:TxHxW@S"}) {
    EXPECT_THAT(r.out, HasSubstr(w)) << w;
  }
}

// The transformers test value (rope-in-engines.md §1.2): t = [1,1,1,1,5,5,5,5], next text at 3.
TEST(MropePositionsCli, JsonUnderHf53HoldsTransformersTestValue) {
  const nlohmann::json j = json_of("mrope-positions " + qwen25_merge1() +
                                   " --layout text:1,video:2x2x2@2,text:1 "
                                   "--rule hf-5.3");
  EXPECT_EQ(j["rule"], "hf-5.3");
  EXPECT_EQ(j["layout"], "text:1,video:2x2x2@2,text:1");
  EXPECT_EQ(j["tokens"], 10);
  EXPECT_EQ(j["model_type"], "qwen2_5_vl");
  EXPECT_EQ(j["tokens_per_second"], 2);
  EXPECT_EQ(j["position_ids"][0], nlohmann::json::parse("[0, 1, 1, 1, 1, 5, 5, 5, 5, 3]"));
  EXPECT_EQ(j["position_ids"][2], nlohmann::json::parse("[0, 1, 2, 1, 2, 1, 2, 1, 2, 3]"));
  EXPECT_EQ(j["rope_deltas"], -4);
  EXPECT_EQ(j["rules_first_differ_at"], 9);
  // The default rule is hf-4.5: the text at max + 1 = 6.
  const nlohmann::json old =
      json_of("mrope-positions " + qwen25_merge1() + " --layout text:1,video:2x2x2@2,text:1");
  EXPECT_EQ(old["rule"], "hf-4.5");
  EXPECT_EQ(old["position_ids"][1][9], 6);
  EXPECT_EQ(old["rope_deltas"], -3);
}

// The doc's worked example: text, an image (1, 28, 28) -> 196 tokens, text resumes at L + 14.
TEST(MropePositionsCli, TablePrintsTheRowsAndRopeDeltas) {
  const CliRun r = posenc("mrope-positions " + qwen25() + " --layout text:5,image:1x28x28,text:3");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(qwen2_5_vl, qwen2.5-vl)  rule hf-4.5"));
  EXPECT_THAT(r.out, HasSubstr("tokens 204"));
  EXPECT_THAT(r.out, HasSubstr("token   0   1   2   3   4   5   6"));
  EXPECT_THAT(r.out, HasSubstr("t       0   1   2   3   4   5   5"));
  EXPECT_THAT(r.out, HasSubstr("w       0   1   2   3   4   5   6"));
  EXPECT_THAT(r.out, HasSubstr("token 192 193 194 195 196 197 198 199 200 201 202 203"));
  EXPECT_THAT(r.out, HasSubstr("h      18  18  18  18  18  18  18  18  18  19  20  21"));
  EXPECT_THAT(r.out, HasSubstr("rope_deltas -182"));
  EXPECT_THAT(r.out, HasSubstr("cache position 204, gets 22"));
  EXPECT_THAT(r.out, HasSubstr("hf-5.3 gives the same ids"));
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(MropePositionsCli, Qwen3VlSplitsVideoFrames) {
  const nlohmann::json j =
      json_of("mrope-positions " + qwen3() + " --layout text:2,video:3x4x4@0.5,text:1");
  EXPECT_EQ(j["model"], "qwen3-vl");
  EXPECT_FALSE(j.contains("tokens_per_second"));
  EXPECT_TRUE(j["rules_first_differ_at"].is_null());
  const CliRun r =
      posenc("mrope-positions " + qwen3() + " --layout image:3x4x4,text:1 --rule hf-5.3");
  EXPECT_THAT(r.out, HasSubstr("hf-4.5 gives other ids from token 12 on"));
  EXPECT_EQ(j["position_ids"][0],
            nlohmann::json::parse("[0, 1, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6, 8]"));
}

TEST(MropePositionsCli, ConfigWarningsGoToStderr) {
  const std::string c = config("defaults.json", R"({"model_type": "qwen2_5_vl"})");
  const CliRun r = posenc("mrope-positions " + c + " --layout video:2x2x2@1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("posenc: warning: "));
  EXPECT_THAT(r.err, HasSubstr("tokens_per_second is missing; using Qwen2_5_VLVisionConfig's"));
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["position_ids"][0], nlohmann::json::parse("[0, 4]"));  // 1 s x 4 per temporal patch
}

TEST(MropePositionsCli, EveryErrorNamesWhatIsWrong) {
  const std::string c = qwen25();
  const std::string cmd = "mrope-positions " + c + " --layout ";
  expect_error(cmd + "text:5,audio:3", {"layout segment 2 (\"audio:3\")", "unknown segment kind"});
  expect_error(cmd + "text:0", {"layout segment 1 (\"text:0\")", "N (0) must be an integer >= 1"});
  expect_error(cmd + "image:1x-28x28", {"H (-28) must be an integer >= 1"});
  expect_error(cmd + "image:1x28", {"the grid (1x28) must be TxHxW"});
  expect_error(cmd + "text:2,image:1x27x28", {"layout segment 2 (\"image:1x27x28\")",
                                              "H (27) must be a multiple of "
                                              "spatial_merge_size (2)"});
  expect_error(cmd + "image:1x28x30,video:1x28x27@1",
               {"layout segment 2 (\"video:1x28x27@1\")", "W (27) must be a multiple"});
  expect_error(cmd + "video:4x28x28", {"layout segment 1 (\"video:4x28x28\")", "needs @S"});
  expect_error(cmd + "video:4x28x28@0", {"S (0) must be a finite number > 0"});
  expect_error(cmd + "video:4x28x28@-0.5", {"S (-0.5) must be a finite number > 0"});
  expect_error(cmd + "video:4x28x28@inf", {"S (inf) must be a finite number > 0"});
  expect_error(cmd + "video:4x28x28@nan", {"S (nan) must be a finite number > 0"});
  expect_error(cmd + "text:1,,text:2", {"layout segment 2 (\"\"): empty segment"});
  expect_error(cmd + "image:1x8192x8192", {"more than 4194304 tokens"});
  expect_error(cmd + "\"\"", {"--layout (\"\") must not be empty"});
  expect_error(cmd + "text:1 --rule hf-5", {"--rule (\"hf-5\") must be hf-4.5"});
  const CliRun missing = posenc("mrope-positions " + c);  // CLI11's own message
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.err, HasSubstr("--layout is required"));
  const std::string llama = config("llama.json", R"({"model_type": "llama", "rope_theta": 1e4})");
  expect_error("mrope-positions " + llama + " --layout text:1",
               {"model_type (\"llama\") has no M-RoPE position rule"});
  const std::string bad_merge =
      config("bad_merge.json",
             R"({"model_type": "qwen2_vl", "vision_config": {"spatial_merge_size": 0}})");
  expect_error("mrope-positions " + bad_merge + " --layout text:1",
               {"vision_config.spatial_merge_size (0) must be a positive integer"});
  const std::string bad_tps =
      config("bad_tps.json",
             R"({"model_type": "qwen2_5_vl", "vision_config": {"tokens_per_second": -2}})");
  expect_error("mrope-positions " + bad_tps + " --layout text:1",
               {"vision_config.tokens_per_second (-2) must be a finite number > 0"});
  expect_error("mrope-positions /nonexistent/vl.json --layout text:1",
               {"cannot read /nonexistent/vl.json"});
  const std::string not_json = config("not_json.json", "GGUF....");
  expect_error("mrope-positions " + not_json + " --layout text:1", {"not a config.json"});
}

// docs/mrope-positions.md's example: its config, its command, and the output it shows.
TEST(MropePositionsCli, DocExampleOutputIsWhatTheToolPrints) {
  const std::string doc =
      posenc_cli::slurp(std::string(POSENC_SOURCE_DIR) + "/docs/mrope-positions.md");
  const std::string cat = "$ cat vl.json\n";
  const std::string run = "$ posenc mrope-positions vl.json ";
  const std::size_t c = doc.find(cat), r = doc.find(run);
  ASSERT_NE(c, std::string::npos);
  ASSERT_NE(r, std::string::npos);
  const std::string json =
      doc.substr(c + cat.size(), doc.find('\n', c + cat.size()) - c - cat.size());
  const std::size_t args_end = doc.find('\n', r);
  const std::string args = doc.substr(r + run.size(), args_end - r - run.size());
  const std::string shown = doc.substr(args_end + 1, doc.find("```", args_end) - args_end - 1);
  const std::string path = config("vl.json", json);
  const CliRun out = posenc("mrope-positions " + path + " " + args);
  ASSERT_EQ(out.status, 0) << out.err;
  std::string printed = out.out;
  printed.replace(0, path.size(), "vl.json");
  EXPECT_EQ(printed, shown);
}

// `posenc doctor` on a VL config.json reads its vision_config (tokens_per_second 2, not the class
// default 4) and takes --layout: a 1.5 s video steps by trunc(1.5) x 2 = 2 instead of 3.
TEST(DoctorMropeCli, ReadsVisionConfigAndLayout) {
  const std::string path = config("qwen25-full.json", R"({"model_type": "qwen2_5_vl",
      "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 128000,
      "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
      "vision_config": {"spatial_merge_size": 2, "tokens_per_second": 2}})");
  const CliRun r = posenc("doctor " + path + " --layout text:3,video:4x28x28@1.5,text:2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[warning] mrope-fractional-seconds"));
  EXPECT_THAT(r.out, HasSubstr("[0,2,4,6] instead of [0,3,6,9]"));
  EXPECT_THAT(r.out, HasSubstr("mrope-position-rule"));
  const CliRun j = posenc("doctor " + path + " --json");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  std::vector<std::string> ids;
  for (const auto& f : doc["findings"]) ids.push_back(f["id"]);
  EXPECT_THAT(ids, ::testing::IsSupersetOf(
                       {"mrope-bf16-cache", "mrope-position-rule", "mrope-fractional-seconds"}));
  const std::string bad = "doctor " + path + " --layout text:3,image:1x27x28";
  posenc_cli::expect_refused(posenc(bad), {"layout segment 2", "image:1x27x28", "27"}, bad);
}

// A preset carries its vision_config too: qwen2.5-vl-7b's tokens_per_second is 2 (the released
// checkpoints'), not the class default 4 that a GGUF file would get.
TEST(DoctorMropeCli, APresetsVisionConfigIsRead) {
  const CliRun r = posenc("doctor --preset qwen2.5-vl-7b --layout text:3,video:4x28x28@1.5,text:2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tokens_per_second 2 here"));
  EXPECT_THAT(r.out, HasSubstr("[0,2,4,6] instead of [0,3,6,9]"));
}

}  // namespace
