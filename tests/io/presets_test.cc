// posenc/io/presets.h: every preset parses, gives the numbers its model publishes, and agrees with
// the shared copy of its config.json where there is one.
//
// Golden values are the published config.json values (the Hugging Face repository is named
// beside each), and the head_dim derivations transformers uses (hidden_size /
// num_attention_heads unless head_dim is set).
#include "posenc/io/presets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"

namespace posenc {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string shared_config(const std::string& file) {
  return std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs/" + file;
}

// Every field of two specs, with the field's name on failure.
void expect_same_spec(const RopeSpec& a, const RopeSpec& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rotary_dim, b.rotary_dim);
  EXPECT_EQ(a.rotary_offset, b.rotary_offset);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.factor, b.factor);
  EXPECT_EQ(a.original_max_position_embeddings, b.original_max_position_embeddings);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.partial_rotary_factor, b.partial_rotary_factor);
  EXPECT_EQ(a.yarn.attention_factor, b.yarn.attention_factor);
  EXPECT_EQ(a.yarn.mscale, b.yarn.mscale);
  EXPECT_EQ(a.yarn.mscale_all_dim, b.yarn.mscale_all_dim);
  EXPECT_EQ(a.yarn.beta_fast, b.yarn.beta_fast);
  EXPECT_EQ(a.yarn.beta_slow, b.yarn.beta_slow);
  EXPECT_EQ(a.yarn.truncate, b.yarn.truncate);
  EXPECT_EQ(a.yarn.extrapolation_factor, b.yarn.extrapolation_factor);
  EXPECT_EQ(a.yarn.ramp, b.yarn.ramp);
  EXPECT_EQ(a.llama3.low_freq_factor, b.llama3.low_freq_factor);
  EXPECT_EQ(a.llama3.high_freq_factor, b.llama3.high_freq_factor);
  EXPECT_EQ(a.longrope.short_factor, b.longrope.short_factor);
  EXPECT_EQ(a.longrope.long_factor, b.longrope.long_factor);
  EXPECT_EQ(a.longrope.attention_factor, b.longrope.attention_factor);
}

// The warnings each preset is documented (in its note) to give: DeepSeek writes factor,
// beta_fast and beta_slow as integers where transformers wants floats; the Qwen3 card's YaRN
// block leaves max_position_embeddings (40960) at odds with factor * L.
std::vector<std::string> documented_warnings(const std::string& name) {
  if (name == "deepseek-v2-lite" || name == "deepseek-v3") {
    return {"rope_scaling.factor field must be a float >= 1, got 40",
            "rope_scaling.beta_fast field must be a float, got 32",
            "rope_scaling.beta_slow field must be a float, got 1"};
  }
  if (name == "llama-4-scout") {
    return {"high_freq_factor (1) equals low_freq_factor (1)"};
  }
  if (name == "qwen3-8b-yarn4") {
    return {
        "factor (4) differs from max_position_embeddings / original_max_position_embeddings "
        "(40960 / 32768 = 1.25)"};
  }
  return {};
}

TEST(Presets, EveryPresetParsesWithOnlyItsDocumentedWarnings) {
  ASSERT_GE(presets().size(), 16u);
  for (const Preset& p : presets()) {
    SCOPED_TRACE(p.name);
    const ModelConfig c = load_preset(p.name);
    EXPECT_EQ(c.source, "preset " + p.name);
    const std::vector<std::string> expected = documented_warnings(p.name);
    ASSERT_THAT(c.warnings, SizeIs(expected.size())) << ::testing::PrintToString(c.warnings);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_THAT(c.warnings[i], HasSubstr(expected[i]));
      EXPECT_THAT(c.warnings[i], HasSubstr("preset " + p.name + ": "));
    }
    // Presets hold RoPE fields only. hidden_size and num_attention_heads are kept even where
    // head_dim (or qk_rope_head_dim) decides, as the published files have them.
    // VL and Gemma 3 presets keep their nesting (text_config) and vision_config's merge size.
    EXPECT_THAT(c.ignored_keys,
                ::testing::IsSubsetOf(std::vector<std::string>{
                    "hidden_size", "num_attention_heads", "qk_nope_head_dim", "vision_config",
                    "text_config.hidden_size", "text_config.num_attention_heads",
                    "text_config.sliding_window"}));
    // The frequencies can be computed in every convention.
    for (Numerics n : {Numerics::kPrecise, Numerics::kHf, Numerics::kGgml}) {
      EXPECT_NO_THROW(compute_frequencies(c.spec, n)) << numerics_name(n);
    }
  }
}

