// config.json of the RoPE variants engines run (issue 12 item 5): per-layer RoPE (Gemma 2,
// Gemma 3 v4 and v5, Llama 4's NoPE layers), ChatGLM / GLM-4 (rope_ratio, half the head,
// adjacent pairs), HF Glm / Glm4 (adjacent pairs on the partial half), Phi-4-mini's partial
// LongRoPE, Hunyuan's NTK-alpha, Qwen2.5-1M dual chunk attention, and llama3 with
// low_freq_factor == high_freq_factor (Llama 4 Scout). The JSON carries the published configs'
// RoPE values (the other keys trimmed); ../shared/docs/rope-in-engines.md section 2 has them.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/dual_chunk.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"
#include "posenc/io/config.h"
#include "support/config_test_support.h"
#include "support/error_of.h"

namespace posenc {
namespace {

using ::posenc::testing::config_error_of;
using ::posenc::testing::error_of;
using ::posenc::testing::HasWarning;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Layers = std::vector<std::int64_t>;

// The indices of the layers without RoPE.
Layers nope_layers(const ModelConfig& c) {
  Layers out;
  for (std::int64_t i = 0; i < layer_count(c); ++i) {
    if (!layer_spec(c, i)) out.push_back(i);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Gemma

// google/gemma-3-27b-it config.json (transformers v4): rope_theta and the linear x8 on global
// layers, rope_local_base_freq on the sliding ones, every 6th layer global.
constexpr const char* kGemma3V4 = R"({
  "model_type": "gemma3",
  "text_config": {"model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376,
    "num_attention_heads": 32, "num_hidden_layers": 62, "max_position_embeddings": 131072,
    "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    "sliding_window": 1024, "sliding_window_pattern": 6}})";

TEST(ConfigVariants, Gemma3V4GlobalLayersScaledSlidingLayersLocalBaseUnscaled) {
  const ModelConfig c = parse_hf_config(kGemma3V4);
  EXPECT_THAT(c.warnings, ElementsAre());
  ASSERT_EQ(layer_count(c), 62);
  for (std::int64_t i = 0; i < 62; ++i) {
    SCOPED_TRACE(i);
    const std::optional<RopeSpec> s = layer_spec(c, i);
    ASSERT_TRUE(s);
    if ((i + 1) % 6 == 0) {
      EXPECT_EQ(c.layers[static_cast<std::size_t>(i)].type, "full_attention");
      EXPECT_EQ(s->method, Method::kLinear);
      EXPECT_EQ(s->factor, 8.0);
      EXPECT_EQ(s->rope_theta, 1e6);
    } else {
      EXPECT_EQ(c.layers[static_cast<std::size_t>(i)].type, "sliding_attention");
      EXPECT_EQ(s->method, Method::kNone);
      EXPECT_EQ(s->factor, 1.0);
      EXPECT_EQ(s->rope_theta, 1e4);
    }
    EXPECT_EQ(s->head_dim, 128);
    EXPECT_EQ(s->rotary_dim, 128);
  }
  // --layer-type sees both too, and spec stays the global layers'.
  EXPECT_EQ(c.layer_specs.at("sliding_attention").rope_theta, 1e4);
  EXPECT_EQ(c.spec.method, Method::kLinear);
  // The sliding layers' frequencies are plain RoPE at 1e4: no pair is divided by 8.
  const Frequencies f =
      compute_frequencies(c.layer_specs.at("sliding_attention"), Numerics::kPrecise);
  EXPECT_DOUBLE_EQ(f.inv_freq[1], std::pow(1e4, -2.0 / 128));
}

TEST(ConfigVariants, Gemma3V4DefaultsWhenPatternAndLocalBaseAreAbsent) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "gemma3_text", "head_dim": 256,
      "hidden_size": 2560, "num_attention_heads": 8, "num_hidden_layers": 12,
      "rope_theta": 1000000.0})");
  EXPECT_THAT(c.warnings, HasWarning("rope_local_base_freq", "10000"));
  EXPECT_EQ(layer_spec(c, 0)->rope_theta, 1e4);
  EXPECT_EQ(layer_spec(c, 5)->rope_theta, 1e6);
  EXPECT_EQ(layer_spec(c, 11)->rope_theta, 1e6);
}

// Gemma 3 as transformers v5 writes it: rope_parameters per layer type, keyed by layer_types.
TEST(ConfigVariants, Gemma3V5LayerTypesMapLayersToTheirDicts) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "gemma3_text", "head_dim": 128,
      "num_hidden_layers": 6,
      "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                      "sliding_attention", "sliding_attention", "full_attention"],
      "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  EXPECT_THAT(c.warnings, ElementsAre());
  EXPECT_EQ(layer_spec(c, 0)->rope_theta, 1e4);
  EXPECT_EQ(layer_spec(c, 0)->method, Method::kNone);
  EXPECT_EQ(layer_spec(c, 5)->method, Method::kLinear);
  EXPECT_EQ(layer_spec(c, 5)->rope_theta, 1e6);
}

TEST(ConfigVariants, Gemma3RopeLocalBaseFreqDisagreeingWithV5DictWarns) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "gemma3_text", "head_dim": 128,
      "rope_local_base_freq": 20000.0,
      "rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  EXPECT_THAT(c.warnings, HasWarning("rope_local_base_freq (20000)", "sliding_attention"));
}

