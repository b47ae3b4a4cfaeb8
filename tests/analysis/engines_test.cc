// posenc/analysis/engines.h: one model's RoPE as transformers, llama.cpp and vLLM compute it.
//
// Golden cases use the published configs in ../shared/testdata/hf-configs; each expected value
// cites the engine source it comes from (docs/engines.md has the full list):
//   gpt-oss-20b: truncate false. transformers' correction range 8.0928 .. 17.398 (vLLM PR 28244's
//     test log prints low=8.092779115512402, high=17.39802450158856); llama.cpp floors/ceils it in
//     ggml_rope_yarn_corr_dims to 8 .. 18, which changes pairs 9 .. 17; vLLM >= 0.11.1 honours it.
//   DeepSeek-V3: mscale = mscale_all_dim = 1, factor 40. transformers: attention factor
//     g(40,1)/g(40,1) = 1, softmax x g(40,1)^2 (DeepseekV3Attention); vLLM's deepseek_yarn path
//     (DeepseekScalingRotaryEmbedding) and llama.cpp's DEEPSEEK2 arch the same. vLLM's plain YaRN
//     class would give 0.1 ln 40 + 1 = 1.3688879454113936, which DeepSeek never takes.
//   Qwen2.5 yarn x4, Llama 3.1: every engine agrees up to float32 rounding.
// Then properties: the rounding budget covers every engine on plain RoPE, precise is its own
// reference, identical settings agree, and the rules for methods that engines drop or replace.
#include "posenc/analysis/engines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/io/config.h"