TEST(Presets, NamesSourcesAndNotesAreWellFormed) {
  std::set<std::string> names;
  for (const Preset& p : presets()) {
    SCOPED_TRACE(p.name);
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate name";
    for (char ch : p.name) {
      EXPECT_TRUE((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.');
    }
    EXPECT_THAT(p.source, HasSubstr("config.json"));
    EXPECT_FALSE(p.description.empty());
    EXPECT_EQ(p.description.find('\n'), std::string::npos);
    EXPECT_FALSE(p.note.empty());
    EXPECT_EQ(find_preset(p.name), &p);
  }
  for (const char* required :
       {"llama-2-7b", "codellama-7b", "llama-3.1-8b", "llama-3.2-1b", "mistral-7b-v0.1",
        "qwen2.5-7b-instruct", "qwen2.5-7b-instruct-yarn4", "qwen3-8b", "qwen3-8b-yarn4",
        "deepseek-v2-lite", "deepseek-v3", "phi-3-mini-128k", "phi-3.5-mini", "gpt-oss-20b",
        "pythia-410m", "gpt-j-6b"}) {
    EXPECT_TRUE(names.count(required)) << required;
  }
}

// The shared configs are copies of the published files; the presets built from them must read
// the same, warnings included (with the source name swapped).
TEST(Presets, SharedConfigsAndTheirPresetsGiveIdenticalSpecs) {
  const std::pair<const char*, const char*> pairs[] = {
      {"llama-2-7b.json", "llama-2-7b"},
      {"llama-3.1-8b.json", "llama-3.1-8b"},
      {"qwen2.5-7b-instruct-yarn.json", "qwen2.5-7b-instruct-yarn4"},
      {"deepseek-v3.json", "deepseek-v3"},
      {"gpt-oss-20b.json", "gpt-oss-20b"},
      {"phi-3-mini-128k-instruct.json", "phi-3-mini-128k"},
      {"pythia-410m.json", "pythia-410m"},
  };
  for (const auto& [file, name] : pairs) {
    const ModelConfig from_file = load_hf_config(shared_config(file));
    const ModelConfig from_preset = load_preset(name);
    expect_same_spec(from_file.spec, from_preset.spec, name);
    EXPECT_EQ(from_file.model_type, from_preset.model_type) << name;
    EXPECT_EQ(from_file.ignored_keys, from_preset.ignored_keys) << name;
    ASSERT_EQ(from_file.warnings.size(), from_preset.warnings.size()) << name;
    for (std::size_t i = 0; i < from_file.warnings.size(); ++i) {
      const std::string tail_file = from_file.warnings[i].substr(from_file.warnings[i].find(": "));
      const std::string tail_preset =
          from_preset.warnings[i].substr(from_preset.warnings[i].find(": "));
      EXPECT_EQ(tail_file, tail_preset) << name;
    }
  }
}

// qwen2.5-7b-instruct is the shipped file: the shared YaRN config minus its rope_scaling block.
TEST(Presets, Qwen25PresetsDifferOnlyByTheYarnBlock) {
  RopeSpec plain = load_preset("qwen2.5-7b-instruct").spec;
  const RopeSpec yarn = load_preset("qwen2.5-7b-instruct-yarn4").spec;
  EXPECT_EQ(plain.method, Method::kNone);
  plain.method = Method::kYarn;
  plain.factor = 4.0;
  plain.original_max_position_embeddings = 32768;
  expect_same_spec(plain, yarn, "qwen2.5 + yarn block");
}

// --- Published values, preset by preset -------------------------------------------------

// meta-llama/Llama-2-7b-hf: hidden 4096 / 32 heads = head_dim 128; no rope_theta (10000);
// max_position_embeddings 4096.
TEST(PresetValues, Llama2_7b) {
  const RopeSpec s = load_preset("llama-2-7b").spec;
  EXPECT_EQ(s.method, Method::kNone);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.rotary_dim, 128);
  EXPECT_EQ(s.layout, Layout::kHalfSplit);
  EXPECT_EQ(s.rope_theta, 10000.0);
  EXPECT_EQ(s.max_position_embeddings, 4096);
  EXPECT_EQ(s.original_max_position_embeddings, 0);
}

// codellama/CodeLlama-7b-hf: rope_theta 1000000, max_position_embeddings 16384, no scaling.
TEST(PresetValues, CodeLlama7b) {
  const RopeSpec s = load_preset("codellama-7b").spec;
  EXPECT_EQ(s.method, Method::kNone);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.rope_theta, 1e6);
  EXPECT_EQ(s.max_position_embeddings, 16384);
}

