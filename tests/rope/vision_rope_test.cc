// Vision towers' 2D RoPE: the restarted-ladder axis map (AxisRule::kVision), its frequencies,
// the patch positions of Qwen2-VL / 2.5-VL / 3-VL and Llama 4, cos/sin, and apply_rope on them,
// against tests/reference/vision_rope_reference.h; the relative property per axis, the inverse,
// and every refusal.
//
// Sizes are the published configs' (config.json vision_config):
//   Qwen2-VL-7B-Instruct: embed_dim 1280, num_heads 16 (head_dim 80), patch_size 14, merge 2.
//   Qwen2.5-VL-7B-Instruct: hidden_size 1280, num_heads 16, window_size 112, patch_size 14.
//   Qwen3-VL-8B-Instruct: hidden_size 1152, num_heads 16 (head_dim 72), patch_size 16.
//   Llama-4-Scout-17B-16E: hidden_size 1408, num_attention_heads 16 (head_dim 88), image_size
//     336, patch_size 14 (S = 24), rope_theta 10000.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/cos_sin.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/ggml.h"
#include "posenc/core/spec.h"
#include "posenc/core/vision_positions.h"
#include "posenc/rope/apply.h"
#include "reference/vision_rope_reference.h"
#include "support/error_of.h"
#include "support/rope_test_support.h"