TEST(ConfigVariants, Gemma3BadLocalBaseIsRefusedNamingTheKey) {
  EXPECT_THAT(
      config_error_of(R"({"model_type": "gemma3_text", "head_dim": 128,
      "rope_local_base_freq": -1})"),
      AllOf(HasSubstr("rope_local_base_freq"), HasSubstr("(-1)"), HasSubstr("greater than 1")));
}

// google/gemma-2-9b config.json: sliding_window on alternate layers, one RoPE (1e4) on all.
TEST(ConfigVariants, Gemma2AlternatesSlidingLayersWithOneRope) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "gemma2", "head_dim": 256,
      "hidden_size": 3584, "num_attention_heads": 16, "num_hidden_layers": 42,
      "max_position_embeddings": 8192, "rope_theta": 10000.0, "sliding_window": 4096})");
  EXPECT_THAT(c.warnings, ElementsAre());
  ASSERT_EQ(layer_count(c), 42);
  EXPECT_EQ(c.layers[0].type, "sliding_attention");
  EXPECT_EQ(c.layers[1].type, "full_attention");
  for (std::int64_t i = 0; i < 42; ++i) {
    EXPECT_EQ(layer_spec(c, i)->rope_theta, 1e4);
    EXPECT_EQ(layer_spec(c, i)->method, Method::kNone);
  }
  EXPECT_TRUE(nope_layers(c).empty());
}

// ---------------------------------------------------------------------------------------------
// Llama 4

// meta-llama/Llama-4-Scout-17B-16E-Instruct config.json (text_config).
constexpr const char* kScout = R"({
  "model_type": "llama4",
  "text_config": {"model_type": "llama4_text", "head_dim": 128, "hidden_size": 5120,
    "num_attention_heads": 40, "num_hidden_layers": 48, "max_position_embeddings": 10485760,
    "rope_theta": 500000.0,
    "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "attention_chunk_size": 8192, "attn_temperature_tuning": true, "floor_scale": 8192,
    "attn_scale": 0.1, "no_rope_layers": []}})";

TEST(ConfigVariants, Llama4ScoutNopeEveryFourthLayerAdjacentPairs) {
  const ModelConfig c = parse_hf_config(kScout);
  EXPECT_THAT(c.warnings, ElementsAre(HasSubstr("equals low_freq_factor")));
  ASSERT_EQ(layer_count(c), 48);
  Layers expected;
  for (std::int64_t i = 3; i < 48; i += 4) expected.push_back(i);
  EXPECT_EQ(nope_layers(c), expected);
  EXPECT_EQ(c.layers[0].type, "chunked_attention");
  EXPECT_EQ(c.layers[3].type, "full_attention");
  const RopeSpec s = *layer_spec(c, 0);
  EXPECT_EQ(s.method, Method::kLlama3);
  EXPECT_EQ(s.factor, 16.0);
  EXPECT_EQ(s.rope_theta, 5e5);
  EXPECT_EQ(s.llama3.low_freq_factor, 1.0);
  EXPECT_EQ(s.llama3.high_freq_factor, 1.0);
  EXPECT_EQ(s.layout, Layout::kInterleaved);  // transformers' complex multiply
  EXPECT_EQ(c.attention.attention_chunk_size, 8192);
  EXPECT_TRUE(c.attention.attn_temperature_tuning);
  EXPECT_EQ(c.attention.floor_scale, 8192);
  EXPECT_EQ(c.attention.attn_scale, 0.1);
}