// meta-llama/Llama-3.1-8B: llama3, factor 8.0, low/high_freq_factor 1.0/4.0, original 8192,
// max 131072, rope_theta 500000.0; head_dim 4096 / 32 = 128.
TEST(PresetValues, Llama31_8b) {
  const RopeSpec s = load_preset("llama-3.1-8b").spec;
  EXPECT_EQ(s.method, Method::kLlama3);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.factor, 8.0);
  EXPECT_EQ(s.llama3.low_freq_factor, 1.0);
  EXPECT_EQ(s.llama3.high_freq_factor, 4.0);
  EXPECT_EQ(s.original_max_position_embeddings, 8192);
  EXPECT_EQ(s.max_position_embeddings, 131072);
  EXPECT_EQ(s.rope_theta, 500000.0);
}

// meta-llama/Llama-3.2-1B: head_dim 64 (set explicitly; 2048 / 32 agrees), llama3 factor 32.0,
// original 8192, max 131072, rope_theta 500000.0.
TEST(PresetValues, Llama32_1b) {
  const RopeSpec s = load_preset("llama-3.2-1b").spec;
  EXPECT_EQ(s.method, Method::kLlama3);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.rotary_dim, 64);
  EXPECT_EQ(s.factor, 32.0);
  EXPECT_EQ(s.llama3.low_freq_factor, 1.0);
  EXPECT_EQ(s.llama3.high_freq_factor, 4.0);
  EXPECT_EQ(s.original_max_position_embeddings, 8192);
  EXPECT_EQ(s.max_position_embeddings, 131072);
  EXPECT_EQ(s.rope_theta, 500000.0);
}

// mistralai/Mistral-7B-v0.1: rope_theta 10000.0, max 32768, head_dim 4096 / 32 = 128.
TEST(PresetValues, Mistral7b) {
  const ModelConfig c = load_preset("mistral-7b-v0.1");
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_EQ(c.spec.method, Method::kNone);
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.rope_theta, 10000.0);
  EXPECT_EQ(c.spec.max_position_embeddings, 32768);
}

