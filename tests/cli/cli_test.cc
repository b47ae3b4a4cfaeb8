// End-to-end tests of the posenc command-line tool: exit codes, stdout/stderr discipline, the
// JSON contract of `posenc inspect`, and errors that name the field and the value.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"

namespace {

using ::testing::HasSubstr;

using posenc_cli::CliRun;

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "posenc_cli_test");
}

std::string shared_config(const std::string& name) {
  return std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs/" + name;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

TEST(Cli, HelpEverywhere) {
  const CliRun top = posenc("--help");
  EXPECT_EQ(top.status, 0);
  EXPECT_THAT(top.out, HasSubstr("inspect"));
  const CliRun inspect = posenc("inspect --help");
  EXPECT_EQ(inspect.status, 0);
  EXPECT_THAT(inspect.out, HasSubstr("--numerics"));
  EXPECT_THAT(inspect.out, HasSubstr("--seq-len"));
  EXPECT_THAT(inspect.out, HasSubstr("--json"));
}

TEST(Cli, NoSubcommandIsAnError) {
  const CliRun r = posenc("");
  EXPECT_NE(r.status, 0);
  EXPECT_FALSE(r.err.empty());
}

TEST(Cli, InspectEveryRealConfig) {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(POSENC_SHARED_DIR) +
                                                               "/testdata/hf-configs")) {
    if (entry.path().extension() != ".json") continue;
    for (const char* numerics : {"precise", "hf", "ggml"}) {
      const CliRun r = posenc("inspect " + entry.path().string() + " --numerics " + numerics);
      EXPECT_EQ(r.status, 0) << entry.path() << " " << numerics << ": " << r.err;
      EXPECT_THAT(r.out, HasSubstr("attention factor")) << entry.path();
    }
  }
}

TEST(Cli, InspectJsonContract) {
  const CliRun r = posenc("inspect " + shared_config("llama-3.1-8b.json") + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"rope_type", "head_dim", "rotary_dim", "rope_theta", "factor",
                          "original_max_position_embeddings", "inv_freq", "attention_factor",
                          "softmax_scale_multiplier", "warnings"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["rope_type"], "llama3");
  EXPECT_EQ(j["head_dim"], 128);
  EXPECT_EQ(j["rotary_dim"], 128);
  EXPECT_EQ(j["rope_theta"], 500000.0);
  EXPECT_EQ(j["factor"], 8.0);
  EXPECT_EQ(j["original_max_position_embeddings"], 8192);
  ASSERT_EQ(j["inv_freq"].size(), 64u);
  // Llama 3.1: the lowest pair is divided by exactly 8 (published scaling, factor 8).
  const double plain63 = std::pow(500000.0, -126.0 / 128.0);
  EXPECT_NEAR(j["inv_freq"][63].get<double>() / plain63, 0.125, 1e-15);
  EXPECT_EQ(j["inv_freq"][0].get<double>(), 1.0);
  EXPECT_TRUE(j["warnings"].is_array());
  EXPECT_EQ(j["pairs"].size(), 64u);
  EXPECT_EQ(j["pairs"][0]["treatment"], "kept");
  EXPECT_EQ(j["pairs"][63]["treatment"], "interpolated");
}

// Qwen3-VL-8B-Instruct's text_config.rope_scaling (config.json): the axis map in the table and
// in --json, one axis name per slot.
TEST(Cli, InspectShowsTheAxisMap) {
  const std::string path = write_temp("posenc_cli_qwen3_vl.json", R"({"model_type": "qwen3_vl",
      "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "rope_theta": 5000000,
        "max_position_embeddings": 262144,
        "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20],
                         "rope_type": "default"}}})");
  const CliRun r = posenc("inspect " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("axis map  interleaved [24, 20, 20]  positions [3] x tokens"));
  EXPECT_THAT(r.out, HasSubstr("axis  treatment"));
  const CliRun j = posenc("inspect " + path + " --json");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto js = nlohmann::json::parse(j.out);
  EXPECT_EQ(js["axis_rule"], "interleaved");
  ASSERT_EQ(js["axis_map"].size(), 64u);
  EXPECT_EQ(js["axis_map"][0], "t");
  EXPECT_EQ(js["axis_map"][1], "h");
  EXPECT_EQ(js["axis_map"][2], "w");
  EXPECT_EQ(js["axis_map"][61], "t");
  EXPECT_EQ(js["pairs"][1]["axis"], "h");
  // One-axis models: every slot reads t, and the text table has no axis column.
  const CliRun plain = posenc("inspect " + shared_config("llama-3.1-8b.json"));
  EXPECT_THAT(plain.out, ::testing::Not(HasSubstr("axis")));
}

