// `posenc eval` and `posenc generate` read the RoPE a model was fine-tuned with from M.json beside
// M.bin (cli/model_rope_sidecar.h, written by `python3 -m posenc.finetune`); --method overrides.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"
#include "support/shared_data.h"
#include "support/temp_files.h"

namespace {

using posenc_cli::CliRun;
using posenc_cli::slurp;

const std::string& kModel = posenc_test::kStoriesModel;
const std::string& kPride = posenc_test::kPrideAndPrejudice;
constexpr const char* kTag = "posenc_rope_sidecar_cli_test";

CliRun posenc(const std::string& args) { return posenc_cli::run(POSENC_CLI, args, kTag); }

// A copy of stories260K as NAME.bin with `sidecar` as NAME.json beside it.
std::string model_with_sidecar(const std::string& name, const std::string& sidecar) {
  const std::string bin = posenc_test::write_temp_file(kTag, name + ".bin", slurp(kModel));
  posenc_test::write_temp_file(kTag, name + ".json", sidecar);
  return bin;
}

const char* kYarn4 =
    R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "factor": 4, "attention_factor": 1,
        "trained_context": 2048, "fine_tune": {"steps": 3}})";

nlohmann::json eval_json(const std::string& model, const std::string& flags) {
  const CliRun r = posenc("eval --model " + model + " --text " + kPride +
                          " --ctx 512,1024 --max-tokens 2048 --threads 1 --json " + flags);
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

TEST(RopeSidecarCli, EvalUsesTheSidecarWithoutFlags) {
  const std::string model = model_with_sidecar("yarn4", kYarn4);
  const CliRun r = posenc("eval --model " + model + " --text " + kPride +
                          " --ctx 512,1024 --max-tokens 2048 --threads 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("yarn4.json"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["methods"], nlohmann::json::array({"yarn"}));
  EXPECT_EQ(j["factor"], 4.0);
  EXPECT_EQ(j["attention_factor"], 1.0);
  for (const auto& cell : j["results"]) EXPECT_EQ(cell["factor"], 4.0) << cell.dump();
  // The same numbers as the flags give on the plain model.
  const auto flags = eval_json(kModel, "--method yarn --factor 4 --attention-factor 1");
  EXPECT_EQ(j["table"], flags["table"]);
  // And not those of eval's defaults (s = ctx / 512): the sidecar changed something.
  const auto plain = eval_json(kModel, "--method yarn");
  EXPECT_NE(j["table"]["yarn"]["512"], plain["table"]["yarn"]["512"]);
}

// Every method parameter of the sidecar reaches eval, as its flag would, and changes the numbers.
TEST(RopeSidecarCli, EvalUsesItsMethodParameters) {
  const std::string model = model_with_sidecar(
      "yarn4p", R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "factor": 4,
                    "attention_factor": null, "beta_fast": 4, "beta_slow": 0.5,
                    "mscale": null, "mscale_all_dim": null, "extrapolation_factor": 0.5,
                    "truncate": false, "low_freq_factor": null, "high_freq_factor": null,
                    "trained_context": 2048})");
  const CliRun r = posenc("eval --model " + model + " --text " + kPride +
                          " --ctx 512,1024 --max-tokens 2048 --threads 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("--beta-fast 4 --beta-slow 0.5 --extrapolation-factor 0.5 --truncate false"),
            std::string::npos)
      << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["method_params"], nlohmann::json::parse(R"({"beta_fast": 4.0, "beta_slow": 0.5,
                                                         "extrapolation_factor": 0.5,
                                                         "truncate": false})"));
  const auto flags = eval_json(kModel,
                               "--method yarn --factor 4 --beta-fast 4 --beta-slow 0.5 "
                               "--extrapolation-factor 0.5 --truncate false");
  EXPECT_EQ(j["table"], flags["table"]);
  const auto plain = eval_json(kModel, "--method yarn --factor 4");
  EXPECT_NE(j["table"]["yarn"]["1024"], plain["table"]["yarn"]["1024"]);
  // A flag overrides one parameter and keeps the others.
  const auto over = eval_json(model, "--beta-fast 8");
  EXPECT_EQ(over["method_params"]["beta_fast"], 8.0);
  EXPECT_EQ(over["method_params"]["truncate"], false);

  // llama3's two factors.
  const std::string l3 = model_with_sidecar(
      "llama3p", R"({"format": "posenc-rope-sidecar/1", "method": "llama3", "factor": 4,
                     "low_freq_factor": 0.5, "high_freq_factor": 8})");
  EXPECT_EQ(
      eval_json(l3, "")["table"],
      eval_json(kModel,
                "--method llama3 --factor 4 --low-freq-factor 0.5 --high-freq-factor 8")["table"]);
  EXPECT_NE(eval_json(l3, "")["table"], eval_json(kModel, "--method llama3 --factor 4")["table"]);
}

