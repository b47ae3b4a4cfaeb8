// The M-RoPE checks of posenc/analysis/doctor.h and compare's M-RoPE notes: each fires on the VL
// configs it concerns (Qwen2-VL-7B, Qwen2.5-VL-7B, Qwen3-VL-8B, written from their published
// config.json) and stays silent on Llama. The position ids a finding quotes are derived by hand
// from the rules of posenc/core/mrope_positions.h in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/analysis/doctor.h"
#include "posenc/analysis/engines.h"
#include "posenc/core/error.h"
#include "posenc/io/config.h"
#include "posenc/io/vision_config.h"
#include "posenc/report/json.h"

namespace posenc {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Qwen/Qwen2-VL-7B-Instruct config.json (the RoPE and vision keys as published).
constexpr std::string_view kQwen2Vl = R"({
  "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl",
  "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
  "max_position_embeddings": 32768, "rope_theta": 1000000.0, "sliding_window": 32768,
  "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
  "vision_start_token_id": 151652, "vision_end_token_id": 151653, "image_token_id": 151655,
  "video_token_id": 151656,
  "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16,
    "in_chans": 3, "hidden_size": 1536, "patch_size": 14, "spatial_merge_size": 2,
    "spatial_patch_size": 14, "temporal_patch_size": 2},
  "vocab_size": 152064})";

// Qwen/Qwen2.5-VL-7B-Instruct config.json (tokens_per_second 2, as the released checkpoints).
constexpr std::string_view kQwen25Vl = R"({
  "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
  "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
  "max_position_embeddings": 128000, "rope_theta": 1000000.0, "sliding_window": 32768,
  "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
  "vision_start_token_id": 151652, "image_token_id": 151655, "video_token_id": 151656,
  "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280,
    "intermediate_size": 3420, "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584,
    "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14, "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2,
    "temporal_patch_size": 2},
  "vocab_size": 152064})";

// Qwen/Qwen3-VL-8B-Instruct config.json (nested text_config, interleaved sections).
constexpr std::string_view kQwen3Vl = R"({
  "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
  "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
  "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 262144,
    "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20],
                     "rope_type": "default"},
    "rope_theta": 5000000, "vocab_size": 151936},
  "vision_config": {"depth": 27, "hidden_size": 1152, "patch_size": 16,
    "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 4096,
    "deepstack_visual_indexes": [8, 16, 24]}})";

// Qwen3-VL-8B with the YaRN block of vLLM PR #25384 (factor 3 over 262144), in rope_parameters.
constexpr std::string_view kQwen3VlYarn = R"({
  "model_type": "qwen3_vl",
  "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096,
    "num_attention_heads": 32, "max_position_embeddings": 786432,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 5000000, "factor": 3.0,
      "original_max_position_embeddings": 262144, "mrope_interleaved": true,
      "mrope_section": [24, 20, 20]}},
  "vision_config": {"spatial_merge_size": 2}})";

ModelConfig llama() {
  return parse_hf_config(R"({"model_type": "llama", "hidden_size": 4096,
      "num_attention_heads": 32, "max_position_embeddings": 4096})");
}

DoctorOptions options_of(std::string_view text, std::string_view layout = {}) {
  DoctorOptions o;
  o.vision = parse_vision_config(text, "config.json").vision;
  if (!layout.empty()) o.layout = parse_mrope_layout(layout);
  return o;
}

std::vector<Finding> doctor(std::string_view text, std::string_view layout = {}) {
  return diagnose(parse_hf_config(text), options_of(text, layout));
}

const Finding* find(const std::vector<Finding>& findings, std::string_view id) {
  const auto it =
      std::find_if(findings.begin(), findings.end(), [&](const Finding& f) { return f.id == id; });
  return it == findings.end() ? nullptr : &*it;
}

std::vector<std::string> ids(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const Finding& f : findings) out.push_back(f.id);
  return out;
}