TEST(Cli, HfNumericsPrintsFloat32ValuesWidenedExactly) {
  const CliRun r = posenc("inspect " + shared_config("llama-2-7b.json") + " --numerics hf --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& v : j["inv_freq"]) {
    const double x = v.get<double>();
    EXPECT_EQ(static_cast<double>(static_cast<float>(x)), x) << "not a float32 value: " << x;
  }
  // The JSON keeps full precision: the float64 convention gives values no float32 can hold.
  const auto precise =
      nlohmann::json::parse(posenc("inspect " + shared_config("llama-2-7b.json") + " --json").out);
  int differs = 0;
  for (std::size_t i = 0; i < 64; ++i) differs += precise["inv_freq"][i] != j["inv_freq"][i];
  EXPECT_GT(differs, 32);
}

TEST(Cli, SeqLenSwitchesLongropeFactors) {
  const CliRun short_run =
      posenc("inspect " + shared_config("phi-3-mini-128k-instruct.json") + " --json");
  const CliRun long_run = posenc("inspect " + shared_config("phi-3-mini-128k-instruct.json") +
                                 " --json --seq-len 4097");
  ASSERT_EQ(short_run.status, 0) << short_run.err;
  ASSERT_EQ(long_run.status, 0) << long_run.err;
  const auto a = nlohmann::json::parse(short_run.out);
  const auto b = nlohmann::json::parse(long_run.out);
  // Phi-3 pair 47: short factor 3.05, long factor 64.76 (the published config).
  EXPECT_NEAR(a["inv_freq"][47].get<double>() / b["inv_freq"][47].get<double>(),
              64.76000213623047 / 3.049999999999997, 1e-12);
}

TEST(Cli, MissingFileNamesThePath) {
  const CliRun r = posenc("inspect /nonexistent/config.json");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/config.json"));
}

TEST(Cli, BadNumericsNamesFlagAndValue) {
  const CliRun r = posenc("inspect " + shared_config("llama-2-7b.json") + " --numerics fp16");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("--numerics"));
  EXPECT_THAT(r.err, HasSubstr("fp16"));
}

TEST(Cli, NegativeSeqLenIsRefused) {
  const CliRun r = posenc("inspect " + shared_config("llama-2-7b.json") + " --seq-len -5");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.err, HasSubstr("-5"));
}

TEST(Cli, InvalidConfigNamesFieldAndValue) {
  const std::string path = write_temp("posenc_cli_bad_beta.json", R"({
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "max_position_embeddings": 65536,
    "rope_scaling": {"rope_type": "yarn", "factor": 16.0, "beta_fast": 0.5, "beta_slow": 1.0,
                     "original_max_position_embeddings": 4096}})");
  const CliRun r = posenc("inspect " + path);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_THAT(r.err, HasSubstr("beta_fast (0.5)"));
  EXPECT_THAT(r.err, HasSubstr("beta_slow (1)"));
}

TEST(Cli, MalformedJsonIsAnErrorNotACrash) {
  const std::string path = write_temp("posenc_cli_malformed.json", "{\"rope_theta\": 10000,");
  const CliRun r = posenc("inspect " + path);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("posenc_cli_malformed.json"));
}

