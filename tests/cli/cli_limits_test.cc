// Bounded resources (issue 9) through the tool: file options given a directory, a missing file
// or the wrong kind of file; eval runs that would compute nothing; sizes past their limits. Each
// is a one-line error naming the option and a non-zero exit, never "internal error".
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cli_expect.h"
#include "support/cli_runner.h"
#include "support/shared_data.h"
#include "support/temp_files.h"

namespace {

using posenc_cli::CliRun;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string& kModel = posenc_test::kStoriesModel;
const std::string& kGguf = posenc_test::kStoriesGguf;
const std::string& kConfig = posenc_test::kLlama2Config;
const std::string& kPride = posenc_test::kPrideAndPrejudice;

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "posenc_cli_limits_test");
}

std::filesystem::path temp_dir() { return posenc_test::temp_dir("posenc_cli_limits_test_files"); }

std::string write_file(const std::string& name, const std::string& bytes) {
  return posenc_test::write_temp_file("posenc_cli_limits_test_files", name, bytes);
}

// Status 1 and a "posenc: error:" line containing every piece.
void expect_error(const CliRun& r, const std::vector<std::string>& pieces,
                  const std::string& args) {
  posenc_cli::expect_refused(r, pieces, args);
}

void expect_error(const std::string& args, const std::vector<std::string>& pieces) {
  expect_error(posenc(args), pieces, args);
}

TEST(CliFiles, DevZeroIsRefusedAtOnce) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_error("inspect /dev/zero", {"/dev/zero", "not a config.json"});
  expect_error("eval --model /dev/zero --text " + kPride,
               {"--model", "/dev/zero", "format version"});
  expect_error("eval --model " + kModel + " --text /dev/zero",
               {"--text", "/dev/zero", "more than 64 MiB"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST(CliFiles, DirectoriesAndMissingFilesNameTheOptionThePathAndTheReason) {
  const std::string dir = temp_dir().string();
  const std::string missing = dir + "/missing.bin";
  for (const auto& [args, pieces] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"eval --model " + dir + " --text " + kPride, {"--model", dir, "Is a directory"}},
           {"eval --model " + kModel + " --text " + dir, {"--text", dir, "Is a directory"}},
           {"eval --model " + missing + " --text " + kPride, {"--model", missing, "No such file"}},
           {"eval --model " + kModel + " --text " + missing, {"--text", missing, "No such file"}},
           {"generate --model " + dir + " --prompt Once", {"--model", dir, "Is a directory"}},
           {"generate --model " + missing + " --prompt Once", {"--model", missing, "No such file"}},
           {"inspect " + dir, {dir, "Is a directory"}},
           {"inspect " + missing, {missing, "No such file"}},
           {"inspect " + dir + "/x.gguf", {dir + "/x.gguf", "No such file"}},
           {"apply --q " + dir + " -o " + dir + "/out.npy --positions-range 0",
            {"--q", dir, "Is a directory"}},
       }) {
    expect_error(args, pieces);
  }
}

TEST(CliFiles, EvalSaysWhatAForeignModelFileIsAndWhatItReads) {
  const std::string npy =
      write_file("q.npy", std::string("\x93NUMPY\x01\x00", 8) + std::string(100, ' '));
  for (const auto& [path, looks] :
       std::vector<std::pair<std::string, std::string>>{{kGguf, "this is a GGUF file"},
                                                        {kConfig, "this is JSON text"},
                                                        {npy, "this is a NumPy .npy file"}}) {
    expect_error("eval --model " + path + " --text " + kPride,
                 {"--model", path, looks, "llama2.c / llama2.ts v1 model file", "stories260K"});
    expect_error("generate --model " + path + " --prompt Once", {"--model", looks});
  }
}

// --- eval: nothing computed is an error -------------------------------------------------------

TEST(CliEval, RefusesUpFrontWhatWouldScoreNothing) {
  const std::string empty = write_file("empty.txt", "");
  const std::string short_text = write_file("short.txt", "Once upon a time there was a cat.\n");
  expect_error("eval --model " + kModel + " --text " + empty + " --ctx 64",
               {"--text", empty, "no tokens"});
  expect_error("eval --model " + kModel + " --text " + short_text + " --ctx 512",
               {"--ctx 512 needs 512 tokens", short_text, "has 11 tokens"});
  expect_error("eval --model " + kModel + " --text " + kPride + " --ctx 256 --max-tokens 0",
               {"--max-tokens (0) must be at least the largest --ctx (256)"});
  expect_error("eval --model " + kModel + " --text " + kPride + " --ctx 256,512 --max-tokens 300",
               {"--max-tokens (300)", "--ctx (512)"});
  expect_error(
      "eval --model " + kModel + " --text " + kPride + " --ctx 256 --stride 64 --max-tokens 0",
      {"--max-tokens (0) must be at least 1"});
  expect_error("eval --model " + kModel + " --text " + kPride + " --ctx 1000000000",
               {"--ctx (1000000000) must be at most 3355443"});
}