const std::vector<std::string> kMropeIds = {"mrope-bf16-cache", "mrope-position-rule",
                                            "mrope-fractional-seconds", "mrope-yarn",
                                            "imrope-fourth-axis"};

TEST(DoctorMrope, SilentOnLlama) {
  const std::vector<Finding> f = diagnose(llama());
  for (const std::string& id : kMropeIds) EXPECT_THAT(ids(f), Not(Contains(id)));
  const Comparison c = compare_engines(llama().spec);
  for (const EngineComparison& e : c.engines) {
    for (const std::string& note : e.view.notes) {
      EXPECT_THAT(note, AllOf(Not(HasSubstr("M-RoPE")), Not(HasSubstr("IMROPE"))));
    }
  }
}

// Qwen2.5-VL, the representative layout text:16,image:1x28x28,text:8,video:16x28x28@2,text:8
// (merge 2, tokens_per_second 2): text 0..15; the image (196 tokens) at 16 with h, w 16..29; text
// 30..37; the video (16 x 196 tokens) at 38 with t = 38 + 4k up to 98 and h, w 38..51. The last
// text, token 16 + 196 + 8 + 3136 = 3356, is at 99 under hf-4.5 (max + 1) and at 38 + 14 = 52
// under hf-5.3.
TEST(DoctorMrope, Qwen25VlPositionRuleFirstDifference) {
  const std::vector<Finding> f = doctor(kQwen25Vl);
  const Finding* rule = find(f, "mrope-position-rule");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->severity, "warning");
  EXPECT_THAT(rule->title, HasSubstr("from token 3356"));
  EXPECT_THAT(rule->detail, HasSubstr("(t, h, w) = (99, 99, 99) under hf-4.5"));
  EXPECT_THAT(rule->detail, HasSubstr("(t, h, w) = (52, 52, 52) under hf-5.3"));
  EXPECT_THAT(rule->detail, HasSubstr("differ by up to 47"));
  EXPECT_THAT(rule->detail, HasSubstr("segment 5 (text:8)"));
  EXPECT_EQ(find(f, "mrope-yarn"), nullptr);
  EXPECT_EQ(find(f, "imrope-fourth-axis"), nullptr);
}

// Qwen2-VL has no time scaling: the same video reaches t = 38 + 15 = 53, so hf-4.5 resumes at 54.
TEST(DoctorMrope, Qwen2VlPositionRuleAndNoTimeScaling) {
  const std::vector<Finding> f = doctor(kQwen2Vl);
  const Finding* rule = find(f, "mrope-position-rule");
  ASSERT_NE(rule, nullptr);
  EXPECT_THAT(rule->detail, HasSubstr("(t, h, w) = (54, 54, 54) under hf-4.5"));
  EXPECT_THAT(rule->detail, HasSubstr("(t, h, w) = (52, 52, 52) under hf-5.3"));
  EXPECT_EQ(find(f, "mrope-fractional-seconds"), nullptr);  // Qwen2.5-VL only
  EXPECT_NE(find(f, "mrope-bf16-cache"), nullptr);
}

// A layout of images only: both rules resume at the block start + 14.
TEST(DoctorMrope, PositionRuleAgreesOnImages) {
  const std::vector<Finding> f = doctor(kQwen25Vl, "text:4,image:1x28x28,text:4");
  const Finding* rule = find(f, "mrope-position-rule");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->severity, "info");
  EXPECT_THAT(rule->title, HasSubstr("agree"));
}

// 0.5 s per group: trunc(0.5) = 0, so t = trunc(k x 0 x 2) = 0 for every group; in float the
// groups step by 0.5 x 2 = 1.
TEST(DoctorMrope, Qwen25VlFractionalSecondsProbe) {
  const std::vector<Finding> f = doctor(kQwen25Vl);
  const Finding* frac = find(f, "mrope-fractional-seconds");
  ASSERT_NE(frac, nullptr);
  EXPECT_EQ(frac->severity, "info");  // the probe, not the user's video
  EXPECT_THAT(frac->title, HasSubstr("8 temporal groups get 1 distinct t"));
  EXPECT_THAT(frac->detail, HasSubstr("[0,0,0,0,0,0,0,0] instead of [0,1,2,3,4,5,6,7]"));
  EXPECT_THAT(frac->detail, HasSubstr("tokens_per_second 2"));
}