TEST(ConfigVariants, Llama4ExplicitNoRopeLayersAndAThresholdTemperature) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "llama4_text", "head_dim": 64,
      "num_hidden_layers": 4, "no_rope_layers": [1, 0, 1, 0], "attn_temperature_tuning": 4})");
  EXPECT_EQ(nope_layers(c), (Layers{1, 3}));
  EXPECT_TRUE(c.attention.attn_temperature_tuning);
}

TEST(ConfigVariants, Llama4BadNoRopeLayersAreRefusedNamingTheEntry) {
  EXPECT_THAT(config_error_of(R"({"model_type": "llama4_text", "head_dim": 64,
      "num_hidden_layers": 2, "no_rope_layers": [1, 2]})"),
              AllOf(HasSubstr("no_rope_layers[1]"), HasSubstr("(2)"), HasSubstr("1 (the layer")));
  EXPECT_THAT(config_error_of(R"({"model_type": "llama4_text", "head_dim": 64,
      "no_rope_layers": "all"})"),
              AllOf(HasSubstr("no_rope_layers"), HasSubstr("list")));
}

TEST(ConfigVariants, Llama4NoRopeLayersDisagreeingWithLayerCountWarns) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "llama4_text", "head_dim": 64,
      "num_hidden_layers": 3, "no_rope_layers": [1, 0]})");
  EXPECT_THAT(c.warnings, HasWarning("no_rope_layers has 2 entries", "num_hidden_layers is 3"));
}

// llama3 with low == high (Scout): the smooth term divides by zero; transformers' torch.where
// discards it, and so must posenc: every pair is kept or divided by the factor, none NaN.
TEST(ConfigVariants, Llama3LowEqualsHighIsFiniteAndTwoBanded) {
  const ModelConfig c = parse_hf_config(kScout);
  for (Numerics n : {Numerics::kPrecise, Numerics::kHf, Numerics::kGgml}) {
    SCOPED_TRACE(numerics_name(n));
    const Frequencies f = compute_frequencies(c.spec, n);
    ASSERT_EQ(f.inv_freq.size(), 64u);
    for (std::size_t i = 0; i < f.inv_freq.size(); ++i) {
      ASSERT_TRUE(std::isfinite(f.inv_freq[i])) << i;
      const double wavelen = 2 * M_PI / f.unscaled_inv_freq[i];
      const double ratio = f.inv_freq[i] / f.unscaled_inv_freq[i];
      // Above L (8192) divided by 16, below kept.
      EXPECT_NEAR(ratio, wavelen > 8192 ? 1.0 / 16 : 1.0, 1e-6) << i;
    }
  }
}

TEST(ConfigVariants, Llama3HighBelowLowIsStillRefused) {
  EXPECT_THAT(config_error_of(R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3",
      "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
      "original_max_position_embeddings": 8192}})"),
              AllOf(HasSubstr("high_freq_factor (1)"), HasSubstr("low_freq_factor (4)")));
}

// ---------------------------------------------------------------------------------------------
// ChatGLM and GLM

// THUDM/glm-4-9b-chat config.json: kv_channels 128, rope_ratio 500, seq_length 131072.
TEST(ConfigVariants, ChatglmHalfHeadAdjacentPairsRopeRatio) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "chatglm", "hidden_size": 4096,
      "num_attention_heads": 32, "kv_channels": 128, "multi_query_group_num": 2,
      "original_rope": true, "rope_ratio": 500, "seq_length": 131072, "num_layers": 40})");
  EXPECT_THAT(c.warnings, ElementsAre());
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.rotary_dim, 64);
  EXPECT_EQ(c.spec.rotary_offset, 0);
  EXPECT_EQ(c.spec.layout, Layout::kInterleaved);
  EXPECT_EQ(c.spec.rope_theta, 5e6);
  EXPECT_EQ(c.spec.max_position_embeddings, 131072);
  // THUDM's RotaryEmbedding(64): 1 / base^(arange(0, 64, 2) / 64).
  const Frequencies f = compute_frequencies(c.spec, Numerics::kPrecise);
  ASSERT_EQ(f.inv_freq.size(), 32u);
  EXPECT_DOUBLE_EQ(f.inv_freq[31], std::pow(5e6, -62.0 / 64));
}

TEST(ConfigVariants, Chatglm2WithoutRopeRatioUsesBase10000) {
  // THUDM/chatglm2-6b: no kv_channels default needed (it is set), no rope_ratio.
  const ModelConfig c = parse_hf_config(R"({"model_type": "chatglm", "hidden_size": 4096,
      "num_attention_heads": 32, "kv_channels": 128, "seq_length": 32768})");
  EXPECT_EQ(c.spec.rope_theta, 10000.0);
  EXPECT_EQ(c.spec.rotary_dim, 64);
}

