// mmproj GGUF files (general.architecture "clip", llama.cpp's tools/mtmd): the vision tower's 2D
// RoPE in synthetic files. Qwen2-VL / Qwen2.5-VL / Qwen3-VL mergers are ggml_rope_multi's VISION
// mode, Llama 4's tower build_rope_2d (adjacent pairs per half); the refusals name the key.
#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/cos_sin.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/ggml.h"
#include "posenc/core/vision_positions.h"
#include "posenc/io/gguf.h"
#include "posenc/io/model.h"
#include "posenc/report/json.h"
#include "support/gguf_test_support.h"
#include "support/gguf_writer.h"
#include "support/temp_files.h"

namespace {

using posenc::GgmlMode;
using posenc::GgufModel;
using posenc::testing::error_of;
using posenc::testing::GgufWriter;
using posenc::testing::model_of;
using ::testing::AllOf;
using ::testing::HasSubstr;
using W = posenc::testing::GgufWriter;

// An mmproj header as convert_hf_to_gguf.py writes it (Qwen2-VL-7B's tower: 1280 / 16 = 80).
GgufWriter mmproj(const std::string& projector, std::uint32_t embd = 1280, std::uint32_t heads = 16,
                  const std::string& type_key = "clip.projector_type") {
  GgufWriter w;
  w.kv("general.architecture", W::str("clip"))
      .kv("clip.has_vision_encoder", W::boolean(true))
      .kv(type_key, W::str(projector))
      .kv("clip.vision.embedding_length", W::u32(embd))
      .kv("clip.vision.attention.head_count", W::u32(heads))
      .kv("clip.vision.image_size", W::u32(560))
      .kv("clip.vision.patch_size", W::u32(14))
      .kv("clip.vision.spatial_merge_size", W::u32(2))
      .kv("clip.vision.block_count", W::u32(32));
  return w;
}

TEST(GgufClip, Qwen2VlMergerIsGgmlVisionMode) {
  const GgufModel m = model_of(mmproj("qwen2vl_merger").bytes());
  const posenc::RopeSpec& s = m.config.spec;
  EXPECT_EQ(m.config.model_type, "clip");
  EXPECT_EQ(m.config.llama_cpp_rope_type, "vision");
  EXPECT_EQ(s.head_dim, 80);
  EXPECT_EQ(s.rotary_dim, 80);
  EXPECT_EQ(s.layout, posenc::Layout::kHalfSplit);
  EXPECT_EQ(s.rope_theta, 10000.0);
  EXPECT_EQ(s.axis_map.rule, posenc::AxisRule::kVision);
  EXPECT_EQ(s.axis_map.sections, (std::vector<std::int64_t>{20, 20}));
  EXPECT_EQ(s.max_position_embeddings, 40);  // 560 / 14 patches a side
  // models/qwen2vl.cpp: ggml_rope_multi(..., d_head/2, {d_head/4 x 4}, VISION, 32768, 10000, ...)
  EXPECT_EQ(m.ggml.mode, GgmlMode::kVision);
  EXPECT_EQ(m.ggml.n_dims, 40);
  EXPECT_EQ(m.ggml.sections, (std::array<int, 4>{20, 20, 20, 20}));
  EXPECT_EQ(m.ggml.n_ctx_orig, 32768);
  EXPECT_EQ(m.ggml.freq_base, 10000.0f);
  // The block count and the rest are not RoPE keys: listed, not warned about.
  EXPECT_THAT(m.config.ignored_keys, ::testing::Contains("clip.vision.block_count"));
  EXPECT_TRUE(m.config.warnings.empty()) << m.config.warnings.front();
}

TEST(GgufClip, EveryQwenMergerAndTheModalityKeyGiveTheTowerSpec) {
  const struct {
    const char* projector;
    std::uint32_t embd;
    posenc::VisionTowerModel model;
  } cases[] = {{"qwen2vl_merger", 1280, posenc::VisionTowerModel::kQwen2Vl},
               {"qwen2.5vl_merger", 1280, posenc::VisionTowerModel::kQwen25Vl},
               {"qwen2.5o", 1280, posenc::VisionTowerModel::kQwen25Vl},
               {"qwen3vl_merger", 1152, posenc::VisionTowerModel::kQwen3Vl}};
  for (const auto& c : cases) {
    for (const char* key : {"clip.projector_type", "clip.vision.projector_type"}) {
      const GgufModel m = model_of(mmproj(c.projector, c.embd, 16, key).bytes());
      posenc::VisionTower t;
      t.model = c.model;
      t.head_dim = c.embd / 16;
      const posenc::RopeSpec want = posenc::vision_rope_spec(t);
      EXPECT_EQ(m.config.spec.axis_map.sections, want.axis_map.sections) << c.projector << key;
      EXPECT_EQ(m.config.spec.layout, want.layout) << c.projector;
      const auto a = posenc::compute_frequencies(m.config.spec, posenc::Numerics::kHf);
      const auto b = posenc::compute_frequencies(want, posenc::Numerics::kHf);
      EXPECT_EQ(a.inv_freq, b.inv_freq) << c.projector;
      EXPECT_EQ(m.ggml.mode, GgmlMode::kVision) << c.projector;
    }
  }
}

// In ggml numerics the spec rotates exactly as llama.cpp's clip call with the file's parameters
// (positions as clip.cpp fills them: row, column, row, column).
TEST(GgufClip, GgmlNumericsOfTheTowerEqualTheClipCall) {
  for (const std::uint32_t embd : {1280u, 1152u}) {
    const GgufModel m = model_of(mmproj("qwen3vl_merger", embd).bytes());
    const posenc::Frequencies spec_f =
        posenc::compute_frequencies(m.config.spec, posenc::Numerics::kGgml);
    const posenc::Frequencies clip = posenc::frequencies_from_ggml(m.ggml);
    const std::size_t n = embd / 16 / 2;
    ASSERT_EQ(spec_f.pair_count(), static_cast<std::int64_t>(n));
    ASSERT_EQ(clip.pair_count(), static_cast<std::int64_t>(n));
    for (const std::array<std::int64_t, 4> p :
         {std::array<std::int64_t, 4>{0, 1, 0, 1}, {3, 17, 3, 17}, {63, 2, 63, 2}}) {
      std::vector<double> c1(n), s1(n), c2(n), s2(n);
      posenc::cos_sin_at(spec_f, p, c1, s1);
      posenc::cos_sin_at(clip, p, c2, s2);
      EXPECT_EQ(c1, c2) << embd << " row " << p[0];
      EXPECT_EQ(s1, s2) << embd << " row " << p[0];
    }
  }
}

TEST(GgufClip, Llama4TowerIsBuildRope2dWithAdjacentPairs) {
  GgufWriter w = mmproj("llama4", 1408, 16);  // Llama 4 Scout's tower: 88 dims a head
  const GgufModel m = model_of(w.bytes());
  const posenc::RopeSpec& s = m.config.spec;
  EXPECT_EQ(s.head_dim, 88);
  EXPECT_EQ(s.layout, posenc::Layout::kInterleaved);
  EXPECT_EQ(s.axis_map.rule, posenc::AxisRule::kVision);
  EXPECT_EQ(s.axis_map.sections, (std::vector<std::int64_t>{22, 22}));
  EXPECT_EQ(s.max_position_embeddings, 41);  // x, y in 1..40, the class token at 0
  EXPECT_EQ(m.config.llama_cpp_rope_type, "normal-2d");
  EXPECT_EQ(m.ggml.mode, GgmlMode::kNormal);
  EXPECT_EQ(m.ggml.n_dims, 44);
  // spatial_merge_size is a Qwen key: not read for Llama 4.
  EXPECT_THAT(m.config.ignored_keys, ::testing::Contains("clip.vision.spatial_merge_size"));
}

TEST(GgufClip, InspectJsonAndLoadModelShowTheRopeType) {
  const std::vector<std::uint8_t> bytes = mmproj("qwen2.5vl_merger").bytes();
  const std::string path = posenc_test::write_temp_file("posenc_gguf_clip", "mmproj.gguf",
                                                        std::string(bytes.begin(), bytes.end()));
  const posenc::ModelConfig c = posenc::load_model(path);
  EXPECT_EQ(c.spec.axis_map.rule, posenc::AxisRule::kVision);
  const std::string json = posenc::inspect_json(c, posenc::Numerics::kGgml);
  EXPECT_THAT(json, HasSubstr("\"llama_cpp_rope_type\": \"vision\""));
  EXPECT_THAT(json, HasSubstr("\"axis_rule\": \"vision\""));
  std::filesystem::remove_all(posenc_test::temp_dir("posenc_gguf_clip"));
}

TEST(GgufClip, TextModelsCarryTheirRopeTypeToo) {
  EXPECT_EQ(model_of(posenc::testing::tiny_llama().bytes()).config.llama_cpp_rope_type, "normal");
}

TEST(GgufClip, RefusesWhatCannotBeRead) {
  GgufWriter no_heads;
  no_heads.kv("general.architecture", W::str("clip"))
      .kv("clip.projector_type", W::str("qwen2vl_merger"))
      .kv("clip.vision.embedding_length", W::u32(1280))
      .kv("clip.vision.image_size", W::u32(560))
      .kv("clip.vision.patch_size", W::u32(14));
  EXPECT_THAT(error_of(no_heads.bytes()),
              AllOf(HasSubstr("t.gguf"), HasSubstr("clip.vision.attention.head_count is missing")));

  EXPECT_THAT(error_of(mmproj("qwen2vl_merger", 96, 16).bytes()),
              AllOf(HasSubstr("clip.vision.embedding_length (96)"),
                    HasSubstr("clip.vision.attention.head_count (16)"), HasSubstr("= 6"),
                    HasSubstr("positive multiple of 4")));
  EXPECT_THAT(error_of(mmproj("qwen2vl_merger", 100, 16).bytes()), HasSubstr("must divide evenly"));
  EXPECT_THAT(error_of(mmproj("qwen2vl_merger", 1280, 0).bytes()),
              HasSubstr("clip.vision.attention.head_count (0) must be greater than 0"));

  const std::string unknown = error_of(mmproj("qwen9vl_merger").bytes());
  EXPECT_THAT(unknown, AllOf(HasSubstr("clip.projector_type (\"qwen9vl_merger\")"),
                             HasSubstr("not a projector type llama.cpp knows"),
                             HasSubstr("qwen2vl_merger, qwen2.5vl_merger, qwen2.5o, "
                                       "qwen3vl_merger, llama4")));
  EXPECT_THAT(error_of(mmproj("gemma3").bytes()),
              AllOf(HasSubstr("clip.projector_type (\"gemma3\")"),
                    HasSubstr("whose tower posenc does not map"), HasSubstr("qwen3vl_merger")));

  GgufWriter untyped;
  untyped.kv("general.architecture", W::str("clip"))
      .kv("clip.vision.embedding_length", W::u32(1280))
      .kv("clip.vision.attention.head_count", W::u32(16));
  EXPECT_THAT(error_of(untyped.bytes()), AllOf(HasSubstr("clip.vision.projector_type are missing"),
                                               HasSubstr("assumes \"mlp\"")));

  GgufWriter audio;
  audio.kv("general.architecture", W::str("clip"))
      .kv("clip.has_vision_encoder", W::boolean(false))
      .kv("clip.projector_type", W::str("qwen2vl_merger"));
  EXPECT_THAT(error_of(audio.bytes()), HasSubstr("clip.has_vision_encoder is false"));

  GgufWriter wrong_type;
  wrong_type.kv("general.architecture", W::str("clip"))
      .kv("clip.projector_type", W::str("qwen2vl_merger"))
      .kv("clip.vision.embedding_length", W::u32(1280))
      .kv("clip.vision.attention.head_count", W::u32(16))
      .kv("clip.vision.image_size", W::u32(560))
      .kv("clip.vision.patch_size", W::u32(14))
      .kv("clip.vision.spatial_merge_size", W::u64(2));
  EXPECT_THAT(error_of(wrong_type.bytes()),
              AllOf(HasSubstr("clip.vision.spatial_merge_size (u64 2) has the wrong type"),
                    HasSubstr("as u32")));

  GgufWriter no_patch;
  no_patch.kv("general.architecture", W::str("clip"))
      .kv("clip.projector_type", W::str("llama4"))
      .kv("clip.vision.embedding_length", W::u32(1408))
      .kv("clip.vision.attention.head_count", W::u32(16))
      .kv("clip.vision.image_size", W::u32(336));
  EXPECT_THAT(error_of(no_patch.bytes()), HasSubstr("clip.vision.patch_size is missing"));

  EXPECT_THAT(error_of(GgufWriter()
                           .kv("general.architecture", W::str("clip"))
                           .kv("clip.projector_type", W::str("llama4"))
                           .kv("clip.vision.embedding_length", W::u32(1408))
                           .kv("clip.vision.attention.head_count", W::u32(16))
                           .kv("clip.vision.image_size", W::u32(330))
                           .kv("clip.vision.patch_size", W::u32(14))
                           .bytes()),
              AllOf(HasSubstr("clip.vision.image_size (330)"),
                    HasSubstr("multiple of clip.vision.patch_size (14)")));
}

}  // namespace