// The layout's own video at 1.5 s: step trunc(1.5) x 2 = 2 instead of 3.
TEST(DoctorMrope, Qwen25VlFractionalSecondsFromLayout) {
  const std::vector<Finding> f = doctor(kQwen25Vl, "text:3,video:4x28x28@1.5,text:2");
  const Finding* frac = find(f, "mrope-fractional-seconds");
  ASSERT_NE(frac, nullptr);
  EXPECT_EQ(frac->severity, "warning");
  EXPECT_THAT(frac->detail, HasSubstr("[0,2,4,6] instead of [0,3,6,9]"));
  EXPECT_THAT(frac->detail, HasSubstr("(from the layout)"));
}

// tokens_per_second comes from the config: 4 (the class default) doubles the intended step.
TEST(DoctorMrope, FractionalSecondsReadsTokensPerSecond) {
  DoctorOptions o = options_of(kQwen25Vl);
  o.vision->tokens_per_second = 4;
  const std::vector<Finding> f = diagnose(parse_hf_config(kQwen25Vl), o);
  const Finding* frac = find(f, "mrope-fractional-seconds");
  ASSERT_NE(frac, nullptr);
  EXPECT_THAT(frac->detail, HasSubstr("instead of [0,2,4,6,8,10,12,14]"));
}

// bf16 has 8 significant bits: 127999 (the last position of 128000) rounds to 250 x 512 = 128000.
TEST(DoctorMrope, Bf16CacheAtTheModelsContext) {
  const std::vector<Finding> findings = doctor(kQwen25Vl);  // alive while b points into it
  const Finding* b = find(findings, "mrope-bf16-cache");
  ASSERT_NE(b, nullptr);
  EXPECT_THAT(b->title, HasSubstr("128000 tokens"));
  EXPECT_THAT(b->detail, HasSubstr("at positions 127936 .. 127999"));
  EXPECT_THAT(b->detail, HasSubstr("position 127999 becomes 128000"));
}

// Sections [24, 20, 20] over 64 pairs: sector 61 is 1 mod 3 but not below 60, 62 is 2 mod 3 but
// not below 60, neither is 0 mod 3: both go to e (../shared/docs/rope-in-engines.md 1.3).
TEST(DoctorMrope, Qwen3VlImropeFourthAxis) {
  const std::vector<Finding> f = doctor(kQwen3Vl);
  const Finding* e = find(f, "imrope-fourth-axis");
  ASSERT_NE(e, nullptr);
  EXPECT_THAT(e->title, HasSubstr("pairs 61, 62"));
  // The angle pair 61 misses at 4095: 4095 x 5e6^(-122/128).
  const double angle = 4095.0 * std::pow(5e6, -122.0 / 128.0);
  char want[32];
  std::snprintf(want, sizeof want, "%.2e rad at position 4095", angle);
  EXPECT_THAT(e->detail, HasSubstr(want));
  EXPECT_EQ(find(f, "mrope-yarn"), nullptr);  // default rope_type
  EXPECT_EQ(find(f, "mrope-fractional-seconds"), nullptr);
  // Each frame is its own 1xHxW block: the two rules agree on the representative layout.
  const Finding* rule = find(f, "mrope-position-rule");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->severity, "info");
}

TEST(DoctorMrope, ImropeSilentOnContiguousSections) {
  EXPECT_EQ(find(doctor(kQwen25Vl), "imrope-fourth-axis"), nullptr);
}