namespace posenc {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

ModelConfig shared(std::string_view file) {
  return load_hf_config(std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs/" +
                        std::string(file));
}

double g(double s, double m) { return 0.1 * m * std::log(s) + 1.0; }  // YaRN paper eq. 22

::testing::Matcher<const std::vector<std::string>&> HasNote(std::string_view text) {
  return Contains(HasSubstr(std::string(text)));
}

RopeSpec yarn_spec(double factor, std::int64_t original) {
  RopeSpec s;
  s.method = Method::kYarn;
  s.head_dim = 128;
  s.rotary_dim = 128;
  s.rope_theta = 10000.0;
  s.factor = factor;
  s.original_max_position_embeddings = original;
  s.max_position_embeddings = static_cast<std::int64_t>(factor * static_cast<double>(original));
  return s;
}

// ---------------------------------------------------------------------------------------------
// Golden cases

TEST(EnginesGolden, GptOssTruncateFalse) {
  const ModelConfig c = shared("gpt-oss-20b.json");
  ASSERT_FALSE(c.spec.yarn.truncate);
  const Comparison cmp = compare_engines(c.spec, 0, {}, c.model_type);

  const EngineView& hf = cmp.at(Engine::kTransformers).view;
  EXPECT_NEAR(*hf.freqs.correction_low, 8.092779115512402, 1e-12);
  EXPECT_NEAR(*hf.freqs.correction_high, 17.39802450158856, 1e-12);
  EXPECT_EQ(cmp.at(Engine::kTransformers).verdict, Verdict::kAgrees);

  const EngineComparison& llama = cmp.at(Engine::kLlamaCpp);
  EXPECT_EQ(*llama.view.freqs.correction_low, 8.0);
  EXPECT_EQ(*llama.view.freqs.correction_high, 18.0);
  EXPECT_EQ(llama.verdict, Verdict::kDiffers);
  EXPECT_EQ(llama.pairs_differing, 9);  // pairs 9 .. 17: the ramp moves inside (8, 18)
  for (std::size_t i = 0; i < llama.relative_difference.size(); ++i) {
    const bool in_ramp = i >= 9 && i <= 17;
    EXPECT_EQ(llama.relative_difference[i] > llama.budget[i], in_ramp) << "pair " << i;
  }
  // Pair 17: e = 1 - (17 - 8.0928) / (17.398 - 8.0928) = 0.0428 exact, 1 - 9/10 = 0.1 floored;
  // w (1 - e)/32 + w e = 0.0728 w against 0.1281 w: 76% apart.
  EXPECT_NEAR(llama.relative_difference[17], 0.7627, 5e-4);
  EXPECT_THAT(llama.verdict_text, StartsWith("differs in 9 pairs by up to 7.6e-01"));
  EXPECT_THAT(llama.view.notes, HasNote("ignores truncate: false"));

  const EngineComparison& vllm = cmp.at(Engine::kVllm);
  EXPECT_EQ(vllm.verdict, Verdict::kAgrees) << vllm.verdict_text;
  EXPECT_THAT(vllm.view.notes, HasNote("honours truncate: false (PR 28244"));

  // No attention_factor or mscale keys: every engine uses g(32, 1).
  for (const EngineComparison& e : cmp.engines) {
    EXPECT_NEAR(e.view.attention_factor, g(32, 1), 1e-6) << engine_name(e.view.engine);
    EXPECT_EQ(e.view.softmax_scale_multiplier, 1.0);
  }
  // Default positions: L - 1, L, 4L, extended - 1.
  EXPECT_THAT(cmp.positions, ElementsAre(4095, 4096, 16384, 131071));
}

TEST(EnginesGolden, DeepSeekV3) {
  const ModelConfig c = shared("deepseek-v3.json");
  const Comparison cmp = compare_engines(c.spec, 0, {}, c.model_type);
  const double softmax = g(40, 1) * g(40, 1);  // 1.8738542070926265
  for (const EngineComparison& e : cmp.engines) {
    EXPECT_EQ(e.verdict == Verdict::kDiffers, false)
        << engine_name(e.view.engine) << ": " << e.verdict_text;
    EXPECT_NEAR(e.view.attention_factor, 1.0, 1e-6) << engine_name(e.view.engine);
    EXPECT_NEAR(e.view.softmax_scale_multiplier, softmax, 2e-6) << engine_name(e.view.engine);
  }
  EXPECT_THAT(cmp.at(Engine::kVllm).view.notes, HasNote("deepseek_yarn path"));
}

TEST(EnginesGolden, DeepSeekConfigOnThePlainYarnPath) {
  // The same rope_scaling in a model that is not DeepSeek: vLLM's YaRNScalingRotaryEmbedding
  // (0.25 and older) drops mscale/mscale_all_dim and uses g(40, 1); llama.cpp's generic
  // converter path writes no mscale_all_dim and llama_context uses get_mscale(40, 1).
  const ModelConfig c = shared("deepseek-v3.json");
  const Comparison cmp = compare_engines(c.spec, 0, {}, "mistral3");
  const EngineComparison& vllm = cmp.at(Engine::kVllm);
  EXPECT_NEAR(vllm.view.attention_factor, 1.3688879454113936,
              1e-7);  // rounded to float32, as torch does
  EXPECT_EQ(vllm.view.softmax_scale_multiplier, 1.0);
  EXPECT_EQ(vllm.verdict, Verdict::kDiffers);
  EXPECT_TRUE(vllm.attention_factor_differs);
  EXPECT_THAT(vllm.verdict_text, HasSubstr("uses a different attention factor (1.36889 vs 1)"));
  EXPECT_THAT(vllm.view.notes, HasNote("drops mscale (1), mscale_all_dim (1)"));
  const EngineComparison& llama = cmp.at(Engine::kLlamaCpp);
  EXPECT_NEAR(llama.view.attention_factor, 1.3688879454113936, 1e-6);
  EXPECT_THAT(llama.view.notes, HasNote("drops mscale and mscale_all_dim"));
  // Frequencies are the same: only the scalars differ.
  EXPECT_EQ(vllm.pairs_differing, 0);
  EXPECT_EQ(llama.pairs_differing, 0);
}

TEST(EnginesGolden, Qwen25YarnAgreesUpToFloat32) {
  const ModelConfig c = shared("qwen2.5-7b-instruct-yarn.json");
  const Comparison cmp = compare_engines(c.spec, 0, {}, c.model_type);
  for (const EngineComparison& e : cmp.engines) {
    EXPECT_EQ(e.verdict, Verdict::kAgrees) << engine_name(e.view.engine) << ": " << e.verdict_text;
    EXPECT_NEAR(e.view.attention_factor, 1.1386294361119891, 1e-6);  // 0.1 ln 4 + 1
    EXPECT_TRUE(e.view.notes.empty() || e.view.engine != Engine::kLlamaCpp);
  }
  EXPECT_THAT(cmp.at(Engine::kTransformers).verdict_text,
              StartsWith("agrees (float32 rounding only"));
}

TEST(EnginesGolden, Llama31Agrees) {
  const ModelConfig c = shared("llama-3.1-8b.json");
  for (const std::int64_t seq_len : {0, 8193, 131072}) {
    const Comparison cmp = compare_engines(c.spec, seq_len, {}, c.model_type);
    for (const EngineComparison& e : cmp.engines) {
      EXPECT_EQ(e.verdict, Verdict::kAgrees)
          << engine_name(e.view.engine) << ": " << e.verdict_text;
      EXPECT_EQ(e.view.attention_factor, 1.0);
    }
  }
}

TEST(EnginesGolden, Phi3LongropeFactorChoice) {
  // vLLM fixes use_long_rope = max_model_len (default max_position_embeddings = 131072) > 4096
  // at start-up; transformers and llama.cpp (n_ctx = seq_len here) use the short factors up to
  // 4096.
  const ModelConfig c = shared("phi-3-mini-128k-instruct.json");
  const Comparison at_start = compare_engines(c.spec, 0, {}, c.model_type);
  EXPECT_EQ(at_start.at(Engine::kTransformers).verdict, Verdict::kAgrees);
  EXPECT_EQ(at_start.at(Engine::kLlamaCpp).verdict, Verdict::kAgrees)
      << at_start.at(Engine::kLlamaCpp).verdict_text;
  EXPECT_EQ(at_start.at(Engine::kVllm).verdict, Verdict::kDiffers);
  EXPECT_EQ(at_start.at(Engine::kVllm).pairs_differing, 48);
  const Comparison long_seq = compare_engines(c.spec, 4097, {}, c.model_type);
  for (const EngineComparison& e : long_seq.engines) {
    EXPECT_EQ(e.verdict, Verdict::kAgrees) << engine_name(e.view.engine) << ": " << e.verdict_text;
    // sqrt(1 + ln(131072 / 4096) / ln 4096) = sqrt(1 + 5 / 12)
    EXPECT_NEAR(e.view.attention_factor, std::sqrt(1.0 + 5.0 / 12.0), 1e-6);
  }
}

// ---------------------------------------------------------------------------------------------
// Rules for keys and methods the engines drop or replace

TEST(EnginesRules, ExplicitAttentionFactorIsDroppedByLlamaCppAndVllm) {
  RopeSpec s = yarn_spec(16, 4096);
  s.yarn.attention_factor = 1.0;  // the "disable YaRN's magnitude scaling" pattern
  const Comparison cmp = compare_engines(s);
  EXPECT_EQ(cmp.at(Engine::kTransformers).view.attention_factor, 1.0);
  for (const Engine e : {Engine::kLlamaCpp, Engine::kVllm}) {
    const EngineComparison& c = cmp.at(e);
    EXPECT_NEAR(c.view.attention_factor, g(16, 1), 1e-6) << engine_name(e);
    EXPECT_THAT(c.view.notes, HasNote("drops attention_factor (1)")) << engine_name(e);
    EXPECT_THAT(c.verdict_text, HasSubstr("uses a different attention factor")) << engine_name(e);
  }
}

TEST(EnginesRules, DeepSeekWithUnequalMscales) {
  // mscale 1, mscale_all_dim 0.5: transformers and vLLM's DeepseekScalingRotaryEmbedding use
  // g(40, 1) / g(40, 0.5); llama.cpp's DEEPSEEK2 substitutes mscale_all_dim for mscale (ratio 1).
  RopeSpec s = yarn_spec(40, 4096);
  s.layout = Layout::kInterleaved;
  s.yarn.mscale = 1.0;
  s.yarn.mscale_all_dim = 0.5;
  const Comparison cmp = compare_engines(s, 0, {}, "deepseek_v3");
  const double expected = g(40, 1) / g(40, 0.5);
  EXPECT_NEAR(cmp.at(Engine::kTransformers).view.attention_factor, expected, 1e-6);
  EXPECT_NEAR(cmp.at(Engine::kVllm).view.attention_factor, expected, 1e-6);
  EXPECT_EQ(cmp.at(Engine::kVllm).verdict, Verdict::kAgrees) << cmp.at(Engine::kVllm).verdict_text;
  const EngineComparison& llama = cmp.at(Engine::kLlamaCpp);
  EXPECT_NEAR(llama.view.attention_factor, 1.0, 1e-6);
  EXPECT_TRUE(llama.attention_factor_differs);
  EXPECT_THAT(llama.view.notes, HasNote("uses mscale = mscale_all_dim (0.5)"));
  // Softmax: transformers g(40, 0.5)^2; llama.cpp (1 * g(40, 0.5))^2 as well.
  EXPECT_NEAR(llama.view.softmax_scale_multiplier, g(40, 0.5) * g(40, 0.5), 1e-5);
  EXPECT_FALSE(llama.softmax_scale_differs);
}

TEST(EnginesRules, LlamaCppUsesDefaultBetasAndExtFactor) {
  RopeSpec s = yarn_spec(8, 4096);
  s.yarn.beta_fast = 16;
  s.yarn.extrapolation_factor = 0.5;
  const EngineView v = engine_view(s, Engine::kLlamaCpp);
  ASSERT_TRUE(v.freqs.ggml);
  EXPECT_EQ(v.freqs.ggml->beta_fast, 32.0f);
  EXPECT_EQ(v.freqs.ggml->ext_factor, 1.0f);
  EXPECT_THAT(v.notes, HasNote("uses beta_fast 32 and beta_slow 1, not 16 and 1"));
  EXPECT_THAT(v.notes, HasNote("uses extrapolation_factor 1, not 0.5"));
  // vLLM forwards both (get_rope's yarn whitelist).
  const EngineView vllm = engine_view(s, Engine::kVllm);
  EXPECT_TRUE(vllm.notes.empty());
}

TEST(EnginesRules, DynamicNtk) {
  RopeSpec s;
  s.method = Method::kDynamic;
  s.head_dim = s.rotary_dim = 128;
  s.factor = 4;
  s.max_position_embeddings = 4096;
  // vLLM: one base for 4096 x 4 tokens, b (s^2 - s + 1)^(D/(D-2)) = 10000 x 13^(128/126).
  const EngineView vllm = engine_view(s, Engine::kVllm);
  EXPECT_NEAR(vllm.freqs.base, 10000.0 * std::pow(13.0, 128.0 / 126.0), 1e-6);
  EXPECT_THAT(
      vllm.notes,
      HasNote("computes the dynamic-NTK base once, for max_position_embeddings x factor = 16384"));
  EXPECT_EQ(compare_engines(s, 0).at(Engine::kVllm).verdict, Verdict::kDiffers);
  EXPECT_EQ(compare_engines(s, 16384).at(Engine::kVllm).verdict, Verdict::kAgrees)
      << compare_engines(s, 16384).at(Engine::kVllm).verdict_text;
  // llama.cpp: plain RoPE, which transformers matches up to max_position_embeddings.
  EXPECT_EQ(compare_engines(s, 4096).at(Engine::kLlamaCpp).verdict, Verdict::kAgrees);
  EXPECT_EQ(compare_engines(s, 8192).at(Engine::kLlamaCpp).verdict, Verdict::kDiffers);
  EXPECT_THAT(engine_view(s, Engine::kLlamaCpp).notes, HasNote("runs plain RoPE"));
}

TEST(EnginesRules, VllmNtkIsFixedNtk) {
  RopeSpec s;
  s.method = Method::kNtk;
  s.head_dim = s.rotary_dim = 64;
  s.factor = 4;
  // NTKScalingRotaryEmbedding: (b s)^(-2i/D) / s^(2/D); pair 0 is divided by s^(2/D) = 4^(1/32).
  const EngineView v = engine_view(s, Engine::kVllm);
  const double w0 = std::pow(4.0, -1.0 / 32.0);
  const double w31 = std::pow(40000.0, -62.0 / 64.0) / std::pow(4.0, 1.0 / 32.0);
  EXPECT_NEAR(v.freqs.inv_freq[0] / w0, 1.0, 1e-6);  // float32 values
  EXPECT_NEAR(v.freqs.inv_freq[31] / w31, 1.0, 1e-6);
  EXPECT_EQ(compare_engines(s).at(Engine::kVllm).verdict, Verdict::kDiffers);
  // transformers has no "ntk" rope_type.
  EXPECT_FALSE(engine_view(s, Engine::kTransformers).supported);
}

TEST(EnginesRules, UnsupportedMethods) {
  RopeSpec dy = yarn_spec(4, 4096);
  dy.method = Method::kDynamicYarn;
  EXPECT_FALSE(engine_view(dy, Engine::kVllm).supported);
  EXPECT_THAT(engine_view(dy, Engine::kVllm).unsupported_reason,
              HasSubstr("Unknown RoPE scaling type"));
  EXPECT_FALSE(engine_view(dy, Engine::kLlamaCpp).supported);

  RopeSpec paper = yarn_spec(4, 4096);
  paper.yarn.ramp = YarnRamp::kPaper;
  const Comparison cmp = compare_engines(paper);
  for (const Engine e : {Engine::kTransformers, Engine::kLlamaCpp, Engine::kVllm}) {
    EXPECT_EQ(cmp.at(e).verdict, Verdict::kUnsupported) << engine_name(e);
    EXPECT_THAT(cmp.at(e).verdict_text, StartsWith("not supported: ")) << engine_name(e);
  }
  EXPECT_EQ(cmp.at(Engine::kPrecise).verdict, Verdict::kAgrees);
}

TEST(EnginesRules, LongropeAttentionFactorDropped) {
  const ModelConfig c = shared("phi-3-mini-128k-instruct.json");
  RopeSpec s = c.spec;
  s.longrope.attention_factor = 1.0;
  const Comparison cmp = compare_engines(s, 4097);
  EXPECT_EQ(cmp.at(Engine::kTransformers).view.attention_factor, 1.0);
  for (const Engine e : {Engine::kLlamaCpp, Engine::kVllm}) {
    EXPECT_TRUE(cmp.at(e).attention_factor_differs) << engine_name(e);
    EXPECT_THAT(cmp.at(e).view.notes, HasNote("drops attention_factor (1)")) << engine_name(e);
  }
}

// ---------------------------------------------------------------------------------------------
// Properties

TEST(EnginesRules, NanDifferenceIsNaNNotZero) {
  const RopeSpec s = yarn_spec(4, 4096);
  const Frequencies good = compute_frequencies(s, Numerics::kPrecise);
  Frequencies bad = good;
  bad.attention_factor = std::nan("");
  EXPECT_TRUE(std::isnan(max_cos_sin_difference(bad, good, 100)));
  EXPECT_TRUE(std::isnan(max_cos_sin_difference(good, bad, 100)));
  bad = good;
  bad.inv_freq[5] = std::nan("");
  EXPECT_TRUE(std::isnan(relative_differences(bad, good)[5]));
}

TEST(EnginesRules, CompareRefusesWhatNoEngineCanCompute) {
  // Before validation caught them, these reached ggml as "freq_base (inf)" or gave NaN with exit 0.
  RopeSpec theta = yarn_spec(4, 4096);
  theta.rope_theta = 1e39;
  RopeSpec mscale = yarn_spec(4, 4096);
  mscale.yarn.mscale = -20;
  mscale.yarn.mscale_all_dim = 1;
  for (auto [spec, field] :
       {std::pair{theta, "rope_theta (1e+39)"}, std::pair{mscale, "mscale (-20)"}}) {
    try {
      compare_engines(spec);
      ADD_FAILURE() << field << ": no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(field));
      EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("ggml_rope_ext")));
    }
  }
}

