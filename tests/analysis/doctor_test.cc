// posenc/analysis/doctor.h: each finding fires on a config built to trigger it, and not on a clean
// one. The configs are small config.json texts (transformers' keys) or the published ones in
// ../shared/testdata/hf-configs; the numbers a finding quotes are checked where they are derived
// by hand (truncate's pairs, the extended context).
#include "posenc/analysis/doctor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/io/config.h"

namespace posenc {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

ModelConfig shared(std::string_view file) {
  return load_hf_config(std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs/" +
                        std::string(file));
}

// A Llama-shaped config.json with `extra` keys spliced in (each ending in a comma).
ModelConfig llama_with(const std::string& extra) {
  return parse_hf_config("{" + extra +
                         R"("model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                            "max_position_embeddings": 4096})");
}

std::vector<std::string> ids(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const Finding& f : findings) out.push_back(f.id);
  return out;
}

const Finding& find(const std::vector<Finding>& findings, std::string_view id) {
  const auto it =
      std::find_if(findings.begin(), findings.end(), [&](const Finding& f) { return f.id == id; });
  if (it == findings.end()) throw std::runtime_error("no finding " + std::string(id));
  return *it;
}

// Every finding is complete: an id, a known severity, and all three texts.
void expect_well_formed(const std::vector<Finding>& findings) {
  for (const Finding& f : findings) {
    EXPECT_FALSE(f.id.empty());
    EXPECT_TRUE(f.severity == "error" || f.severity == "warning" || f.severity == "info")
        << f.severity;
    EXPECT_FALSE(f.title.empty()) << f.id;
    EXPECT_FALSE(f.detail.empty()) << f.id;
    EXPECT_FALSE(f.advice.empty()) << f.id;
  }
}

TEST(Doctor, CleanConfigHasOnlyTheUniversalNote) {
  // Llama 2: plain RoPE, every dim rotated, nothing any engine reads differently.
  const std::vector<Finding> f = diagnose(shared("llama-2-7b.json"));
  expect_well_formed(f);
  EXPECT_THAT(ids(f), UnorderedElementsAreArray({"half-precision-table"}));
  EXPECT_EQ(find(f, "half-precision-table").severity, "info");
  const std::vector<Finding> l31 = diagnose(shared("llama-3.1-8b.json"));
  EXPECT_THAT(ids(l31), UnorderedElementsAreArray({"half-precision-table"}));
}

TEST(Doctor, IntegerFactor) {
  // DeepSeek-V3 writes "factor": 40; transformers warns that it should be a float.
  const std::vector<Finding> f = diagnose(shared("deepseek-v3.json"));
  expect_well_formed(f);
  const Finding& x = find(f, "integer-factor");
  EXPECT_EQ(x.severity, "info");
  EXPECT_THAT(x.title, HasSubstr("(40)"));
  EXPECT_THAT(x.advice, HasSubstr("40.0"));
  const ModelConfig as_float = llama_with(
      R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},)");
  EXPECT_THAT(ids(diagnose(as_float)), ::testing::Not(::testing::Contains("integer-factor")));
}