TEST(ConfigVariants, ChatglmOriginalRopeFalseRotatesHalvesWithAWarning) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "chatglm", "hidden_size": 4096,
      "num_attention_heads": 32, "original_rope": false})");
  EXPECT_EQ(c.spec.layout, Layout::kHalfSplit);
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_THAT(c.warnings, HasWarning("original_rope (false)", "vLLM"));
}

TEST(ConfigVariants, ChatglmBadRopeRatioIsRefusedNamingTheKey) {
  EXPECT_THAT(config_error_of(R"({"model_type": "chatglm", "kv_channels": 128,
      "rope_ratio": 0})"),
              AllOf(HasSubstr("rope_ratio"), HasSubstr("(0)"), HasSubstr("greater than 0")));
  EXPECT_THAT(config_error_of(R"({"model_type": "chatglm", "kv_channels": 126})"),
              AllOf(HasSubstr("kv_channels (126)"), HasSubstr("multiple of 4")));
}

// THUDM/glm-4-9b-hf (model_type glm) and GLM-4-0414 (glm4): GlmAttention rotates x[..., 0::2]
// with x[..., 1::2] on the first partial_rotary_factor of the head.
TEST(ConfigVariants, HfGlmGlm4AndCohereRotateAdjacentPairs) {
  for (const char* type : {"glm", "glm4"}) {
    SCOPED_TRACE(type);
    const ModelConfig c = parse_hf_config(std::string(R"({"model_type": ")") + type +
                                          R"(", "head_dim": 128, "hidden_size": 4096,
        "num_attention_heads": 32, "partial_rotary_factor": 0.5, "rope_theta": 10000.0,
        "max_position_embeddings": 131072})");
    EXPECT_EQ(c.spec.rotary_dim, 64);
    EXPECT_EQ(c.spec.layout, Layout::kInterleaved);
  }
  // The same mistake elsewhere: Cohere / Cohere2 (Command R) rotate adjacent pairs too
  // (modeling_cohere.py's rotate_half), and were parsed as halves.
  for (const char* type : {"cohere", "cohere2"}) {
    SCOPED_TRACE(type);
    const ModelConfig c = parse_hf_config(std::string(R"({"model_type": ")") + type +
                                          R"(", "hidden_size": 8192, "num_attention_heads": 64,
        "rope_theta": 8000000.0})");
    EXPECT_EQ(c.spec.layout, Layout::kInterleaved);
    EXPECT_EQ(c.spec.rotary_dim, 128);
  }
  // Glm4Moe takes gpt_neox's apply_rotary_pos_emb: halves.
  const ModelConfig moe = parse_hf_config(R"({"model_type": "glm4_moe", "head_dim": 128,
      "partial_rotary_factor": 0.5})");
  EXPECT_EQ(moe.spec.layout, Layout::kHalfSplit);
}

// ---------------------------------------------------------------------------------------------
// Phi-4-mini

std::string phi4_mini(std::size_t entries) {
  std::string list;
  for (std::size_t i = 0; i < entries; ++i) list += (i ? ", " : "") + std::string("1.5");
  return R"({"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 24,
      "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
      "partial_rotary_factor": 0.75, "rope_theta": 10000.0,
      "rope_scaling": {"type": "longrope", "short_factor": [)" +
         list + R"(], "long_factor": [)" + list + "]}}";
}

TEST(ConfigVariants, Phi4MiniPartialLongropeWith48Factors) {
  const ModelConfig c = parse_hf_config(phi4_mini(48));
  EXPECT_THAT(c.warnings, ElementsAre());
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.rotary_dim, 96);
  EXPECT_EQ(c.spec.method, Method::kLongrope);
  EXPECT_EQ(c.spec.factor, 32.0);
  const Frequencies f = compute_frequencies(c.spec, Numerics::kPrecise, 8192);
  ASSERT_EQ(f.inv_freq.size(), 48u);
  EXPECT_TRUE(f.uses_long_factors);
  EXPECT_NEAR(f.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-12);
  EXPECT_NEAR(f.inv_freq[47], std::pow(1e4, -94.0 / 96) / 1.5, 1e-18);
}

TEST(ConfigVariants, Phi4MiniHeadSizedFactorListsAreRefusedSaying48) {
  EXPECT_THAT(config_error_of(phi4_mini(64)),
              AllOf(HasSubstr("short_factor has 64 entries"),
                    HasSubstr("expected rotary_dim / 2 = 48"), HasSubstr("head_dim / 2 = 64")));
}