TEST(DoctorMrope, Qwen3VlYarn) {
  const std::vector<Finding> f = doctor(kQwen3VlYarn);
  const Finding* y = find(f, "mrope-yarn");
  ASSERT_NE(y, nullptr);
  // g(3, 1) = 0.1 ln 3 + 1
  char want[64];
  std::snprintf(want, sizeof want, "attention factor %.7g", 0.1 * std::log(3.0) + 1.0);
  EXPECT_THAT(y->title, HasSubstr(want));
  EXPECT_THAT(y->detail, HasSubstr("vllm attention factor"));
  EXPECT_THAT(y->detail, HasSubstr("llama.cpp attention factor"));
  EXPECT_THAT(y->detail, HasSubstr("vLLM before #25384"));
  EXPECT_NE(find(f, "imrope-fourth-axis"), nullptr);
}

// Without options the family comes from model_type with transformers' defaults
// (tokens_per_second 4 for Qwen2.5-VL).
TEST(DoctorMrope, WithoutVisionSettingsUsesModelTypeDefaults) {
  const std::vector<Finding> f = diagnose(parse_hf_config(kQwen25Vl));
  const Finding* frac = find(f, "mrope-fractional-seconds");
  ASSERT_NE(frac, nullptr);
  EXPECT_THAT(frac->detail, HasSubstr("tokens_per_second 4"));
}

TEST(DoctorMrope, CompareNotes) {
  const Comparison c = compare_engines(parse_hf_config(kQwen3VlYarn).spec);
  EXPECT_THAT(c.at(Engine::kLlamaCpp).view.notes,
              Contains(HasSubstr("IMROPE reads the fourth axis e for pairs 61, 62")));
  EXPECT_THAT(c.at(Engine::kLlamaCpp).view.notes, Contains(HasSubstr("M-RoPE with YaRN")));
  EXPECT_THAT(c.at(Engine::kVllm).view.notes,
              Contains(HasSubstr("MRotaryEmbedding casts its cos/sin cache")));
  EXPECT_THAT(c.at(Engine::kVllm).view.notes, Contains(HasSubstr("PR #25384")));
  const Comparison q25 = compare_engines(parse_hf_config(kQwen25Vl).spec);
  EXPECT_THAT(q25.at(Engine::kLlamaCpp).view.notes, Not(Contains(HasSubstr("IMROPE"))));
  // With the model_type: the position rule each engine follows, and where hf-4.5 and hf-5.3 part
  // on doctor's representative layout (token 3356 for Qwen2.5-VL, as above).
  const Comparison typed = compare_engines(parse_hf_config(kQwen25Vl).spec, 0, {}, "qwen2_5_vl");
  EXPECT_THAT(typed.at(Engine::kVllm).view.notes,
              Contains(AllOf(HasSubstr("M-RoPE positions: the hf-4.5 rule"),
                             HasSubstr("first differ at token 3356"))));
  EXPECT_THAT(typed.at(Engine::kTransformers).view.notes,
              Contains(HasSubstr("transformers v5 uses the hf-5.3 rule")));
  EXPECT_THAT(q25.at(Engine::kVllm).view.notes, Not(Contains(HasSubstr("M-RoPE positions"))));
}

TEST(DoctorMrope, Json) {
  const std::string j = doctor_json(parse_hf_config(kQwen25Vl), options_of(kQwen25Vl));
  EXPECT_THAT(j, HasSubstr("\"id\": \"mrope-position-rule\""));
  EXPECT_THAT(j, HasSubstr("\"id\": \"mrope-fractional-seconds\""));
  const std::string c = compare_json(parse_hf_config(kQwen3Vl));
  EXPECT_THAT(c, HasSubstr("IMROPE reads the fourth axis e"));
}

// A layout the model's merge size refuses is an Error naming the segment, not a crash.
TEST(DoctorMrope, BadLayoutIsAnError) {
  EXPECT_THROW(doctor(kQwen25Vl, "text:3,image:1x27x28"), Error);
}

}  // namespace
}  // namespace posenc