TEST(EnginesProperties, PreciseAndTransformersAreTheLibrarysNumerics) {
  const ModelConfig c = shared("qwen2.5-7b-instruct-yarn.json");
  EXPECT_EQ(engine_view(c.spec, Engine::kPrecise).freqs.inv_freq,
            compute_frequencies(c.spec, Numerics::kPrecise).inv_freq);
  EXPECT_EQ(engine_view(c.spec, Engine::kTransformers).freqs.inv_freq,
            compute_frequencies(c.spec, Numerics::kHf).inv_freq);
  const Comparison cmp = compare_engines(c.spec);
  const EngineComparison& p = cmp.at(Engine::kPrecise);
  EXPECT_EQ(p.max_relative_difference, 0.0);
  for (const double d : p.cos_sin_difference) EXPECT_EQ(d, 0.0);
  EXPECT_EQ(p.verdict_text, "reference (float64)");
}

TEST(EnginesProperties, BudgetCoversFloat32OnPlainRopeAcrossBases) {
  // Plain RoPE has no semantic difference between engines: whatever differs is float32.
  for (const double base : {10000.0, 500000.0, 1e6, 5e6}) {
    for (const std::int64_t d : {16, 64, 96, 128, 256}) {
      RopeSpec s;
      s.head_dim = s.rotary_dim = d;
      s.rope_theta = base;
      const Comparison cmp = compare_engines(s);
      for (const EngineComparison& e : cmp.engines) {
        EXPECT_EQ(e.verdict, Verdict::kAgrees)
            << engine_name(e.view.engine) << " b=" << base << " D=" << d << ": " << e.verdict_text;
        for (const double b : e.budget) EXPECT_LT(b, 1e-4);  // far below any semantic difference
      }
    }
  }
}