TEST(RopeSidecarCli, EvalAndGenerateRefuseParametersTheMethodDoesNotRead) {
  CliRun r = posenc("eval --model " + kModel + " --text " + kPride +
                    " --ctx 512 --method yarn,linear,ntk --beta-fast 8");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--beta-fast (8) applies to yarn, yarn-paper and dynamic-yarn, not to "
                       "--method linear, ntk"),
            std::string::npos)
      << r.err;
  r = posenc("eval --model " + kModel + " --text " + kPride +
             " --ctx 512 --method yarn --beta-fast 1 --beta-slow 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("beta_fast (1) must be greater than beta_slow (2)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(with --beta-fast 1 --beta-slow 2)"), std::string::npos) << r.err;
  r = posenc("generate --model " + kModel + " --prompt Once --tokens 2 --low-freq-factor 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--low-freq-factor (2) applies to llama3, not to --method none"),
            std::string::npos)
      << r.err;
  r = posenc("generate --model " + kModel + " --prompt Once --tokens 2 --truncate maybe");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--truncate"), std::string::npos) << r.err;
}

TEST(RopeSidecarCli, FlagsOverrideIt) {
  const std::string model = model_with_sidecar("yarn4b", kYarn4);
  // --method replaces the sidecar's method and its factors.
  auto j = eval_json(model, "--method none");
  EXPECT_EQ(j["methods"], nlohmann::json::array({"none"}));
  EXPECT_TRUE(j["attention_factor"].is_null());
  // --factor and --attention-factor replace one setting each.
  j = eval_json(model, "--factor 2");
  EXPECT_EQ(j["methods"], nlohmann::json::array({"yarn"}));
  EXPECT_EQ(j["factor"], 2.0);
  EXPECT_EQ(j["attention_factor"], 1.0);
  j = eval_json(model, "--attention-factor 1.5");
  EXPECT_EQ(j["factor"], 4.0);
  EXPECT_EQ(j["attention_factor"], 1.5);
}

TEST(RopeSidecarCli, GenerateUsesIt) {
  // An attention factor of 3 (q.k times 9) changes even a short greedy continuation.
  const std::string model = model_with_sidecar(
      "yarn4g", R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "factor": 4,
                    "attention_factor": 3})");
  const std::string args = " --prompt Once --tokens 40 --threads 1";
  const CliRun side = posenc("generate --model " + model + args);
  ASSERT_EQ(side.status, 0) << side.err;
  EXPECT_NE(side.err.find("--method yarn --factor 4 --attention-factor 3"), std::string::npos)
      << side.err;
  const CliRun plain = posenc("generate --model " + kModel + args + " --method yarn --factor 4");
  const CliRun over = posenc("generate --model " + model + args + " --method none");
  const CliRun none = posenc("generate --model " + kModel + args);
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_NE(side.out, plain.out);
  EXPECT_NE(side.out, none.out);
  EXPECT_EQ(over.out, none.out);
}

TEST(RopeSidecarCli, BadSidecarsAreRefused) {
  struct Case {
    const char* json;
    const char* expect;
  } cases[] = {
      {R"({"format": "posenc-rope-sidecar/1", "method": "rope-magic"})", "rope-magic"},
      {R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "factor": -2})",
       "\"factor\" (-2) must be positive"},
      {R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "factor": "4"})",
       "must be a number or null"},
      {R"({"format": "posenc-rope-sidecar/1", "method": "none", "factor": 4})",
       "no effect on method none"},
      {R"({"format": "posenc-rope-sidecar/1", "method": "ntk", "attention_factor": 2})",
       "\"attention_factor\" (2) applies to yarn, yarn-paper, dynamic-yarn and longrope, not to "
       "method ntk"},
      {R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "scale": 4})",
       "unknown key \"scale\""},
      {R"({"format": "posenc-rope-sidecar/1", "method": "linear", "beta_fast": 16})",
       "\"beta_fast\" (16) applies to yarn, yarn-paper and dynamic-yarn, not to method linear"},
      {R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "truncate": 0})",
       "\"truncate\" (0) must be true, false or null"},
      {R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "beta_slow": "1"})",
       "\"beta_slow\" (\"1\") must be a number or null"},
      // Checked with the model: the sidecar's own values, named as its keys.
      {R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "beta_fast": 1, "beta_slow": 2})",
       "beta_fast (1) must be greater than beta_slow (2)"},
      {R"({"method": "yarn"})", "\"format\" (missing)"},
      {R"({"format": "posenc-rope-sidecar/1"})", "\"method\" (missing)"},
      {R"({"format": "posenc-rope-sidecar/1", "method": "yarn", "trained_context": 1.5})",
       "\"trained_context\" (1.5)"},
      {R"([1, 2])", "expected a JSON object"},
      {R"({"format": )", "not JSON"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string model = model_with_sidecar("bad" + std::to_string(i++), c.json);
    CliRun r = posenc("eval --model " + model + " --text " + kPride + " --ctx 512");
    EXPECT_EQ(r.status, 1) << c.json;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.json << "\n" << r.err;
    EXPECT_NE(r.err.find("--model: RoPE sidecar"), std::string::npos) << r.err;
    r = posenc("generate --model " + model + " --prompt Once --tokens 2");
    EXPECT_EQ(r.status, 1) << c.json;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.json << "\n" << r.err;
    // --method overrides the sidecar, which is then not read at all.
    r = posenc("generate --model " + model + " --prompt Once --tokens 2 --method none");
    EXPECT_EQ(r.status, 0) << c.json << "\n" << r.err;
  }
}

}  // namespace