// Qwen/Qwen2.5-7B-Instruct: head_dim 3584 / 28 = 128, rope_theta 1000000.0, max 32768; the
// model card's YaRN block: factor 4.0, original 32768, attention factor 0.1 ln 4 + 1.
TEST(PresetValues, Qwen25_7bInstruct) {
  const RopeSpec plain = load_preset("qwen2.5-7b-instruct").spec;
  EXPECT_EQ(plain.method, Method::kNone);
  EXPECT_EQ(plain.head_dim, 128);
  EXPECT_EQ(plain.rope_theta, 1e6);
  EXPECT_EQ(plain.max_position_embeddings, 32768);
  const RopeSpec yarn = load_preset("qwen2.5-7b-instruct-yarn4").spec;
  EXPECT_EQ(yarn.method, Method::kYarn);
  EXPECT_EQ(yarn.factor, 4.0);
  EXPECT_EQ(yarn.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(compute_frequencies(yarn).attention_factor, 0.1 * std::log(4.0) + 1.0);
}

// Qwen/Qwen3-8B: head_dim 128 (4096 / 32 also 128), rope_theta 1000000, max 40960; the Qwen3
// model card's YaRN block: factor 4.0, original 32768 (131072 tokens in all).
TEST(PresetValues, Qwen3_8b) {
  const RopeSpec plain = load_preset("qwen3-8b").spec;
  EXPECT_EQ(plain.method, Method::kNone);
  EXPECT_EQ(plain.head_dim, 128);
  EXPECT_EQ(plain.rope_theta, 1e6);
  EXPECT_EQ(plain.max_position_embeddings, 40960);
  const RopeSpec yarn = load_preset("qwen3-8b-yarn4").spec;
  EXPECT_EQ(yarn.method, Method::kYarn);
  EXPECT_EQ(yarn.head_dim, 128);
  EXPECT_EQ(yarn.factor, 4.0);
  EXPECT_EQ(yarn.original_max_position_embeddings, 32768);
  EXPECT_EQ(yarn.max_position_embeddings, 40960);
  EXPECT_EQ(yarn.rope_theta, 1e6);
}

// deepseek-ai/DeepSeek-V2-Lite: qk_rope_head_dim 64 (interleaved), yarn factor 40, mscale and
// mscale_all_dim 0.707, beta_fast 32, beta_slow 1, original 4096, max 163840, rope_theta 10000.
// mscale == mscale_all_dim makes the attention factor exactly 1; the softmax scale grows by
// g(40, 0.707)^2 = (0.0707 ln 40 + 1)^2.
TEST(PresetValues, DeepseekV2Lite) {
  const ModelConfig c = load_preset("deepseek-v2-lite");
  const RopeSpec& s = c.spec;
  EXPECT_EQ(c.model_type, "deepseek_v2");
  EXPECT_EQ(s.method, Method::kYarn);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.rotary_dim, 64);
  EXPECT_EQ(s.layout, Layout::kInterleaved);
  EXPECT_EQ(s.factor, 40.0);
  EXPECT_EQ(s.yarn.mscale, 0.707);
  EXPECT_EQ(s.yarn.mscale_all_dim, 0.707);
  EXPECT_EQ(s.yarn.beta_fast, 32.0);
  EXPECT_EQ(s.yarn.beta_slow, 1.0);
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_EQ(s.max_position_embeddings, 163840);
  EXPECT_EQ(s.rope_theta, 10000.0);
  const Frequencies f = compute_frequencies(s);
  EXPECT_EQ(f.attention_factor, 1.0);
  const double g = 0.1 * 0.707 * std::log(40.0) + 1.0;
  EXPECT_NEAR(f.softmax_scale_multiplier, g * g, 1e-15);
}

// deepseek-ai/DeepSeek-V3: as V2-Lite but mscale and mscale_all_dim 1.0.
TEST(PresetValues, DeepseekV3) {
  const RopeSpec s = load_preset("deepseek-v3").spec;
  EXPECT_EQ(s.method, Method::kYarn);
  EXPECT_EQ(s.rotary_dim, 64);
  EXPECT_EQ(s.factor, 40.0);
  EXPECT_EQ(s.yarn.mscale, 1.0);
  EXPECT_EQ(s.yarn.mscale_all_dim, 1.0);
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_EQ(s.max_position_embeddings, 163840);
}

// microsoft/Phi-3-mini-128k-instruct: longrope, top-level original 4096, max 131072 (so factor
// 131072 / 4096 = 32), head_dim 3072 / 32 = 96, 48 factors each; first and last entries of
// the published lists.
TEST(PresetValues, Phi3Mini128k) {
  const RopeSpec s = load_preset("phi-3-mini-128k").spec;
  EXPECT_EQ(s.method, Method::kLongrope);
  EXPECT_EQ(s.head_dim, 96);
  EXPECT_EQ(s.factor, 32.0);
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  ASSERT_EQ(s.longrope.long_factor.size(), 48u);
  ASSERT_EQ(s.longrope.short_factor.size(), 48u);
  EXPECT_EQ(s.longrope.long_factor.front(), 1.0700000524520874);
  EXPECT_EQ(s.longrope.long_factor.back(), 64.76000213623047);
  EXPECT_EQ(s.longrope.short_factor.front(), 1.1);
  EXPECT_EQ(s.longrope.short_factor.back(), 3.049999999999997);
}