TEST(EnginesProperties, IdentityScalingAgreesEverywhere) {
  // factor 1: every method is plain RoPE, and every engine says so.
  RopeSpec s = yarn_spec(1, 4096);
  for (const EngineComparison& e : compare_engines(s).engines) {
    EXPECT_EQ(e.verdict, Verdict::kAgrees) << engine_name(e.view.engine) << ": " << e.verdict_text;
    EXPECT_EQ(e.view.attention_factor, 1.0);
  }
}

TEST(EnginesProperties, RelativeDifferences) {
  Frequencies a, b;
  a.inv_freq = {1.0, 0.5, 0.0, 2.0};
  b.inv_freq = {1.0, 0.25, 0.0, 0.0};
  const std::vector<double> d = relative_differences(a, b);
  EXPECT_EQ(d[0], 0.0);
  EXPECT_EQ(d[1], 1.0);
  EXPECT_EQ(d[2], 0.0);
  EXPECT_TRUE(std::isinf(d[3]));
  b.inv_freq.pop_back();
  EXPECT_THROW(relative_differences(a, b), Error);
}

TEST(EnginesProperties, PositionsAreValidated) {
  const RopeSpec s = yarn_spec(4, 4096);
  const std::vector<std::int64_t> negative = {-1};
  try {
    compare_engines(s, 0, negative);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("position (-1)"));
  }
  const std::vector<std::int64_t> huge = {std::int64_t{1} << 31};
  EXPECT_THROW(compare_engines(s, 0, huge), Error);
  const std::vector<std::int64_t> chosen = {0, 7};
  const Comparison cmp = compare_engines(s, 0, chosen);
  EXPECT_THAT(cmp.positions, ElementsAre(0, 7));
  EXPECT_EQ(cmp.at(Engine::kVllm).cos_sin_difference.size(), 2u);
  // Position 0: cos = attention factor, sin = 0 in every numerics.
  EXPECT_LT(cmp.at(Engine::kLlamaCpp).cos_sin_difference[0], 1e-6);
  // Defaults past ggml's int32 positions are capped rather than refused.
  const RopeSpec big = yarn_spec(4, std::int64_t{1} << 30);
  EXPECT_THAT(default_comparison_positions(big),
              ElementsAre((std::int64_t{1} << 30) - 1, std::int64_t{1} << 30, 2147483647));
  EXPECT_NO_THROW(compare_engines(big));
}

TEST(EnginesProperties, InvalidSpecIsRefused) {
  RopeSpec s = yarn_spec(4, 4096);
  s.yarn.beta_fast = 0.5;
  EXPECT_THROW(engine_view(s, Engine::kVllm), Error);
  EXPECT_THROW(engine_view(yarn_spec(4, 4096), Engine::kVllm, -1), Error);
}

TEST(EnginesProperties, Names) {
  EXPECT_EQ(engine_name(Engine::kTransformers), "transformers");
  EXPECT_EQ(engine_name(Engine::kLlamaCpp), "llama.cpp");
  EXPECT_EQ(engine_name(Engine::kVllm), "vllm");
  EXPECT_EQ(engine_name(Engine::kPrecise), "precise");
  EXPECT_EQ(verdict_name(Verdict::kAgrees), "agrees");
  EXPECT_EQ(verdict_name(Verdict::kDiffers), "differs");
  EXPECT_EQ(verdict_name(Verdict::kUnsupported), "unsupported");
}

}  // namespace
}  // namespace posenc