// ---------------------------------------------------------------------------------------------
// Hunyuan NTK-alpha

// tencent/Hunyuan-7B-Instruct: {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}: a static base
// b * alpha^(D / (D - 2)), the same at every sequence length.
TEST(ConfigVariants, HunyuanNtkAlphaIsAStaticBaseChange) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "hunyuan_v1_dense", "head_dim": 128,
      "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 262144,
      "rope_theta": 10000.0, "rope_scaling": {"alpha": 1000.0, "factor": 1.0, "type": "dynamic"}})");
  EXPECT_THAT(c.warnings, ElementsAre());
  ASSERT_EQ(c.spec.method, Method::kNtkAlpha);
  const double base = 1e4 * std::pow(1000.0, 128.0 / 126.0);
  const Frequencies f = compute_frequencies(c.spec, Numerics::kPrecise);
  EXPECT_NEAR(f.base / base, 1.0, 1e-12);
  EXPECT_NEAR(f.inv_freq[63] / std::pow(base, -126.0 / 128), 1.0, 1e-12);
  EXPECT_FALSE(depends_on_length(c.spec));
}

TEST(ConfigVariants, HunyuanAlphaWithAFactorWarnsThatTheFactorIsNotApplied) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 128,
      "rope_scaling": {"alpha": 1000.0, "factor": 4.0, "type": "dynamic"}})");
  EXPECT_THAT(c.warnings, HasWarning("factor (4.0)", "alpha alone"));
}

// ---------------------------------------------------------------------------------------------
// Qwen2.5-1M dual chunk attention

constexpr const char* kQwen1m = R"({"model_type": "qwen2", "hidden_size": 3584,
    "num_attention_heads": 28, "max_position_embeddings": 1010000, "rope_theta": 10000000.0,
    "dual_chunk_attention_config": {"chunk_size": 262144, "local_size": 8192,
      "original_max_position_embeddings": 262144, "sparse_attention_enabled": true}})";

TEST(ConfigVariants, DualChunkAttentionIsParsed) {
  const ModelConfig c = parse_hf_config(kQwen1m);
  EXPECT_THAT(c.warnings, ElementsAre());
  ASSERT_TRUE(c.dual_chunk);
  EXPECT_EQ(c.dual_chunk->chunk_size, 262144);
  EXPECT_EQ(c.dual_chunk->local_size, 8192);
  EXPECT_EQ(c.dual_chunk->original_max_position_embeddings, 262144);
  EXPECT_EQ(c.spec.rope_theta, 1e7);
  EXPECT_THAT(c.ignored_keys, ::testing::Not(::testing::Contains("dual_chunk_attention_config")));
}

TEST(ConfigVariants, DualChunkAttentionBadValuesAreRefusedNamingTheKey) {
  EXPECT_THAT(
      config_error_of(R"({"head_dim": 128, "dual_chunk_attention_config":
      {"chunk_size": 8192, "local_size": 8192}})"),
      AllOf(HasSubstr("dual_chunk_attention_config.local_size (8192)"), HasSubstr("less than")));
  EXPECT_THAT(config_error_of(R"({"head_dim": 128, "dual_chunk_attention_config":
      {"local_size": 8192}})"),
              HasSubstr("dual_chunk_attention_config.chunk_size"));
  const ModelConfig c = parse_hf_config(R"({"head_dim": 128, "dual_chunk_attention_config":
      {"chunk_size": 100, "local_size": 10, "chunk_stride": 3}})");
  EXPECT_THAT(c.warnings, HasWarning("dual_chunk_attention_config.chunk_stride", "not applied"));
}

// vLLM dual_chunk_rope.py with chunk_size 262144, local_size 8192: chunk_len 253952.
TEST(DualChunk, PositionsFollowVllmsCaches) {
  const std::int64_t len = 262144 - 8192;
  for (std::int64_t p : {std::int64_t{0}, std::int64_t{5}, len - 1, len, len + 7, 3 * len + 11,
                         std::int64_t{1009999}}) {
    SCOPED_TRACE(p);
    const DualChunkPositions d = dual_chunk_positions(262144, 8192, p);
    const std::int64_t m = p % len;
    EXPECT_EQ(d.chunk_len, len);
    EXPECT_EQ(d.key, m);
    EXPECT_EQ(d.intra, m);
    EXPECT_EQ(d.successive, std::min<std::int64_t>(m + len, 262144));
    EXPECT_EQ(d.inter, 262144);  // min(2 * 253952 - 1, 262144)
    EXPECT_EQ(d.succ_critical, m + len);
    EXPECT_EQ(d.inter_critical, m + 262144);
  }
  // The clamp bites once p mod chunk_len >= local_size.
  EXPECT_EQ(dual_chunk_positions(262144, 8192, 8191).successive, 8191 + len);
  EXPECT_EQ(dual_chunk_positions(262144, 8192, 9000).successive, 262144);
  // A chunk_len small enough that 2 chunk_len - 1 is below chunk_size.
  EXPECT_EQ(dual_chunk_positions(100, 60, 0).inter, 79);
}