namespace {

using posenc::DType;
using posenc::Layout;
using posenc::Numerics;
using posenc::VisionGrid;
using posenc::VisionTower;
using posenc::VisionTowerModel;
using posenc::testing::Buffer;
using posenc::testing::CheckRotationSlots;
using posenc::testing::error_of;
using posenc::testing::Random;
using ::testing::HasSubstr;
using Sections = std::vector<std::int64_t>;

VisionTower Qwen2Vl() { return {VisionTowerModel::kQwen2Vl, 80, 10000.0, 2, 14, 0, 0}; }
VisionTower Qwen25Vl() { return {VisionTowerModel::kQwen25Vl, 80, 10000.0, 2, 14, 112, 0}; }
VisionTower Qwen3Vl() { return {VisionTowerModel::kQwen3Vl, 72, 10000.0, 2, 16, 0, 0}; }
VisionTower Llama4() { return {VisionTowerModel::kLlama4, 88, 10000.0, 1, 14, 0, 336}; }

TEST(VisionAxisMap, SectionsAreContiguousAxesWithARestartedLadder) {
  const posenc::AxisMap m = posenc::vision_sections(Sections{20, 20});
  EXPECT_EQ(m.rule, posenc::AxisRule::kVision);
  EXPECT_EQ(m.axes, 2);
  ASSERT_EQ(m.slot_axis.size(), 40u);
  for (std::int64_t j = 0; j < 40; ++j) {
    EXPECT_EQ(m.slot_axis[static_cast<std::size_t>(j)], j < 20 ? 0 : 1) << j;
    EXPECT_EQ(posenc::section_start(m, j), j < 20 ? 0 : 20) << j;
  }
  EXPECT_EQ(posenc::axis_rule_name(m.rule), "vision");
  EXPECT_EQ(posenc::axis_name(m, 1), "s1");
  EXPECT_EQ(posenc::section_start(posenc::mrope_sections(Sections{16, 24, 24}), 30), 0);
  EXPECT_EQ(posenc::vision_sections(Sections{2, 3, 4, 5}).axes, 4);
}

TEST(VisionAxisMap, BadSectionsAndSpecsAreRefusedNamingTheValue) {
  EXPECT_THAT(error_of([] { posenc::vision_sections(Sections{40}); }),
              HasSubstr("vision sections ([40]) must have 2 to 4 entries"));
  EXPECT_THAT(error_of([] {
                posenc::vision_sections(Sections{20, 0});
              }),
              HasSubstr("vision sections[1] (0) must be at least 1"));
  EXPECT_THAT(error_of([] {
                posenc::vision_sections(Sections{20, -2});
              }),
              HasSubstr("vision sections[1] (-2)"));
  posenc::RopeSpec s = posenc::vision_rope_spec(Qwen2Vl());
  EXPECT_TRUE(posenc::validate(s).empty());
  posenc::RopeSpec sum = s;
  sum.axis_map = posenc::vision_sections(Sections{20, 10});
  EXPECT_THAT(error_of([&] { posenc::validate(sum); }),
              HasSubstr("vision sections ([20, 10]) sums to 30, but rotary_dim / 2 is 40"));
  // A hand-built map whose sections do not match its axes.
  posenc::RopeSpec axes = s;
  axes.axis_map.sections = {20, 10, 10};
  EXPECT_THAT(error_of([&] { posenc::validate(axes); }),
              HasSubstr("vision sections ([20, 10, 10]) must have one entry per axis (2)"));
  posenc::RopeSpec yarn = s;
  yarn.method = posenc::Method::kYarn;
  yarn.factor = 2;
  yarn.original_max_position_embeddings = 1024;
  EXPECT_THAT(error_of([&] { posenc::validate(yarn); }),
              HasSubstr("rope_type (\"yarn\") cannot be used with the vision axis map ([20, 20])"));
  posenc::RopeSpec ff = s;
  ff.freq_factors.assign(40, 1.0);
  EXPECT_THAT(error_of([&] { posenc::validate(ff); }),
              HasSubstr("freq_factors (40 entries) cannot be used with the vision axis map"));
  // In ggml numerics the tower is ggml_rope_multi's VISION mode (ggml_multi_test checks its rows).
  EXPECT_EQ(posenc::compute_frequencies(s, Numerics::kGgml).ggml->mode, posenc::GgmlMode::kVision);
  VisionTower odd = Qwen2Vl();
  odd.head_dim = 78;
  EXPECT_THAT(error_of([&] { posenc::vision_rope_spec(odd); }),
              HasSubstr("vision head_dim (78) must be a positive multiple of 4"));
}

// Golden values by hand: Qwen2-VL head_dim 80, slot 19 = 1e4^(-38/40) = 10^-3.8, slot 20 starts
// the column ladder again at 1, slot 21 = 1e4^(-2/40) = 10^-0.2 (ggml.h: VISION "[yyyyxxxx]").
TEST(VisionFrequencies, TheLadderRestartsPerSectionInBothNumerics) {
  for (const VisionTower& t : {Qwen2Vl(), Qwen3Vl(), Llama4()}) {
    const posenc::RopeSpec spec = posenc::vision_rope_spec(t);
    const auto ref = posenc_ref::VisionSlotFrequencies(t.rope_theta, t.head_dim);
    const posenc::Frequencies p = posenc::compute_frequencies(spec, Numerics::kPrecise);
    const posenc::Frequencies h = posenc::compute_frequencies(spec, Numerics::kHf);
    ASSERT_EQ(p.inv_freq.size(), ref.size());
    for (std::size_t j = 0; j < ref.size(); ++j) {
      EXPECT_NEAR(p.inv_freq[j], ref[j], 4.5e-16 * ref[j]) << t.head_dim << " slot " << j;
      EXPECT_EQ(static_cast<double>(static_cast<float>(h.inv_freq[j])), h.inv_freq[j]);
      // float32's exponent 2k/dim is rounded before the pow: ln(1e4) * 2^-24 relative, twice.
      EXPECT_NEAR(h.inv_freq[j], ref[j], 1.2e-6 * ref[j]) << t.head_dim << " slot " << j;
      // The second section is the first one again, bit for bit, in both numerics.
      const std::size_t half = ref.size() / 2;
      if (j >= half) {
        EXPECT_EQ(p.inv_freq[j], p.inv_freq[j - half]) << j;
        EXPECT_EQ(h.inv_freq[j], h.inv_freq[j - half]) << j;
      }
    }
    EXPECT_EQ(p.attention_factor, 1.0);
  }
  const posenc::Frequencies q =
      posenc::compute_frequencies(posenc::vision_rope_spec(Qwen2Vl()), Numerics::kPrecise);
  EXPECT_NEAR(q.inv_freq[19], 1.5848931924611134e-4, 1e-19);
  EXPECT_EQ(q.inv_freq[20], 1.0);
  EXPECT_NEAR(q.inv_freq[21], 0.63095734448019325, 1e-16);
}

TEST(VisionPositions, QwenMergeBlockOrderMatchesTheReshapePermute) {
  for (const VisionTower& tower : {Qwen2Vl(), Qwen3Vl()}) {
    for (const VisionGrid g : {VisionGrid{1, 4, 6}, VisionGrid{2, 6, 4}, VisionGrid{1, 28, 28}}) {
      const auto p = posenc::vision_positions(tower, g, false);
      const auto ref = posenc_ref::QwenMergeOrder(g.t, g.h, g.w, tower.spatial_merge_size);
      EXPECT_EQ(p.ids[0], ref.a0);
      EXPECT_EQ(p.ids[1], ref.a1);
      EXPECT_TRUE(p.window_index.empty());
    }
  }
  // By hand, a 1x4x4 grid, m = 2: the first merge unit is rows 0,0,1,1 cols 0,1,0,1.
  const auto p = posenc::vision_positions(Qwen2Vl(), {1, 4, 4}, false);
  EXPECT_EQ(p.ids[0], (std::vector<std::int64_t>{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3}));
  EXPECT_EQ(p.ids[1], (std::vector<std::int64_t>{0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3}));
  VisionTower m1 = Qwen2Vl();
  m1.spatial_merge_size = 1;
  const auto rm = posenc::vision_positions(m1, {1, 2, 3}, false);
  EXPECT_EQ(rm.ids[0], (std::vector<std::int64_t>{0, 0, 0, 1, 1, 1}));
}

// Qwen2.5-VL: window_size 112 / merge 2 / patch 14 = 4 merge units a side; grids that divide
// and that leave partial windows at the bottom and right edges, one and two temporal patches.
TEST(VisionPositions, Qwen25WindowOrderMatchesGetWindowIndex) {
  const VisionTower t = Qwen25Vl();
  for (const VisionGrid g :
       {VisionGrid{1, 16, 16}, VisionGrid{1, 36, 20}, VisionGrid{2, 10, 18}, VisionGrid{1, 2, 2}}) {
    const auto p = posenc::vision_positions(t, g, true);
    const auto idx = posenc_ref::QwenWindowIndex(g.t, g.h / 2, g.w / 2, 4);
    EXPECT_EQ(p.window_index, idx);
    const auto ref = posenc_ref::ReorderUnits(posenc_ref::QwenMergeOrder(g.t, g.h, g.w, 2), idx, 4);
    EXPECT_EQ(p.ids[0], ref.a0);
    EXPECT_EQ(p.ids[1], ref.a1);
  }
  // By hand: a 1x4x12 grid is 2x6 units; the first window holds units 0-3 and 6-9.
  const auto p = posenc::vision_positions(t, {1, 4, 12}, true);
  EXPECT_EQ(p.window_index, (std::vector<std::int64_t>{0, 1, 2, 3, 6, 7, 8, 9, 4, 5, 10, 11}));
}

TEST(VisionPositions, Llama4HasOffsetOneAndTheClassTokenLast) {
  const auto p = posenc::vision_positions(Llama4(), {1, 24, 24}, false);
  const auto ref = posenc_ref::Llama4Positions(24);
  EXPECT_EQ(p.ids[0], ref.a0);
  EXPECT_EQ(p.ids[1], ref.a1);
  ASSERT_EQ(p.tokens(), 577);
  EXPECT_EQ(p.ids[0][0], 1);
  EXPECT_EQ(p.ids[1][0], 1);
  EXPECT_EQ(p.ids[0][25], 2);  // idx 25: x = 1 + 1, y = 1 + 1
  EXPECT_EQ(p.ids[1][25], 2);
  EXPECT_EQ(p.ids[0][576], 0);
  EXPECT_EQ(p.ids[1][576], 0);
}

TEST(VisionPositions, BadGridsAreRefusedNamingTheValue) {
  EXPECT_THAT(error_of([] {
                posenc::vision_positions(Qwen2Vl(), {1, 5, 4}, false);
              }),
              HasSubstr("grid 1x5x4: H (5) and W (4) must be multiples of spatial_merge_size (2)"));
  EXPECT_THAT(error_of([] {
                posenc::vision_positions(Qwen2Vl(), {1, 4, 4}, true);
              }),
              HasSubstr("--window: only Qwen2.5-VL's tower has window attention"));
  VisionTower w = Qwen25Vl();
  w.window_size = 100;
  EXPECT_THAT(error_of([&] {
                posenc::vision_positions(w, {1, 4, 4}, true);
              }),
              HasSubstr("vision_config.window_size (100) must be a positive multiple of "
                        "spatial_merge_size * patch_size (2 * 14 = 28)"));
  w.window_size = 112;
  w.patch_size = 0;
  EXPECT_THAT(error_of([&] {
                posenc::vision_positions(w, {1, 4, 4}, true);
              }),
              HasSubstr("(2 * 0 = 0)"));
  EXPECT_THAT(error_of([] {
                posenc::vision_positions(Llama4(), {1, 24, 20}, false);
              }),
              HasSubstr("grid 1x24x20: Llama 4's vision RoPE is built for one square tile"));
  EXPECT_THAT(error_of([] {
                posenc::vision_positions(Llama4(), {1, 20, 20}, false);
              }),
              HasSubstr("patch_size = 24 patches a side (1x24x24)"));
  EXPECT_THAT(error_of([] {
                posenc::vision_positions(Llama4(), {2, 24, 24}, false);
              }),
              HasSubstr("grid 2x24x24"));
  EXPECT_THAT(error_of([] {
                posenc::vision_positions(Qwen2Vl(), {1 << 12, 1 << 6, 1 << 6}, false);
              }),
              HasSubstr("more than 4194304 patches"));
  EXPECT_THAT(error_of([] { posenc::parse_vision_grid("1x28"); }),
              HasSubstr("--grid (1x28) must be TxHxW"));
  EXPECT_THAT(error_of([] { posenc::parse_vision_grid("1x0x28"); }),
              HasSubstr("--grid (1x0x28): \"0\" must be an integer >= 1"));
  EXPECT_EQ(posenc::parse_vision_grid("2x28x14").w, 14);
}

// cos/sin in transformers' layout: Qwen [patches][head_dim] = cat(angles, angles); Llama 4
// [patches][head_dim / 2]; precise values within a float32 rounding of the float64 reference.
TEST(VisionCosSin, PreciseMatchesTheReferenceInTransformersLayout) {
  for (const VisionTower& t : {Qwen2Vl(), Qwen25Vl(), Llama4()}) {
    const bool llama4 = t.model == VisionTowerModel::kLlama4;
    const VisionGrid g = llama4 ? VisionGrid{1, 24, 24} : VisionGrid{2, 8, 12};
    const auto p = posenc::vision_positions(t, g, t.model == VisionTowerModel::kQwen25Vl);
    const auto f = posenc::compute_frequencies(posenc::vision_rope_spec(t), Numerics::kPrecise);
    const auto cs = posenc::vision_cos_sin(f, t, p);
    const auto freq = posenc_ref::VisionSlotFrequencies(t.rope_theta, t.head_dim);
    const std::size_t n = freq.size();
    ASSERT_EQ(cs.width, static_cast<std::int64_t>(llama4 ? n : 2 * n));
    ASSERT_EQ(cs.cos.size(), static_cast<std::size_t>(p.tokens() * cs.width));
    for (std::int64_t k = 0; k < p.tokens(); ++k) {
      for (std::int64_t j = 0; j < cs.width; ++j) {
        const long double a = posenc_ref::VisionAngle(freq, p.ids[0][static_cast<std::size_t>(k)],
                                                      p.ids[1][static_cast<std::size_t>(k)],
                                                      static_cast<std::size_t>(j) % n);
        const auto i = static_cast<std::size_t>(k * cs.width + j);
        EXPECT_NEAR(cs.cos[i], static_cast<double>(std::cos(a)), 6e-8) << k << " " << j;
        EXPECT_NEAR(cs.sin[i], static_cast<double>(std::sin(a)), 6e-8) << k << " " << j;
      }
    }
  }
  // The class token: angle 0 everywhere.
  const auto f = posenc::compute_frequencies(posenc::vision_rope_spec(Llama4()), Numerics::kHf);
  const auto cs =
      posenc::vision_cos_sin(f, Llama4(), posenc::vision_positions(Llama4(), {1, 24, 24}, false));
  for (std::int64_t j = 0; j < cs.width; ++j) {
    EXPECT_EQ(cs.cos[static_cast<std::size_t>(576 * cs.width + j)], 1.0f);
    EXPECT_EQ(cs.sin[static_cast<std::size_t>(576 * cs.width + j)], 0.0f);
  }
  EXPECT_THAT(error_of([] {
                const auto text = posenc::compute_frequencies(
                    posenc::testing::Spec(128, 128, 0, Layout::kHalfSplit));
                posenc::vision_cos_sin(text, Qwen2Vl(), posenc::VisionPositions{});
              }),
              HasSubstr("must be a two-axis vision map"));
}

int Apply(const posenc::Frequencies& f, Buffer& buf, std::int64_t tokens, std::int64_t heads,
          const std::vector<std::int64_t>& pos, posenc::Direction dir) {
  posenc::RopeArgs args;
  args.q =
      posenc::TensorView::contiguous(buf.bytes.data(), buf.dtype, tokens, heads, f.spec.head_dim);
  args.positions = std::span<const std::int64_t>(pos);
  args.direction = dir;
  return posenc::apply_rope(f, args);
}

std::vector<std::int64_t> Flat(const posenc::VisionPositions& p) {
  std::vector<std::int64_t> v = p.ids[0];
  v.insert(v.end(), p.ids[1].begin(), p.ids[1].end());
  return v;
}

// Every pair rotated by its own section's coordinate with the restarted ladder (the exact
// rotation of the reference's angle), in both layouts, and the inverse.
TEST(VisionApply, RotatesEachSlotByItsSectionsCoordinate) {
  std::mt19937 rng(12);
  for (const VisionTower& t : {Qwen2Vl(), Qwen3Vl(), Llama4()}) {
    const bool llama4 = t.model == VisionTowerModel::kLlama4;
    const auto p =
        posenc::vision_positions(t, llama4 ? VisionGrid{1, 24, 24} : VisionGrid{1, 8, 6}, false);
    const auto f = posenc::compute_frequencies(posenc::vision_rope_spec(t));
    const std::int64_t tokens = p.tokens(), heads = 2, n = t.head_dim / 2;
    std::vector<std::int64_t> slot_pos;
    for (std::int64_t k = 0; k < tokens; ++k)
      for (std::int64_t j = 0; j < n; ++j)
        slot_pos.push_back(p.ids[j < n / 2 ? 0 : 1][static_cast<std::size_t>(k)]);
    // The reference's frequencies are the ones the check rotates with.
    const auto ref = posenc_ref::VisionSlotFrequencies(t.rope_theta, t.head_dim);
    for (std::size_t j = 0; j < ref.size(); ++j)
      ASSERT_NEAR(f.inv_freq[j], ref[j], 4.5e-16 * ref[j]);
    const Buffer in =
        Random(DType::kF32, static_cast<std::size_t>(tokens * heads * t.head_dim), rng);
    Buffer out = in;
    Apply(f, out, tokens, heads, Flat(p), posenc::Direction::kForward);
    // Reports each pair beyond the kernel tolerance; returns how many values it checked.
    EXPECT_EQ(CheckRotationSlots(f, in, out, tokens, heads, slot_pos, false, "vision"),
              tokens * heads * t.head_dim);
    Buffer back = out;
    Apply(f, back, tokens, heads, Flat(p), posenc::Direction::kInverse);
    for (std::size_t i = 0; i < static_cast<std::size_t>(tokens * heads * t.head_dim); ++i)
      EXPECT_NEAR(back.get(i), in.get(i), 1e-5) << i;
  }
}

float Dot(const Buffer& a, const Buffer& b, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(a.get(i)) * b.get(i);
  return static_cast<float>(s);
}

// q at (r1, c1), k at (r2, c2): q.k depends on r1 - r2 and c1 - c2 only, per axis.
TEST(VisionApply, TheRelativePropertyHoldsPerAxis) {
  std::mt19937 rng(3);
  for (const VisionTower& t : {Qwen2Vl(), Llama4()}) {
    const auto f = posenc::compute_frequencies(posenc::vision_rope_spec(t));
    const std::size_t d = static_cast<std::size_t>(t.head_dim);
    const Buffer q = Random(DType::kF32, d, rng), k = Random(DType::kF32, d, rng);
    auto score = [&](std::int64_t r1, std::int64_t c1, std::int64_t r2, std::int64_t c2) {
      Buffer a = q, b = k;
      Apply(f, a, 1, 1, {r1, c1}, posenc::Direction::kForward);
      Apply(f, b, 1, 1, {r2, c2}, posenc::Direction::kForward);
      return Dot(a, b, d);
    };
    const float base = score(5, 9, 2, 4);
    EXPECT_NEAR(score(13, 9, 10, 4), base, 1e-4);  // rows shifted together
    EXPECT_NEAR(score(5, 40, 2, 35), base, 1e-4);  // columns shifted together
    EXPECT_NEAR(score(105, 70, 102, 65), base, 1e-4);
    EXPECT_GT(std::abs(score(6, 9, 2, 4) - base), 1e-3);  // another row offset differs
    EXPECT_GT(std::abs(score(5, 9, 2, 5) - base), 1e-3);  // another column offset differs
  }
}

}  // namespace
