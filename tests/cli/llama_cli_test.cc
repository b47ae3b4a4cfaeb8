// `posenc eval` and `posenc generate` end to end: the JSON contract, the SVG, errors.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"

namespace {

using posenc_cli::CliRun;
using posenc_cli::slurp;

const std::string kModel =
    std::string(POSENC_SHARED_DIR) + "/models/stories260K/tinystories_260k_v1.bin";
const std::string kPride = std::string(POSENC_SHARED_DIR) + "/data/austen/prideprejudice.txt";

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "posenc_llama_cli_test");
}

std::filesystem::path temp_dir() {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("posenc_llama_cli_test_svg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(EvalCli, JsonTableAndFigure) {
  const std::string svg = (temp_dir() / "eval.svg").string();
  const CliRun r =
      posenc("eval --model " + kModel + " --text " + kPride +
             " --ctx 512,1024 --max-tokens 4096 --method none,yarn --threads 2 --json -o " + svg);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["protocol"], "windows");
  EXPECT_EQ(j["max_tokens"], 4096);
  EXPECT_GT(j["text_tokens"].get<int>(), 100000);
  EXPECT_EQ(j["trained_context"], 512);
  ASSERT_EQ(j["results"].size(), 4u);
  for (const auto& cell : j["results"]) {
    const std::int64_t ctx = cell["ctx"];
    EXPECT_EQ(cell["windows"].get<std::int64_t>(), 4096 / ctx);
    EXPECT_EQ(cell["tokens_scored"].get<std::int64_t>(), 4096 / 2);
    EXPECT_EQ(cell["tokens_run"].get<std::int64_t>(), 4096);
    EXPECT_DOUBLE_EQ(cell["factor"].get<double>(), ctx / 512.0);
    const double p = cell["perplexity"];
    EXPECT_TRUE(std::isfinite(p) && p > 1.0) << cell.dump();
    EXPECT_NEAR(std::log(p), cell["nll"].get<double>(), 1e-9);
    EXPECT_GT(cell["tokens_per_second"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(
        j["table"][cell["method"].get<std::string>()][std::to_string(ctx)].get<double>(), p);
  }
  // s = 1 at ctx 512: yarn is the identity there.
  EXPECT_NEAR(j["table"]["yarn"]["512"].get<double>(), j["table"]["none"]["512"].get<double>(),
              1e-9);
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
  const std::string figure = slurp(svg);
  EXPECT_EQ(figure.rfind("<svg", 0), 0u);
  EXPECT_NE(figure.find("yarn"), std::string::npos);
  EXPECT_NE(figure.find("perplexity"), std::string::npos);
}

TEST(EvalCli, TableAndErrors) {
  CliRun r = posenc("eval --model " + kModel + " --text " + kPride +
                    " --ctx 256 --max-tokens 512 --method ntk");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ntk"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("256"), std::string::npos) << r.out;
  r = posenc("eval --model " + kModel + " --text " + kPride + " --ctx 512 --method rope-magic");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("rope-magic"), std::string::npos) << r.err;
  r = posenc("eval --model " + kPride + " --text " + kPride);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("format version"), std::string::npos) << r.err;
  // Options the chosen methods do not read are refused, naming the methods the registry says
  // read them.
  r = posenc("eval --model " + kModel + " --text " + kPride +
             " --ctx 256 --method ntk --attention-factor 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--attention-factor (1) applies to yarn, yarn-paper, dynamic-yarn and "
                       "longrope, not to --method ntk"),
            std::string::npos)
      << r.err;
  r = posenc("eval --model " + kModel + " --text " + kPride +
             " --ctx 256 --method ntk,yarn --step 64");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--step (64) has no effect"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dynamic"), std::string::npos) << r.err;
  r = posenc("eval --model " + kModel + " --text " + kPride +
             " --ctx 256 --method none --factor 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--factor (2) has no effect on --method none"), std::string::npos) << r.err;
  // "-o -" would mix the SVG into the table on stdout (it used to write a file named "-").
  r = posenc("eval --model " + kModel + " --text " + kPride +
             " --ctx 256 --max-tokens 512 --method ntk -o -");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("-o (-)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists("-"));
}

TEST(GenerateCli, GreedyContinuation) {
  const CliRun r =
      posenc("generate --model " + kModel + " --prompt \"Once upon a time\" --tokens 40");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
  EXPECT_GT(r.out.size(), std::string("Once upon a time").size() + 40) << r.out;
  // Greedy decoding is deterministic.
  EXPECT_EQ(
      r.out,
      posenc("generate --model " + kModel + " --prompt \"Once upon a time\" --tokens 40").out);
}

// --prompt-file and --prompt-tokens start decoding at a chosen position (bench/eval_speed.py
// times decoding at positions 512 and 4096 this way); the timing line on stderr says where.
TEST(GenerateCli, PromptFileAndPromptTokens) {
  const CliRun r = posenc("generate --model " + kModel + " --prompt-file " + kPride +
                          " --prompt-tokens 20 --tokens 5 --threads 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("BOS + prompt, 21 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at positions 21 .. 25"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.rfind("PRIDE AND PREJUDICE", 0), 0u) << r.out;
  // The same prompt given as text: the same continuation.
  const CliRun same = posenc("generate --model " + kModel +
                             " --prompt \"PRIDE AND PREJUDICE\" --tokens 5 --threads 1");
  ASSERT_EQ(same.status, 0) << same.err;
  EXPECT_EQ(same.out, r.out);

  CliRun e = posenc("generate --model " + kModel + " --tokens 3");
  EXPECT_EQ(e.status, 1);
  EXPECT_NE(e.err.find("--prompt TEXT or --prompt-file PATH"), std::string::npos) << e.err;
  e = posenc("generate --model " + kModel + " --prompt Once --prompt-tokens 5 --tokens 3");
  EXPECT_EQ(e.status, 1);
  EXPECT_NE(e.err.find("--prompt-tokens (5) must be at most the prompt's 1 tokens"),
            std::string::npos)
      << e.err;
  e = posenc("generate --model " + kModel + " --prompt-file " + kPride + ".missing --tokens 3");
  EXPECT_EQ(e.status, 1);
  EXPECT_NE(e.err.find("--prompt-file"), std::string::npos) << e.err;
}

}  // namespace