TEST(DualChunk, BadArgumentsAreRefusedNamingTheValue) {
  EXPECT_THAT(error_of([] { dual_chunk_positions(0, 1, 0); }), HasSubstr("chunk_size (0)"));
  EXPECT_THAT(error_of([] { dual_chunk_positions(10, 10, 0); }), HasSubstr("local_size (10)"));
  EXPECT_THAT(error_of([] { dual_chunk_positions(10, 2, -1); }), HasSubstr("position (-1)"));
}

// ---------------------------------------------------------------------------------------------
// M-RoPE keys as they ship: the legacy "type": "mrope" inside a v5 rope_parameters too (the
// rope_scaling form is ConfigMrope.Qwen2VlLegacyMropeType).

TEST(ConfigVariants, LegacyMropeTypeInsideRopeParameters) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "qwen2_vl", "hidden_size": 3584,
      "num_attention_heads": 28, "rope_parameters": {"type": "mrope",
      "mrope_section": [16, 24, 24], "rope_theta": 1000000.0}})");
  EXPECT_THAT(c.warnings, ElementsAre());
  EXPECT_EQ(c.spec.method, Method::kNone);
  EXPECT_EQ(c.spec.rope_theta, 1e6);
  EXPECT_EQ(c.spec.axis_map, mrope_sections(std::vector<std::int64_t>{16, 24, 24}));
}

// ---------------------------------------------------------------------------------------------
// layer_spec

TEST(LayerSpec, OutOfRangeIsRefusedNamingTheCount) {
  const ModelConfig c = parse_hf_config(kScout);
  EXPECT_THAT(error_of([&] { layer_spec(c, 48); }),
              AllOf(HasSubstr("layer (48)"), HasSubstr("48 layers, 0 .. 47")));
  EXPECT_THAT(error_of([&] { layer_spec(c, -1); }), HasSubstr("layer (-1)"));
}

TEST(LayerSpec, ModelsWithOneRopeGiveSpecForEveryLayer) {
  const ModelConfig c = parse_hf_config(R"({"model_type": "llama", "hidden_size": 4096,
      "num_attention_heads": 32, "num_hidden_layers": 32})");
  EXPECT_TRUE(c.layers.empty());
  EXPECT_EQ(layer_count(c), 32);
  EXPECT_EQ(layer_spec(c, 31)->head_dim, 128);
  EXPECT_THAT(error_of([&] { layer_spec(c, 32); }), HasSubstr("32 layers"));
  EXPECT_THAT(c.ignored_keys, ::testing::Contains("num_hidden_layers"));
}

TEST(LayerSpec, V5NullLayerTypeHasNoRope) {
  const ModelConfig c = parse_hf_config(R"({"head_dim": 64,
      "layer_types": ["full_attention", "sliding_attention"],
      "rope_parameters": {"full_attention": null, "sliding_attention": {"rope_type": "default"}}})");
  EXPECT_EQ(nope_layers(c), (Layers{0}));
  EXPECT_TRUE(layer_spec(c, 1));
}

TEST(LayerSpec, GroupsAndRanges) {
  const ModelConfig c = parse_hf_config(kScout);
  const std::vector<LayerGroup> g = layer_groups(c);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].type, "chunked_attention");
  EXPECT_TRUE(g[0].rope);
  EXPECT_EQ(g[0].layers.size(), 36u);
  EXPECT_EQ(g[1].type, "full_attention");
  EXPECT_FALSE(g[1].rope);
  EXPECT_EQ(layer_ranges(g[0].layers).substr(0, 10), "0-2, 4-6, ");
  EXPECT_EQ(layer_ranges(Layers{3, 7, 8, 9}), "3, 7-9");
  EXPECT_EQ(layer_ranges(Layers{}), "");
}

}  // namespace
}  // namespace posenc