TEST(Doctor, FactorMismatch) {
  // factor 2 but 4096 / 1024 = 4.
  const std::vector<Finding> f = diagnose(llama_with(
      R"("rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 1024},)"));
  const Finding& x = find(f, "factor-mismatch");
  EXPECT_EQ(x.severity, "warning");
  EXPECT_THAT(x.title, HasSubstr("factor (2) disagrees"));
  // Qwen2.5's recipe: max_position_embeddings left at the original 32768, factor 4.
  const std::vector<Finding> qwen = diagnose(shared("qwen2.5-7b-instruct-yarn.json"));
  const Finding& q = find(qwen, "factor-mismatch");
  EXPECT_THAT(q.title, HasSubstr("extended context (131072)"));
  EXPECT_THAT(q.advice, HasSubstr("max_position_embeddings to 131072"));
  // Consistent: 4096 / 1024 = 4.
  EXPECT_THAT(
      ids(diagnose(llama_with(
          R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},)"))),
      ::testing::Not(::testing::Contains("factor-mismatch")));
}

TEST(Doctor, MissingOriginalContext) {
  const std::vector<Finding> f =
      diagnose(llama_with(R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0},)"));
  const Finding& x = find(f, "missing-original-context");
  EXPECT_EQ(x.severity, "warning");
  EXPECT_THAT(x.detail, HasSubstr("max_position_embeddings (4096)"));
  EXPECT_THAT(ids(diagnose(shared("gpt-oss-20b.json"))),
              ::testing::Not(::testing::Contains("missing-original-context")));
}

TEST(Doctor, AttentionFactorAcrossEngines) {
  // An explicit attention_factor in a Llama: llama.cpp and vLLM replace it with 0.1 ln 4 + 1.
  const std::vector<Finding> f = diagnose(llama_with(
      R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
                          "attention_factor": 1.0},)"));
  const Finding& x = find(f, "attention-factor-engines");
  EXPECT_EQ(x.severity, "warning");
  EXPECT_THAT(x.detail, HasSubstr("transformers attention factor 1,"));
  EXPECT_THAT(x.detail, HasSubstr("vllm attention factor 1.138629"));
  EXPECT_THAT(x.detail, HasSubstr("llama.cpp attention factor 1.138629"));
  // DeepSeek-V3: mscale keys set, every engine at 1 with the same softmax multiplier: info.
  const std::vector<Finding> ds = diagnose(shared("deepseek-v3.json"));
  const Finding& d = find(ds, "attention-factor-engines");
  EXPECT_EQ(d.severity, "info");
  EXPECT_THAT(d.detail, HasSubstr("softmax multiplier 1.87385"));
  // No keys, no disagreement: nothing to say.
  EXPECT_THAT(ids(diagnose(shared("qwen2.5-7b-instruct-yarn.json"))),
              ::testing::Not(::testing::Contains("attention-factor-engines")));
}

TEST(Doctor, TruncateIgnored) {
  const std::vector<Finding> f = diagnose(shared("gpt-oss-20b.json"));
  const Finding& x = find(f, "truncate-ignored");
  EXPECT_EQ(x.severity, "warning");
  // 8.0928 .. 17.398 against 8 .. 18: pairs 9 to 17.
  EXPECT_THAT(x.title, HasSubstr("(9 pairs get other frequencies)"));
  EXPECT_THAT(x.detail, HasSubstr("changes pairs 9 to 17 (9 pairs)"));
  EXPECT_THAT(x.detail, HasSubstr("PR 28244"));
  EXPECT_THAT(ids(diagnose(shared("qwen2.5-7b-instruct-yarn.json"))),
              ::testing::Not(::testing::Contains("truncate-ignored")));
}

TEST(Doctor, PartialRotary) {
  // Pythia: rotary_pct 0.25 of a 64-dim head.
  const std::vector<Finding> pythia = diagnose(shared("pythia-410m.json"));
  const Finding& x = find(pythia, "partial-rotary");
  EXPECT_EQ(x.severity, "info");
  EXPECT_THAT(x.title, HasSubstr("only 16 of 64 head dims"));
  // A Llama with partial_rotary_factor: transformers' Llama ignores it, vLLM's get_rope applies it.
  const std::vector<Finding> f = diagnose(llama_with(R"("partial_rotary_factor": 0.5,)"));
  const Finding& y = find(f, "partial-rotary");
  EXPECT_EQ(y.severity, "warning");
  EXPECT_THAT(y.detail, HasSubstr("= 64 dims"));
}

TEST(Doctor, DynamicUnderKvCache) {
  const std::vector<Finding> f =
      diagnose(llama_with(R"("rope_scaling": {"rope_type": "dynamic", "factor": 2.0},)"));
  const Finding& x = find(f, "dynamic-kv-cache");
  EXPECT_EQ(x.severity, "warning");
  EXPECT_THAT(x.detail, HasSubstr("once seq_len exceeds 4096"));
  EXPECT_THAT(x.detail, HasSubstr("key at position 4095"));
  EXPECT_THAT(x.advice, HasSubstr("posenc::rerotate_keys"));
}

TEST(Doctor, LongropeSwitch) {
  const std::vector<Finding> f = diagnose(shared("phi-3-mini-128k-instruct.json"));
  const Finding& x = find(f, "longrope-switch");
  EXPECT_EQ(x.severity, "warning");
  EXPECT_THAT(x.detail, HasSubstr("max_model_len (default 131072) > 4096"));
  EXPECT_THAT(x.detail, HasSubstr("llama_model::get_rope_factors"));
  EXPECT_THAT(x.advice, HasSubstr("--max-model-len 4096"));
}

TEST(Doctor, HalfPrecisionTableNumbers) {
  const std::vector<Finding> f = diagnose(shared("llama-3.1-8b.json"));
  const Finding& x = find(f, "half-precision-table");
  EXPECT_THAT(x.title, HasSubstr("(131072)"));
  EXPECT_THAT(x.detail, HasSubstr("positions 131008 .. 131071"));
  // |cos|, |sin| <= 1 (attention factor 1): fp16's half ulp below 1 is 2^-12 = 2.44e-04 and
  // bf16's is 2^-9 = 1.95e-03.
  EXPECT_THAT(x.detail, HasSubstr("fp16 changes them by up to 2.44e-04"));
  EXPECT_THAT(x.detail, HasSubstr("bf16 by up to 1.95e-03"));
}

TEST(Doctor, EngineUnsupported) {
  const std::vector<Finding> f = diagnose(llama_with(
      R"("rope_scaling": {"rope_type": "dynamic_yarn", "factor": 4.0, "original_max_position_embeddings": 1024},)"));
  expect_well_formed(f);
  std::vector<std::string> titles;
  for (const Finding& x : f) {
    if (x.id == "engine-unsupported") titles.push_back(x.title);
  }
  EXPECT_THAT(titles, ::testing::Contains(HasSubstr("vllm cannot run")));
  EXPECT_THAT(titles, ::testing::Contains(HasSubstr("llama.cpp cannot run")));
  EXPECT_THAT(ids(f), ::testing::Contains("dynamic-kv-cache"));
}

TEST(Doctor, RefusesAnAttentionFactorThatIsNotPositive) {
  // mscale -20 at factor 4: g = -1.77, so cos and sin would be multiplied by a negative number.
  try {
    diagnose(llama_with(
        R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
                             "mscale": -20.0, "mscale_all_dim": 1.0},)"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("mscale (-20)"), HasSubstr("greater than 0")));
  }
}

TEST(Doctor, EveryRealConfigIsWellFormed) {
  for (const char* file :
       {"deepseek-v3.json", "gpt-oss-20b.json", "llama-2-7b.json", "llama-3.1-8b.json",
        "phi-3-mini-128k-instruct.json", "pythia-410m.json", "qwen2.5-7b-instruct-yarn.json"}) {
    const std::vector<Finding> f = diagnose(shared(file));
    expect_well_formed(f);
    EXPECT_THAT(f, ::testing::Not(IsEmpty())) << file;
  }
}

}  // namespace
}  // namespace posenc
