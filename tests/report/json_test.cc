// report/json.h: the library's --json objects are the tool's output byte for byte (the tool adds
// only the newline), they parse and hold their keys, and bad values are refused by name.
#include "posenc/report/json.h"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/core/numerics.h"
#include "posenc/io/model.h"
#include "posenc/io/npy.h"
#include "support/cli_runner.h"
#include "support/config_test_support.h"
#include "support/error_of.h"
#include "support/shared_data.h"
#include "support/temp_files.h"

namespace posenc {
namespace {

using testing::config_path;
using testing::error_of;
using ::testing::HasSubstr;
using testing::Names;

// Methods: plain (llama-2), llama3, yarn with a correction range (gpt-oss), DeepSeek yarn,
// longrope (phi-3), partial rotary (pythia).
const std::vector<std::string> kConfigs = {"llama-2-7b.json",
                                           "llama-3.1-8b.json",
                                           "gpt-oss-20b.json",
                                           "deepseek-v3.json",
                                           "phi-3-mini-128k-instruct.json",
                                           "pythia-410m.json"};

std::string cli_json(const std::string& args) {
  const posenc_cli::CliRun r = posenc_cli::run(POSENC_CLI, args, "posenc_json_test");
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  return r.out;
}

void expect_keys(const nlohmann::json& j, const std::vector<std::string>& keys,
                 const std::string& what) {
  ASSERT_TRUE(j.is_object()) << what;
  for (const std::string& k : keys) EXPECT_TRUE(j.contains(k)) << what << ": no key " << k;
}

TEST(ReportJson, InspectIsTheCliOutput) {
  for (const std::string& name : kConfigs) {
    const std::string path = config_path(name);
    const ModelConfig config = load_model(path);
    for (const auto& [numerics, seq_len] :
         {std::pair{Numerics::kPrecise, std::int64_t{0}}, std::pair{Numerics::kHf, std::int64_t{0}},
          std::pair{Numerics::kGgml, std::int64_t{0}}}) {
      const std::string args =
          "inspect " + path + " --numerics " + std::string(numerics_name(numerics)) + " --json";
      const std::string lib = inspect_json(config, numerics, seq_len);
      EXPECT_EQ(lib + "\n", cli_json(args)) << args;
      const nlohmann::json j = nlohmann::json::parse(lib);
      expect_keys(j,
                  {"source",
                   "model_type",
                   "rope_type",
                   "numerics",
                   "seq_len",
                   "head_dim",
                   "rotary_dim",
                   "rotary_offset",
                   "layout",
                   "attention_factor",
                   "softmax_scale_multiplier",
                   "rope_theta",
                   "factor",
                   "scale_in_effect",
                   "base_in_effect",
                   "original_max_position_embeddings",
                   "max_position_embeddings",
                   "original_context",
                   "extended_context",
                   "context_assumed",
                   "inv_freq",
                   "freq_factors",
                   "pairs",
                   "axis_rule",
                   "axis_map",
                   "warnings",
                   "ignored_keys",
                   "layer_types"},
                  args);
      EXPECT_EQ(j["source"], config.source);
      EXPECT_EQ(j["numerics"], std::string(numerics_name(numerics)));
      EXPECT_EQ(j["pairs"].size(), j["inv_freq"].size()) << args;
      EXPECT_EQ(j["inv_freq"].size(), static_cast<std::size_t>(config.spec.rotary_dim / 2));
      expect_keys(j["pairs"].at(0),
                  {"index", "inv_freq", "wavelength", "rotations", "interpolation_weight",
                   "ratio_to_unscaled", "treatment", "axis"},
                  args + " pairs[0]");
    }
  }
  // yarn carries its correction range; a length-dependent method its seq_len.
  EXPECT_TRUE(nlohmann::json::parse(
                  inspect_json(load_model(config_path("gpt-oss-20b.json")), Numerics::kPrecise, 0))
                  .contains("correction_range"));
  const std::string phi3 = config_path("phi-3-mini-128k-instruct.json");
  const std::string at_8k = inspect_json(load_model(phi3), Numerics::kHf, 8192);
  EXPECT_EQ(at_8k + "\n", cli_json("inspect " + phi3 + " --numerics hf --seq-len 8192 --json"));
  EXPECT_EQ(nlohmann::json::parse(at_8k)["seq_len"], 8192);
}

TEST(ReportJson, CompareIsTheCliOutput) {
  for (const std::string& name : kConfigs) {
    const std::string path = config_path(name);
    const ModelConfig config = load_model(path);
    for (const auto& [flags, seq_len, positions] :
         {std::tuple{std::string(), std::int64_t{0}, std::vector<std::int64_t>{}},
          std::tuple{std::string(" --positions 0,100 --seq-len 200"), std::int64_t{200},
                     std::vector<std::int64_t>{0, 100}}}) {
      const std::string args = "compare " + path + flags + " --json";
      const std::string lib = compare_json(config, seq_len, positions);
      EXPECT_EQ(lib + "\n", cli_json(args)) << args;
      const nlohmann::json j = nlohmann::json::parse(lib);
      expect_keys(
          j, {"source", "model_type", "rope_type", "seq_len", "positions", "reference", "engines"},
          args);
      EXPECT_EQ(j["seq_len"], seq_len);
      if (!positions.empty()) {
        EXPECT_EQ(j["positions"], positions);
      }
      ASSERT_EQ(j["engines"].size(), 4u) << args;
      for (const nlohmann::json& e : j["engines"]) {
        expect_keys(
            e,
            {"engine", "numerics", "supported", "unsupported_reason", "inv_freq",
             "relative_difference", "rounding_budget", "max_relative_difference", "pairs_differing",
             "attention_factor", "softmax_scale_multiplier", "attention_factor_differs",
             "softmax_scale_differs", "cos_sin_difference", "notes", "verdict", "verdict_text"},
            args);
        EXPECT_EQ(e["cos_sin_difference"].size(), j["positions"].size()) << args;
      }
    }
  }
}

TEST(ReportJson, DoctorIsTheCliOutput) {
  for (const std::string& name : kConfigs) {
    const std::string path = config_path(name);
    const std::string lib = doctor_json(load_model(path));
    EXPECT_EQ(lib + "\n", cli_json("doctor " + path + " --json")) << name;
    const nlohmann::json j = nlohmann::json::parse(lib);
    expect_keys(j, {"source", "model_type", "rope_type", "findings", "counts"}, name);
    ASSERT_FALSE(j["findings"].empty()) << name;  // half-precision-table always fires
    for (const nlohmann::json& f : j["findings"]) {
      expect_keys(f, {"id", "severity", "title", "detail", "advice"}, name);
    }
    const nlohmann::json& n = j["counts"];
    expect_keys(n, {"error", "warning", "info"}, name);
    EXPECT_EQ(n["error"].get<int>() + n["warning"].get<int>() + n["info"].get<int>(),
              static_cast<int>(j["findings"].size()))
        << name;
  }
}

// A GGUF model goes through the same functions (its source and keys differ from config.json's).
TEST(ReportJson, GgufIsTheCliOutput) {
  const std::string path = posenc_test::kStoriesGguf;
  const ModelConfig config = load_model(path);
  EXPECT_EQ(inspect_json(config, Numerics::kGgml, 0) + "\n",
            cli_json("inspect " + path + " --numerics ggml --json"));
  EXPECT_EQ(compare_json(config, 0, {}) + "\n", cli_json("compare " + path + " --json"));
  EXPECT_EQ(doctor_json(config) + "\n", cli_json("doctor " + path + " --json"));
}

TEST(ReportJson, BadValuesAreRefusedByName) {
  const ModelConfig config = load_model(config_path("llama-2-7b.json"));
  EXPECT_THAT(error_of([&] { inspect_json(config, Numerics::kPrecise, -1); }),
              AllOf(Names("seq_len", "-1"), HasSubstr("must not be negative")));
  EXPECT_THAT(error_of([&] { compare_json(config, -5); }),
              AllOf(Names("seq_len", "-5"), HasSubstr("must not be negative")));
  EXPECT_THAT(error_of([&] {
                compare_json(config, 50, {0, 100});
              }),
              AllOf(Names("seq_len", "50"), HasSubstr("largest of positions (100)")));
  EXPECT_THAT(error_of([&] { compare_json(config, 100, {100}); }), Names("seq_len", "100"));
  EXPECT_THAT(error_of([&] { compare_json(config, 0, {7, -2}); }), Names("position", "-2"));
  EXPECT_EQ(error_of([&] { compare_json(config, 101, {0, 100}); }), "(no error)");
  EXPECT_EQ(error_of([&] { compare_json(config, 0, {0, 100}); }), "(no error)");
  // The tool keeps naming its flags.
  const posenc_cli::CliRun r = posenc_cli::run(
      POSENC_CLI, "compare " + config_path("llama-2-7b.json") + " --positions 0,100 --seq-len 50",
      "posenc_json_test");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.err, HasSubstr("--seq-len (50) must exceed the largest of --positions (100)"));
}

// Text that is not UTF-8 (a file name, a GGUF string) is written with U+FFFD in its place, not
// refused by the JSON writer as an internal error.
TEST(ReportJson, NonUtf8TextIsReplaced) {
  ModelConfig config = load_model(config_path("llama-2-7b.json"));
  config.source = "m\xff.json";
  config.warnings.push_back("w\xfe");
  for (const std::string& text :
       {error_of([&] { inspect_json(config, Numerics::kPrecise, 0); }),
        error_of([&] { compare_json(config); }), error_of([&] { doctor_json(config); })}) {
    EXPECT_EQ(text, "(no error)");
  }
  EXPECT_EQ(nlohmann::json::parse(inspect_json(config, Numerics::kPrecise, 0))["source"],
            "m\xef\xbf\xbd.json");
  EXPECT_EQ(nlohmann::json::parse(doctor_json(config))["source"], "m\xef\xbf\xbd.json");

  // The tool: a config and a tensor whose file names are not UTF-8.
  std::ifstream in(config_path("llama-2-7b.json"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = posenc_test::write_temp_file("posenc_json_test", "m\xff.json", bytes);
  for (const std::string command : {"inspect", "compare", "doctor"}) {
    const posenc_cli::CliRun r =
        posenc_cli::run(POSENC_CLI, command + " '" + path + "' --json", "posenc_json_test");
    EXPECT_EQ(r.status, 0) << command << ": " << r.err;
    EXPECT_THAT(nlohmann::json::parse(r.out)["source"].get<std::string>(),
                HasSubstr("m\xef\xbf\xbd.json"))
        << command;
  }
  const std::string q = (posenc_test::temp_dir("posenc_json_test") / "q\xff.npy").string();
  write_npy(q, "<f4", std::vector<std::int64_t>{4, 2, 64}, std::vector<std::byte>(4 * 512));
  const std::string out = (posenc_test::temp_dir("posenc_json_test") / "o\xff.npy").string();
  const posenc_cli::CliRun r = posenc_cli::run(
      POSENC_CLI, "apply --q '" + q + "' --positions-range 4 --json -o '" + out + "'",
      "posenc_json_test");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("o\xef\xbf\xbd.npy"));
}

}  // namespace
}  // namespace posenc
