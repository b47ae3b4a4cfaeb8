// End-to-end tests of the posenc command-line tool: exit codes, stdout/stderr discipline, the
// JSON contract of `posenc inspect`, and errors that name the field and the value.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using ::testing::HasSubstr;

struct CliRun {
  int status = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `posenc <args>` with stdout and stderr captured separately.
CliRun posenc(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path() / ("posenc_cli_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cmd = std::string(POSENC_CLI) + " " + args + " >" + (dir / "out").string() + " 2>" +
                          (dir / "err").string();
  CliRun r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
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
  for (const auto& entry : std::filesystem::directory_iterator(std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs")) {
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

TEST(Cli, HfNumericsPrintsFloat32ValuesWidenedExactly) {
  const CliRun r = posenc("inspect " + shared_config("llama-2-7b.json") + " --numerics hf --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& v : j["inv_freq"]) {
    const double x = v.get<double>();
    EXPECT_EQ(static_cast<double>(static_cast<float>(x)), x) << "not a float32 value: " << x;
  }
  // The JSON keeps full precision: the float64 convention gives values no float32 can hold.
  const auto precise = nlohmann::json::parse(posenc("inspect " + shared_config("llama-2-7b.json") + " --json").out);
  int differs = 0;
  for (std::size_t i = 0; i < 64; ++i) differs += precise["inv_freq"][i] != j["inv_freq"][i];
  EXPECT_GT(differs, 32);
}

TEST(Cli, SeqLenSwitchesLongropeFactors) {
  const CliRun short_run = posenc("inspect " + shared_config("phi-3-mini-128k-instruct.json") + " --json");
  const CliRun long_run = posenc("inspect " + shared_config("phi-3-mini-128k-instruct.json") + " --json --seq-len 4097");
  ASSERT_EQ(short_run.status, 0) << short_run.err;
  ASSERT_EQ(long_run.status, 0) << long_run.err;
  const auto a = nlohmann::json::parse(short_run.out);
  const auto b = nlohmann::json::parse(long_run.out);
  // Phi-3 pair 47: short factor 3.05, long factor 64.76 (the published config).
  EXPECT_NEAR(a["inv_freq"][47].get<double>() / b["inv_freq"][47].get<double>(), 64.76000213623047 / 3.049999999999997, 1e-12);
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

}  // namespace