// microsoft/Phi-3.5-mini-instruct: the same shape with its own lists (first, a middle and last
// entries as published); every entry is a float32 value written as a double.
TEST(PresetValues, Phi35Mini) {
  const RopeSpec s = load_preset("phi-3.5-mini").spec;
  EXPECT_EQ(s.method, Method::kLongrope);
  EXPECT_EQ(s.head_dim, 96);
  EXPECT_EQ(s.factor, 32.0);
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_EQ(s.max_position_embeddings, 131072);
  ASSERT_EQ(s.longrope.long_factor.size(), 48u);
  ASSERT_EQ(s.longrope.short_factor.size(), 48u);
  EXPECT_EQ(s.longrope.long_factor.front(), 1.0800000429153442);
  EXPECT_EQ(s.longrope.long_factor[24], 50.340003967285156);
  EXPECT_EQ(s.longrope.long_factor.back(), 64.83999633789062);
  EXPECT_EQ(s.longrope.short_factor.front(), 1.0);
  EXPECT_EQ(s.longrope.short_factor[24], 1.9899996519088745);
  EXPECT_EQ(s.longrope.short_factor.back(), 2.8399994373321533);
  for (const auto* list : {&s.longrope.long_factor, &s.longrope.short_factor}) {
    for (double x : *list) EXPECT_EQ(static_cast<double>(static_cast<float>(x)), x) << x;
    EXPECT_TRUE(std::is_sorted(list->begin(), list->end()));
  }
  // Not a copy of Phi-3's lists.
  EXPECT_NE(s.longrope.long_factor, load_preset("phi-3-mini-128k").spec.longrope.long_factor);
}

// openai/gpt-oss-20b: head_dim 64, yarn factor 32.0, original 4096, truncate false,
// rope_theta 150000, max 131072; attention factor 0.1 ln 32 + 1.
TEST(PresetValues, GptOss20b) {
  const RopeSpec s = load_preset("gpt-oss-20b").spec;
  EXPECT_EQ(s.method, Method::kYarn);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.factor, 32.0);
  EXPECT_FALSE(s.yarn.truncate);
  EXPECT_EQ(s.rope_theta, 150000.0);
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_EQ(s.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(compute_frequencies(s).attention_factor, 0.1 * std::log(32.0) + 1.0);
}

// EleutherAI/pythia-410m (GPT-NeoX): head_dim 1024 / 16 = 64, rotary_pct 0.25 -> 16 dims,
// rotary_emb_base 10000, max 2048, half-split pairs.
TEST(PresetValues, Pythia410m) {
  const RopeSpec s = load_preset("pythia-410m").spec;
  EXPECT_EQ(s.method, Method::kNone);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.rotary_dim, 16);
  EXPECT_EQ(s.layout, Layout::kHalfSplit);
  EXPECT_EQ(s.rope_theta, 10000.0);
  EXPECT_EQ(s.max_position_embeddings, 2048);
}

// EleutherAI/gpt-j-6b: n_embd 4096 / n_head 16 = head_dim 256, rotary_dim 64, n_positions
// 2048, pairs (2i, 2i + 1).
TEST(PresetValues, GptJ6b) {
  const ModelConfig c = load_preset("gpt-j-6b");
  EXPECT_EQ(c.model_type, "gptj");
  EXPECT_EQ(c.spec.method, Method::kNone);
  EXPECT_EQ(c.spec.head_dim, 256);
  EXPECT_EQ(c.spec.rotary_dim, 64);
  EXPECT_EQ(c.spec.layout, Layout::kInterleaved);
  EXPECT_EQ(c.spec.rope_theta, 10000.0);
  EXPECT_EQ(c.spec.max_position_embeddings, 2048);
}

TEST(Presets, UnknownNameIsAnErrorListingTheKnownNames) {
  EXPECT_EQ(find_preset("llama-9"), nullptr);
  try {
    load_preset("llama-9");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_THAT(m, HasSubstr("\"llama-9\""));
    for (const Preset& p : presets()) EXPECT_THAT(m, HasSubstr(p.name));
  }
}

}  // namespace
}  // namespace posenc
