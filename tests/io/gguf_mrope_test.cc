// GGUF multi-section RoPE: {arch}.rope.dimension_sections and the rope type llama.cpp picks per
// architecture (llama_model_rope_type: qwen2vl MROPE, qwen3vl / qwen3vlmoe IMROPE, glm4 / glm4moe
// MROPE when the sections give positive t and h), in synthetic files; the refusals of a wrong
// length, type, negative or all-zero sections; and the frequencies such a model gives in ggml
// numerics against ggml_rope_multi with the file's parameters.
#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/core/cos_sin.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/ggml.h"
#include "posenc/io/gguf.h"
#include "posenc/io/model.h"
#include "support/error_of.h"
#include "support/gguf_test_support.h"
#include "support/gguf_writer.h"
#include "support/matchers.h"
#include "support/temp_files.h"

namespace {

using posenc::GgmlMode;
using posenc::GgufModel;
using posenc::testing::GgufWriter;
using posenc::testing::model_of;
using ::testing::AllOf;
using ::testing::HasSubstr;
using W = posenc::testing::GgufWriter;

// A Qwen2-VL-like text model: 2 heads of 128 dims, all rotated.
GgufWriter tiny_vl(const std::string& arch, const std::vector<W::Value>& sections,
                   std::uint32_t element_type = 5) {
  GgufWriter w;
  w.kv("general.architecture", W::str(arch))
      .kv(arch + ".context_length", W::u32(32768))
      .kv(arch + ".embedding_length", W::u32(256))
      .kv(arch + ".attention.head_count", W::u32(2))
      .kv(arch + ".rope.dimension_count", W::u32(128))
      .kv(arch + ".rope.freq_base", W::f32(1000000.0f));
  if (!sections.empty()) w.kv(arch + ".rope.dimension_sections", W::array(element_type, sections));
  return w;
}

std::vector<W::Value> S(std::vector<int> v) {
  std::vector<W::Value> out;
  for (const int x : v) out.push_back(W::i32(x));
  return out;
}

std::string error_of_file(const GgufWriter& w) { return posenc::testing::error_of(w.bytes()); }

TEST(GgufMrope, Qwen2VlReadsItsSectionsAsMrope) {
  const GgufModel m = model_of(tiny_vl("qwen2vl", S({16, 24, 24, 0})).bytes());
  EXPECT_EQ(m.ggml.mode, GgmlMode::kMrope);
  EXPECT_EQ(m.ggml.sections, (std::array<int, 4>{16, 24, 24, 0}));
  const posenc::AxisMap& a = m.config.spec.axis_map;
  EXPECT_EQ(a.rule, posenc::AxisRule::kGgml);
  EXPECT_EQ(a.axes, 4);
  ASSERT_EQ(a.slot_axis.size(), 64u);
  EXPECT_EQ(a.slot_axis[15], 0);
  EXPECT_EQ(a.slot_axis[16], 1);
  EXPECT_EQ(a.slot_axis[40], 2);
  EXPECT_EQ(m.config.spec.layout, posenc::Layout::kHalfSplit);
  EXPECT_THAT(m.notes, ::testing::Contains(HasSubstr("mode 8 (LLAMA_ROPE_TYPE_MROPE")));
  EXPECT_THAT(m.config.warnings, ::testing::IsEmpty());
}

TEST(GgufMrope, Qwen3VlIsImropeAndItsFourthAxisPairsAreNamed) {
  for (const std::string arch : {"qwen3vl", "qwen3vlmoe"}) {
    const GgufModel m = model_of(tiny_vl(arch, S({24, 20, 20, 0})).bytes());
    EXPECT_EQ(m.ggml.mode, GgmlMode::kImrope) << arch;
    EXPECT_EQ(m.config.spec.axis_map.slot_axis[61], 3) << arch;
    EXPECT_THAT(m.notes, ::testing::Contains(HasSubstr("pairs 61, 62 read the fourth position")));
  }
}

TEST(GgufMrope, Glm4SwitchesToMropeOnlyWithPositiveTAndHSections) {
  GgmlMode mode = model_of(tiny_vl("glm4", S({8, 12, 12, 0})).bytes()).ggml.mode;
  EXPECT_EQ(mode, GgmlMode::kMrope);
  const GgufModel plain = model_of(tiny_vl("glm4", S({0, 0, 0, 0})).bytes());
  EXPECT_EQ(plain.ggml.mode, GgmlMode::kNormal);
  EXPECT_EQ(plain.config.spec.axis_map.rule, posenc::AxisRule::kSingle);
  EXPECT_EQ(model_of(tiny_vl("glm4", {}).bytes()).ggml.mode, GgmlMode::kNormal);
  EXPECT_EQ(model_of(tiny_vl("glm4moe", S({8, 12, 12, 0})).bytes()).ggml.mode, GgmlMode::kMrope);
}

TEST(GgufMrope, BadSectionsAreRefusedNamingTheKey) {
  EXPECT_THAT(error_of_file(tiny_vl("qwen2vl", {})),
              HasSubstr("qwen2vl.rope.dimension_sections is missing"));
  EXPECT_THAT(error_of_file(tiny_vl("qwen2vl", S({16, 24, 24}))),
              HasSubstr("must hold 4 sections (t, h, w, e: GGML_MROPE_SECTIONS), not 3"));
  EXPECT_THAT(error_of_file(tiny_vl("qwen2vl", S({16, 24, 24, 0, 0}))), HasSubstr("not 5"));
  EXPECT_THAT(error_of_file(tiny_vl("qwen2vl", S({16, -24, 24, 0}))),
              HasSubstr("section 1 (-24) must be a non-negative int32"));
  EXPECT_THAT(error_of_file(tiny_vl("qwen2vl", S({0, 0, 0, 64}))),
              HasSubstr("the t, h and w sections are all 0"));
  EXPECT_THAT(error_of_file(tiny_vl("qwen2vl", {W::f32(16), W::f32(24), W::f32(24), W::f32(0)}, 6)),
              HasSubstr("has the wrong type"));
  GgufWriter scalar = tiny_vl("qwen2vl", {});
  scalar.kv("qwen2vl.rope.dimension_sections", W::i32(16));
  EXPECT_THAT(error_of_file(scalar), HasSubstr("an array of 4 i32"));
  EXPECT_THAT(error_of_file(tiny_vl("qwen2vl", S({100, 100, 100, 0}))),
              AllOf(HasSubstr("sum to 300, more than the head dim (128"),
                    HasSubstr("qwen2vl.rope.dimension_sections")));
  // Sections near int32's limit: their sum is taken in 64 bits (the fuzzer found an int overflow
  // here: fuzz/corpus/gguf/regression-sections-sum-overflow.gguf) and refused by size.
  EXPECT_THAT(error_of_file(tiny_vl("qwen2vl", S({1845624835, 778860082, 0, 0}))),
              HasSubstr("sum to 2624484917, more than"));
}

// A head far beyond kMaxHeadDim is refused naming head_dim, before the axis map of its 2^29 pairs
// is built (fuzz_gguf found such a file taking 16 s and a gigabyte under ASan).
TEST(GgufMrope, AHugeHeadIsRefusedBeforeItsAxisMapIsBuilt) {
  GgufWriter w;
  w.kv("general.architecture", W::str("qwen2vl"))
      .kv("qwen2vl.context_length", W::u32(32768))
      .kv("qwen2vl.embedding_length", W::u32(1u << 30))
      .kv("qwen2vl.attention.head_count", W::u32(1))
      .kv("qwen2vl.rope.dimension_count", W::u32(1u << 30))
      .kv("qwen2vl.rope.dimension_sections", W::array(5, S({16, 24, 24, 0})));
  EXPECT_THAT(error_of_file(w), HasSubstr("head_dim (1073741824) must be at most 65536"));
}

// The model in ggml numerics rotates like ggml_rope_multi with the file's parameters: spec-mode
// rows gather the one-axis ggml rows by the kGgml axis map.
TEST(GgufMrope, GgmlNumericsOfTheModelEqualGgmlRopeMulti) {
  const GgufModel m = model_of(tiny_vl("qwen3vl", S({24, 20, 20, 0})).bytes());
  const posenc::Frequencies spec_f =
      posenc::compute_frequencies(m.config.spec, posenc::Numerics::kGgml);
  const posenc::Frequencies multi = posenc::frequencies_from_ggml(m.ggml);
  for (const std::array<std::int64_t, 4> p :
       {std::array<std::int64_t, 4>{5, 5, 5, 0}, {100, 3, 9, 0}, {200000, 7, 2, 1}}) {
    std::vector<double> c1(64), s1(64), c2(64), s2(64);
    posenc::cos_sin_at(spec_f, p, c1, s1);
    posenc::cos_sin_at(multi, p, c2, s2);
    EXPECT_EQ(c1, c2) << p[0];
    EXPECT_EQ(s1, s2) << p[0];
  }
}

TEST(GgufMrope, LoadModelCarriesTheAxisMap) {
  const std::vector<std::uint8_t> bytes = tiny_vl("qwen2vl", S({16, 24, 24, 0})).bytes();
  const std::string path = posenc_test::write_temp_file("posenc_gguf_mrope", "vl.gguf",
                                                        std::string(bytes.begin(), bytes.end()));
  const posenc::ModelConfig c = posenc::load_model(path);
  EXPECT_EQ(c.spec.axis_map.rule, posenc::AxisRule::kGgml);
  EXPECT_EQ(c.spec.axis_map.sections, (std::vector<std::int64_t>{16, 24, 24, 0}));
  std::filesystem::remove_all(posenc_test::temp_dir("posenc_gguf_mrope"));
}

}  // namespace