TEST(Cli, YarnTablePrintsCorrectionRangeAndWords) {
  const CliRun r = posenc("inspect " + shared_config("qwen2.5-7b-instruct-yarn.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("yarn correction range"));
  EXPECT_THAT(r.out, HasSubstr("kept"));
  EXPECT_THAT(r.out, HasSubstr("blended"));
  EXPECT_THAT(r.out, HasSubstr("interpolated"));
}

// --- `posenc presets`, --preset and the extension flags -----------------------------------

TEST(Cli, PresetsListsEveryPresetWithItsSource) {
  const CliRun r = posenc("presets");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  for (const char* name : {"llama-2-7b", "llama-3.1-8b", "qwen3-8b-yarn4", "deepseek-v2-lite",
                           "phi-3.5-mini", "gpt-j-6b"}) {
    EXPECT_THAT(r.out, HasSubstr(name));
  }
  EXPECT_THAT(r.out, HasSubstr("meta-llama/Llama-3.1-8B config.json"));
  EXPECT_THAT(r.out, HasSubstr("llama3"));
  EXPECT_THAT(r.out, HasSubstr("longrope"));
}

TEST(Cli, PresetsJsonGivesMethodFactorContextAndSource) {
  const CliRun r = posenc("presets --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  EXPECT_GE(j.size(), 16u);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& p : j) {
    EXPECT_FALSE(p.at("source").get<std::string>().empty());
    EXPECT_TRUE(p.at("config").is_object());
    by_name[p.at("name").get<std::string>()] = p;
  }
  // meta-llama/Llama-3.1-8B: llama3, factor 8, max_position_embeddings 131072.
  EXPECT_EQ(by_name.at("llama-3.1-8b").at("rope_type"), "llama3");
  EXPECT_EQ(by_name.at("llama-3.1-8b").at("factor").get<double>(), 8.0);
  EXPECT_EQ(by_name.at("llama-3.1-8b").at("context").get<std::int64_t>(), 131072);
  // Qwen3's card: YaRN x4 over 32768 = 131072, although the file keeps max 40960.
  EXPECT_EQ(by_name.at("qwen3-8b-yarn4").at("context").get<std::int64_t>(), 131072);
  EXPECT_EQ(by_name.at("qwen3-8b-yarn4").at("max_position_embeddings").get<std::int64_t>(), 40960);
  // Llama 3.2's llama3 factor 32 is not the extension ratio: 131072 in all, not 32 * 8192.
  EXPECT_EQ(by_name.at("llama-3.2-1b").at("context").get<std::int64_t>(), 131072);
  EXPECT_EQ(by_name.at("llama-2-7b").at("rope_type"), "default");
  EXPECT_EQ(by_name.at("llama-2-7b").at("context").get<std::int64_t>(), 4096);
}

TEST(Cli, InspectEveryPreset) {
  const auto j = nlohmann::json::parse(posenc("presets --json").out);
  for (const auto& p : j) {
    const std::string name = p.at("name").get<std::string>();
    for (const char* numerics : {"precise", "hf", "ggml"}) {
      const CliRun r = posenc("inspect --preset " + name + " --numerics " + numerics);
      EXPECT_EQ(r.status, 0) << name << " " << numerics << ": " << r.err;
    }
  }
}

// Llama 2 to 65536 tokens with YaRN: factor 65536 / 4096 = 16, attention factor 0.1 ln 16 + 1.
TEST(Cli, InspectPresetExtendedWithYarn) {
  const CliRun r =
      posenc("inspect --preset llama-2-7b --scaling yarn --target-context 65536 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("rope_type"), "yarn");
  EXPECT_EQ(j.at("factor").get<double>(), 16.0);
  EXPECT_NEAR(j.at("attention_factor").get<double>(), 1.2772588722239781, 1e-15);
  EXPECT_EQ(j.at("original_max_position_embeddings").get<std::int64_t>(), 4096);
  EXPECT_EQ(j.at("max_position_embeddings").get<std::int64_t>(), 65536);
  EXPECT_TRUE(j.at("warnings").empty()) << j.at("warnings");
}

TEST(Cli, ExtendingAScaledModelSaysWhatItReplaced) {
  const CliRun r = posenc("inspect --preset llama-3.1-8b --scaling yarn --beta-fast 16 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("rope_type"), "yarn");
  EXPECT_EQ(j.at("factor").get<double>(), 16.0);  // 131072 / 8192
  EXPECT_THAT(j.at("warnings").dump(), HasSubstr("replaces the model's own llama3"));
  // The same flags work on a file.
  const CliRun f =
      posenc("inspect " + shared_config("llama-2-7b.json") + " --scaling linear --factor 2 --json");
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_EQ(nlohmann::json::parse(f.out).at("rope_type"), "linear");
}

TEST(Cli, ExtensionErrorsNameTheFlag) {
  const CliRun r =
      posenc("inspect --preset llama-2-7b --scaling yarn --target-context 65536 --factor 8");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_THAT(r.err, HasSubstr("--factor (8)"));
  EXPECT_THAT(r.err, HasSubstr("--target-context (65536)"));
  const CliRun t = posenc("inspect --preset gpt-oss-20b --truncate maybe");
  EXPECT_EQ(t.status, 1);
  EXPECT_THAT(t.err, HasSubstr("--truncate (\"maybe\") must be true or false"));
  const CliRun l = posenc("inspect --preset llama-2-7b --scaling longrope --target-context 65536");
  EXPECT_EQ(l.status, 1);
  EXPECT_THAT(l.err, HasSubstr("longrope"));
}

TEST(Cli, UnknownPresetIsNamed) {
  const CliRun r = posenc("inspect --preset no-such-model");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_THAT(r.err, HasSubstr("\"no-such-model\""));
  EXPECT_THAT(r.err, HasSubstr("llama-2-7b"));  // the known names are listed
}

TEST(Cli, InspectHelpListsTheExtensionFlags) {
  const CliRun r = posenc("inspect --help");
  ASSERT_EQ(r.status, 0);
  for (const char* flag : {"--preset", "--scaling", "--target-context", "--factor", "--beta-fast",
                           "--mscale-all-dim", "--truncate", "--low-freq-factor", "--rope-theta"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
}

// ---------------------------------------------------------------------------------------------
// `posenc compare` and `posenc doctor` (posenc/analysis/engines.h, posenc/analysis/doctor.h,
// docs/engines.md)

TEST(Cli, CompareJsonContract) {
  const CliRun r = posenc("compare " + shared_config("gpt-oss-20b.json") + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"source", "model_type", "rope_type", "seq_len", "positions", "reference", "engines"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["reference"], "precise");
  EXPECT_EQ(j["positions"], nlohmann::json({4095, 4096, 16384, 131071}));  // L-1, L, 4L, extended-1
  ASSERT_EQ(j["engines"].size(), 4u);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& e : j["engines"]) {
    for (const char* key :
         {"engine", "numerics", "supported", "inv_freq", "relative_difference", "rounding_budget",
          "max_relative_difference", "pairs_differing", "attention_factor",
          "softmax_scale_multiplier", "cos_sin_difference", "notes", "verdict", "verdict_text"}) {
      EXPECT_TRUE(e.contains(key)) << e.value("engine", "?") << " " << key;
    }
    EXPECT_EQ(e["inv_freq"].size(), 32u);
    EXPECT_EQ(e["cos_sin_difference"].size(), 4u);
    by_name[e["engine"].get<std::string>()] = e;
  }
  // truncate false: llama.cpp floors/ceils the correction range (pairs 9..17 differ), vLLM and
  // transformers honour it.
  EXPECT_EQ(by_name["transformers"]["verdict"], "agrees");
  EXPECT_EQ(by_name["vllm"]["verdict"], "agrees");
  EXPECT_EQ(by_name["llama.cpp"]["verdict"], "differs");
  EXPECT_EQ(by_name["llama.cpp"]["pairs_differing"], 9);
  EXPECT_THAT(by_name["llama.cpp"]["notes"].dump(), HasSubstr("ignores truncate"));
  EXPECT_NEAR(by_name["vllm"]["attention_factor"].get<double>(), 1.0 + 0.1 * std::log(32.0), 1e-6);
}

TEST(Cli, CompareTableAndOptions) {
  const CliRun r =
      posenc("compare " + shared_config("deepseek-v3.json") + " --positions 0,100 --seq-len 200");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("verdicts (against precise):"));
  EXPECT_THAT(r.out, HasSubstr("position       100"));
  EXPECT_THAT(r.out, HasSubstr("softmax-scale multiplier  1.873854207"));
  const CliRun bad = posenc("compare " + shared_config("deepseek-v3.json") + " --positions 1,x");
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(bad.out.empty());
  EXPECT_THAT(bad.err, HasSubstr("--positions (\"1,x\")"));
  const CliRun none = posenc("compare");
  EXPECT_EQ(none.status, 1);
  const CliRun preset = posenc("compare --preset qwen2.5-7b-instruct-yarn4 --json");
  ASSERT_EQ(preset.status, 0) << preset.err;
  const auto parsed =
      nlohmann::json::parse(preset.out);  // kept alive: the loop ranges over a member
  for (const auto& e : parsed["engines"]) EXPECT_EQ(e["verdict"], "agrees") << e["engine"];
}

TEST(Cli, DoctorOnDeepSeekAndGptOss) {
  const CliRun ds = posenc("doctor " + shared_config("deepseek-v3.json") + " --json");
  ASSERT_EQ(ds.status, 0) << ds.err;
  const auto j = nlohmann::json::parse(ds.out);
  std::vector<std::string> ids;
  for (const auto& f : j["findings"]) {
    for (const char* key : {"id", "severity", "title", "detail", "advice"})
      EXPECT_TRUE(f.contains(key)) << key;
    ids.push_back(f["id"]);
  }
  EXPECT_THAT(ids, ::testing::Contains("integer-factor"));
  EXPECT_THAT(ids, ::testing::Contains("attention-factor-engines"));
  EXPECT_THAT(ids, ::testing::Not(::testing::Contains("truncate-ignored")));
  EXPECT_EQ(j["counts"]["warning"], 0);

  // Findings do not change the exit status.
  const CliRun oss = posenc("doctor " + shared_config("gpt-oss-20b.json"));
  ASSERT_EQ(oss.status, 0) << oss.err;
  EXPECT_THAT(oss.out, HasSubstr("[warning] truncate-ignored"));
  EXPECT_THAT(oss.out, HasSubstr("what to do:"));
  EXPECT_THAT(oss.out, HasSubstr("1 warning"));

  const CliRun missing = posenc("doctor /nonexistent/config.json");
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/config.json"));
}

}  // namespace