TEST(CliEval, NonFinitePerplexityIsShownAsSuchAndFails) {
  const std::string args =
      "eval --model " + kModel + " --text " + kPride +
      " --ctx 64 --max-tokens 64 --method yarn --factor 2 --attention-factor 1e30 --threads 1";
  CliRun r = posenc(args);
  expect_error(r, {"no finite perplexity", "yarn at ctx 64", "nan"}, args);
  EXPECT_THAT(r.out, AllOf(HasSubstr(" nan\n"), Not(HasSubstr(" -\n")), Not(HasSubstr("-nan"))))
      << r.out;
  EXPECT_THAT(r.err, Not(HasSubstr("-nan")));
  r = posenc(args + " --json");
  expect_error(r, {"no finite perplexity"}, args + " --json");
  const auto j = nlohmann::json::parse(r.out);
  // (--attention-factor is refused beside a method without one, so yarn runs alone.)
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_TRUE(j["results"][0]["perplexity"].is_null());
  EXPECT_THAT(j["results"][0]["reason"].get<std::string>(), HasSubstr("perplexity is nan"));
  // A finite run has no reason.
  const std::string finite = "eval --model " + kModel + " --text " + kPride +
                             " --ctx 64 --max-tokens 64 --method none --threads 1 --json";
  const CliRun ok = posenc(finite);
  ASSERT_EQ(ok.status, 0) << ok.err;
  const auto fj = nlohmann::json::parse(ok.out);
  EXPECT_TRUE(fj["results"][0]["perplexity"].is_number());
  EXPECT_TRUE(fj["results"][0]["reason"].is_null());
}

// --- sizes past their limits, and the limits in --help -------------------------------------

TEST(CliLimits, GenerateTokensIsBoundedByTheKvCache) {
  expect_error("generate --model " + kModel + " --prompt Once --tokens 1000000000",
               {"--tokens (1000000000) must be at most 3355441", "3355443 positions"});
  expect_error("generate --model " + kModel + " --prompt Once --tokens 9223372036854775807",
               {"--tokens (9223372036854775807) must be at most"});
  EXPECT_THAT(posenc("generate --help").out, HasSubstr("3355443"));
}

TEST(CliLimits, VerifyPositionsAndWidthAreBounded) {
  expect_error("verify --positions 100000", {"positions (100000)", "2048"});
  expect_error("verify --d-model 16384", {"d_model (16384)", "1024"});
  expect_error("verify --positions 2048 --d-model 1024",
               {"positions * d_model (2048 * 1024)", "1048576"});
  const CliRun help = posenc("verify --help");
  EXPECT_THAT(help.out, AllOf(HasSubstr("2 to 2048"), HasSubstr("4 to 1024"), HasSubstr("1048576")))
      << help.out;
}

TEST(CliLimits, SimilarityPlotIsBounded) {
  expect_error("plot similarity --positions 4096 -o -", {"positions (4096)", "at most 1000"});
  EXPECT_THAT(posenc("plot --help").out, HasSubstr("similarity: 1000"));
}

TEST(CliLimits, DecayPlotAndReportRefuseTheWidestHeads) {
  const std::string wide = write_file(
      "wide.json", R"({"model_type": "llama", "hidden_size": 65536, "num_attention_heads": 1,
                       "max_position_embeddings": 4096, "rope_theta": 10000.0})");
  const auto t0 = std::chrono::steady_clock::now();
  expect_error("plot decay " + wide + " -o -",
               {"decay figure", "32768 pairs", "at most 2048 pairs"});
  expect_error("report " + wide + " -o -", {"report", "32768 pairs", "at most 2048 pairs"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_THAT(posenc("report --help").out, HasSubstr("2048 rotated pairs"));
  EXPECT_THAT(posenc("plot --help").out, HasSubstr("2048 rotated pairs"));
}

}  // namespace
