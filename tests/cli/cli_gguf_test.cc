// Every command on a GGUF file computes what llama.cpp computes for it: the rope_freqs tensor
// (Llama 3 scaling, precomputed by convert_hf_to_gguf.py) divides the frequencies in inspect,
// compare, doctor and apply alike; the contexts follow one rule everywhere.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/core/frequencies.h"
#include "posenc/core/ggml.h"
#include "posenc/io/config.h"
#include "posenc/io/npy.h"
#include "support/cli_runner.h"
#include "support/gguf_writer.h"
#include "support/temp_files.h"

namespace {

using posenc_cli::CliRun;
using ::testing::Contains;
using ::testing::HasSubstr;

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "posenc_cli_gguf_test");
}

std::filesystem::path temp(const std::string& name) {
  return posenc_test::temp_dir("posenc_cli_gguf") / name;
}

std::string llama31_config() {
  return std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs/llama-3.1-8b.json";
}

// Llama 3.1 8B as convert_hf_to_gguf.py writes it: no scaling keys, the llama3 scaling as the
// rope_freqs tensor (the factors posenc's own llama3 mapping computes, which a test of
// gguf_test.cc holds against the converter's formula).
std::string llama31_gguf() {
  const posenc::ModelConfig hf = posenc::load_hf_config(llama31_config());
  const std::vector<float> factors = posenc::ggml_params_from_spec(hf.spec).freq_factors;
  const auto path = temp("llama-3.1-8b.gguf");
  const std::vector<std::uint8_t> bytes = posenc::testing::llama31_8b_gguf(factors).bytes();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

std::vector<double> inv_freq_of(const std::string& args) {
  const CliRun r = posenc("inspect " + args + " --json");
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out)["inv_freq"].get<std::vector<double>>();
}

TEST(CliGguf, InspectDividesByRopeFreqsInEveryNumerics) {
  const std::string gguf = llama31_gguf();
  const posenc::RopeSpec llama3 = posenc::load_hf_config(llama31_config()).spec;
  // ggml: exactly llama.cpp's angles for the llama3 model (before: plain RoPE).
  EXPECT_EQ(inv_freq_of(gguf + " --numerics ggml"),
            posenc::compute_frequencies(llama3, posenc::Numerics::kGgml).inv_freq);
  // precise and hf: the same frequencies as the HF llama3 config, up to the float32 factors.
  for (const char* numerics : {"precise", "hf"}) {
    const std::vector<double> got = inv_freq_of(gguf + " --numerics " + numerics);
    const std::vector<double> want =
        posenc::compute_frequencies(llama3, posenc::Numerics::kPrecise).inv_freq;
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << numerics << " " << i;
  }
  const CliRun table = posenc("inspect " + gguf);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("freq_factors              64 divisors, 1 .. 8"));
  EXPECT_THAT(table.out, HasSubstr("warnings: none"));
}

TEST(CliGguf, CompareAndDoctorModelLlamaCppWithRopeFreqs) {
  const std::string gguf = llama31_gguf();
  const posenc::RopeSpec llama3 = posenc::load_hf_config(llama31_config()).spec;
  const CliRun r = posenc("compare " + gguf + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& e : j["engines"]) by_name[e["engine"].get<std::string>()] = e;
  EXPECT_EQ(by_name["llama.cpp"]["inv_freq"].get<std::vector<double>>(),
            posenc::compute_frequencies(llama3, posenc::Numerics::kGgml).inv_freq);
  for (const auto& [name, e] : by_name) EXPECT_EQ(e["verdict"], "agrees") << name;
  // The lowest frequency really is divided by 8 in the llama.cpp column (ggml's float32 running
  // product of 63 steps drifts by about 63 * 2^-24 = 4e-6 relative).
  const double plain63 = std::pow(500000.0, -126.0 / 128.0);
  EXPECT_NEAR(by_name["llama.cpp"]["inv_freq"][63].get<double>(), plain63 / 8, 1e-5 * plain63 / 8);

  const CliRun d = posenc("doctor " + gguf + " --json");
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(nlohmann::json::parse(d.out)["counts"]["error"], 0);
}

TEST(CliGguf, ApplyGgmlOnTheFileRotatesAsTheLlama3Config) {
  const std::string gguf = llama31_gguf();
  std::mt19937 rng(5);
  std::normal_distribution<float> g;
  std::vector<float> q(3 * 2 * 128);
  for (float& x : q) x = g(rng);
  posenc::write_npy(temp("q.npy"), "<f4", std::vector<std::int64_t>{3, 2, 128},
                    std::as_bytes(std::span(q)));
  const std::string common =
      " --numerics ggml --q " + temp("q.npy").string() + " --positions-range 100000";
  const CliRun a = posenc("apply " + gguf + common + " -o " + temp("from_gguf.npy").string());
  // The GGUF's llama architecture is LLAMA_ROPE_TYPE_NORM (the converter permutes the weights),
  // so the HF config is rotated with interleaved pairs to match.
  const CliRun b = posenc("apply " + llama31_config() + common + " --layout interleaved -o " +
                          temp("from_config.npy").string());
  // Without the divisors: plain RoPE at the same base (what every command computed before).
  const CliRun plain = posenc("apply --q " + temp("q.npy").string() +
                              " --positions-range 100000 --n-dims 128 "
                              "--mode normal --freq-base 500000 -o " +
                              temp("plain.npy").string());
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(posenc_cli::slurp(temp("from_gguf.npy")), posenc_cli::slurp(temp("from_config.npy")));
  EXPECT_NE(posenc_cli::slurp(temp("from_gguf.npy")), posenc_cli::slurp(temp("plain.npy")));
}

TEST(CliGguf, Phi3OriginalContextIsShown) {
  const CliRun r =
      posenc("inspect " + std::string(POSENC_SHARED_DIR) + "/testdata/gguf/ggml-vocab-phi-3.gguf");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("original context          4096\n"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("not set")));
}

// A config without max_position_embeddings (or an original context): inspect, compare and doctor
// all work at kAssumedContext (4096) and say so.
TEST(CliGguf, OneContextRuleWhenTheConfigHasNone) {
  const auto path = temp("no-context.json");
  std::ofstream(path)
      << R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32})";
  const CliRun i = posenc("inspect " + path.string() + " --json");
  ASSERT_EQ(i.status, 0) << i.err;
  const auto ij = nlohmann::json::parse(i.out);
  EXPECT_EQ(ij["original_context"], 4096);
  EXPECT_EQ(ij["extended_context"], 4096);
  EXPECT_EQ(ij["context_assumed"], true);
  const CliRun table = posenc("inspect " + path.string());
  EXPECT_THAT(table.out, HasSubstr("original context          4096   (assumed"));
  const CliRun c = posenc("compare " + path.string() + " --json");
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["positions"],
            nlohmann::json({4095, 4096, 16384}));  // L-1, L, 4L
  const CliRun d = posenc("doctor " + path.string() + " --json");
  ASSERT_EQ(d.status, 0) << d.err;
  std::vector<std::string> titles;
  const auto dj = nlohmann::json::parse(d.out);  // kept alive: the loop ranges over a member
  for (const auto& f : dj["findings"])
    titles.push_back(f["id"].get<std::string>() + ": " + f["title"].get<std::string>());
  EXPECT_THAT(
      titles,
      Contains("assumed-context: the config states no context: posenc assumes 4096 tokens"));
  EXPECT_THAT(
      titles,
      Contains(HasSubstr(
          "half-precision-table: cos/sin kept in fp16/bf16 near the extended context (4096)")));
}

}  // namespace
