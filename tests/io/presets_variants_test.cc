// The presets of issue 12 item 5 (VL models, Gemma 3, Llama 4, Hunyuan, Phi-4-mini, Qwen2.5-1M):
// each parses and gives the RoPE numbers its published config.json has (theta, dims, sections,
// factors, per-layer RoPE). Golden values: the published files as each preset's note names them.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"
#include "posenc/io/presets.h"

namespace posenc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Sections = std::vector<std::int64_t>;

TEST(PresetVariants, AllArePresent) {
  for (const char* name :
       {"qwen2-vl-7b", "qwen2.5-vl-7b", "qwen3-vl-8b", "qwen3-vl-8b-yarn", "glm-4.1v-9b",
        "gemma-3-27b", "llama-4-scout", "hunyuan-7b", "phi-4-mini", "qwen2.5-7b-instruct-1m"}) {
    SCOPED_TRACE(name);
    const Preset* p = find_preset(name);
    ASSERT_NE(p, nullptr);
    EXPECT_THAT(p->source, HasSubstr("config.json"));
  }
}

TEST(PresetVariants, Qwen2Vl7b) {
  const ModelConfig c = load_preset("qwen2-vl-7b");
  EXPECT_EQ(c.spec.rope_theta, 1e6);
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.rotary_dim, 128);
  EXPECT_EQ(c.spec.layout, Layout::kHalfSplit);
  EXPECT_EQ(c.spec.axis_map, mrope_sections(Sections{16, 24, 24}));
  EXPECT_EQ(c.spec.max_position_embeddings, 32768);
}

TEST(PresetVariants, Qwen25Vl7b) {
  const ModelConfig c = load_preset("qwen2.5-vl-7b");
  EXPECT_EQ(c.model_type, "qwen2_5_vl");
  EXPECT_EQ(c.spec.rope_theta, 1e6);
  EXPECT_EQ(c.spec.axis_map, mrope_sections(Sections{16, 24, 24}));
  EXPECT_EQ(c.spec.max_position_embeddings, 128000);
}

TEST(PresetVariants, Qwen3Vl8bAndItsYarn) {
  const ModelConfig c = load_preset("qwen3-vl-8b");
  EXPECT_EQ(c.spec.rope_theta, 5e6);
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.method, Method::kNone);
  EXPECT_EQ(c.spec.axis_map, mrope_interleaved(Sections{24, 20, 20}));
  const ModelConfig y = load_preset("qwen3-vl-8b-yarn");
  EXPECT_EQ(y.spec.method, Method::kYarn);
  EXPECT_EQ(y.spec.factor, 3.0);
  EXPECT_EQ(y.spec.original_max_position_embeddings, 262144);
  EXPECT_EQ(y.spec.axis_map, c.spec.axis_map);  // YaRN composes with the axis map
  EXPECT_NEAR(compute_frequencies(y.spec, Numerics::kPrecise).attention_factor,
              0.1 * std::log(3.0) + 1, 1e-12);
}

TEST(PresetVariants, Glm41v9b) {
  const ModelConfig c = load_preset("glm-4.1v-9b");
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.rotary_dim, 64);
  EXPECT_EQ(c.spec.layout, Layout::kInterleaved);
  EXPECT_EQ(c.spec.rope_theta, 1e4);
  EXPECT_EQ(c.spec.axis_map, mrope_sections(Sections{8, 12, 12}));
}

TEST(PresetVariants, Gemma3_27b) {
  const ModelConfig c = load_preset("gemma-3-27b");
  ASSERT_EQ(layer_count(c), 62);
  std::int64_t global = 0;
  for (std::int64_t i = 0; i < 62; ++i) {
    const RopeSpec s = *layer_spec(c, i);
    if ((i + 1) % 6 == 0) {
      ++global;
      EXPECT_EQ(s.method, Method::kLinear) << i;
      EXPECT_EQ(s.factor, 8.0) << i;
      EXPECT_EQ(s.rope_theta, 1e6) << i;
    } else {
      EXPECT_EQ(s.method, Method::kNone) << i;
      EXPECT_EQ(s.rope_theta, 1e4) << i;
    }
    EXPECT_EQ(s.head_dim, 128);
  }
  EXPECT_EQ(global, 10);
}

TEST(PresetVariants, Llama4Scout) {
  const ModelConfig c = load_preset("llama-4-scout");
  EXPECT_THAT(c.warnings, ElementsAre(HasSubstr("equals low_freq_factor")));
  ASSERT_EQ(layer_count(c), 48);
  EXPECT_FALSE(layer_spec(c, 3));
  EXPECT_FALSE(layer_spec(c, 47));
  const RopeSpec s = *layer_spec(c, 0);
  EXPECT_EQ(s.method, Method::kLlama3);
  EXPECT_EQ(s.rope_theta, 5e5);
  EXPECT_EQ(s.factor, 16.0);
  EXPECT_EQ(s.llama3.low_freq_factor, 1.0);
  EXPECT_EQ(s.llama3.high_freq_factor, 1.0);
  EXPECT_EQ(s.original_max_position_embeddings, 8192);
  EXPECT_EQ(s.layout, Layout::kInterleaved);
  EXPECT_EQ(c.attention.attention_chunk_size, 8192);
  EXPECT_EQ(c.attention.floor_scale, 8192);
  EXPECT_EQ(c.attention.attn_scale, 0.1);
}

TEST(PresetVariants, Hunyuan7b) {
  const ModelConfig c = load_preset("hunyuan-7b");
  EXPECT_EQ(c.spec.method, Method::kNtkAlpha);
  EXPECT_EQ(c.spec.alpha, 1000.0);
  EXPECT_EQ(c.spec.rope_theta, 1e4);
  EXPECT_NEAR(compute_frequencies(c.spec, Numerics::kPrecise).base,
              1e4 * std::pow(1000.0, 128.0 / 126.0), 1e-3);
}

TEST(PresetVariants, Phi4Mini) {
  const ModelConfig c = load_preset("phi-4-mini");
  EXPECT_EQ(c.spec.head_dim, 128);
  EXPECT_EQ(c.spec.rotary_dim, 96);
  EXPECT_EQ(c.spec.method, Method::kLongrope);
  EXPECT_EQ(c.spec.longrope.short_factor.size(), 48u);
  EXPECT_EQ(c.spec.longrope.long_factor.size(), 48u);
  EXPECT_EQ(c.spec.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.spec.max_position_embeddings, 131072);
  EXPECT_NEAR(compute_frequencies(c.spec, Numerics::kPrecise).attention_factor,
              std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-12);
}

TEST(PresetVariants, Qwen25_7bInstruct1m) {
  const ModelConfig c = load_preset("qwen2.5-7b-instruct-1m");
  EXPECT_EQ(c.spec.rope_theta, 1e7);
  EXPECT_EQ(c.spec.max_position_embeddings, 1010000);
  ASSERT_TRUE(c.dual_chunk);
  EXPECT_EQ(c.dual_chunk->chunk_size, 262144);
  EXPECT_EQ(c.dual_chunk->local_size, 8192);
}

}  // namespace
}  // namespace posenc
