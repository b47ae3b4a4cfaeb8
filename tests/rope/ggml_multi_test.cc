// ggml_rope_multi in ggml numerics (modes mrope, imrope, vision) against
// tests/reference/ggml_multi_reference.h bit for bit: cos/sin rows and whole rotations over many
// positions (large ones, text tokens with all axes equal and with e = 0), every mode, published
// and repeating section sets, freq factors, YaRN, forward and inverse, f32 and f16 (the dtypes
// ggml's CPU rope takes), on every SIMD target; and the refusals of validate().
//
// Sections: Qwen2-VL GGUF rope.dimension_sections [16, 24, 24, 0] (head 128); Qwen3-VL
// [24, 20, 20, 0]; the Qwen2-VL ViT's ggml_rope_multi call {d/4, d/4, d/4, d/4} with
// n_dims = d / 2 (clip.cpp), and ggml.h's vision example [y, x, 0, 0].
#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/cos_sin.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/ggml.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "reference/ggml_multi_reference.h"
#include "support/error_of.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

using posenc::DType;
using posenc::GgmlMode;
using posenc::GgmlRopeParams;
using posenc::testing::Buffer;
using posenc::testing::error_of;
using posenc_test::ForEachTarget;
using ::testing::HasSubstr;
using Pos = std::array<std::int32_t, 4>;

struct Case {
  std::string name;
  GgmlRopeParams p;
  int head_dim;
};

GgmlRopeParams Multi(GgmlMode mode, int n_dims, std::array<int, 4> sections) {
  GgmlRopeParams p;
  p.mode = mode;
  p.n_dims = n_dims;
  p.sections = sections;
  p.freq_base = 1000000.0f;
  return p;
}

std::vector<Case> Cases() {
  std::vector<Case> out;
  auto add = [&](std::string name, GgmlRopeParams p, int head_dim) {
    out.push_back({name, p, head_dim});
    GgmlRopeParams yarn = p;  // YaRN parameters as llama.cpp passes them for a 4x Qwen3-VL
    yarn.freq_scale = 0.25f;
    yarn.ext_factor = 1.0f;
    yarn.n_ctx_orig = 32768;
    yarn.attn_factor = 0.878f;
    out.push_back({name + "_yarn", yarn, head_dim});
    GgmlRopeParams ff = p;
    ff.freq_factors.resize(static_cast<std::size_t>(posenc::ggml_pair_count(p)));
    for (std::size_t i = 0; i < ff.freq_factors.size(); ++i)
      ff.freq_factors[i] = 1.0f + 0.37f * static_cast<float>(i % 7);
    ff.freq_scale = 0.5f;
    out.push_back({name + "_freq_factors", ff, head_dim});
  };
  add("mrope_qwen2vl", Multi(GgmlMode::kMrope, 128, {16, 24, 24, 0}), 128);
  add("mrope_repeated", Multi(GgmlMode::kMrope, 128, {4, 6, 6, 0}), 128);  // sum 16 < 64
  add("mrope_e_axis", Multi(GgmlMode::kMrope, 64, {8, 8, 8, 8}), 96);      // partial head
  add("imrope_qwen3vl", Multi(GgmlMode::kImrope, 128, {24, 20, 20, 0}), 128);
  add("imrope_repeated", Multi(GgmlMode::kImrope, 128, {4, 3, 3, 2}), 128);
  add("vision_quarter", Multi(GgmlMode::kVision, 40, {20, 20, 20, 20}), 80);
  add("vision_yx", Multi(GgmlMode::kVision, 32, {16, 16, 0, 0}), 64);
  add("vision_empty_h", Multi(GgmlMode::kVision, 40, {10, 0, 10, 0}), 80);  // w never restarts
  return out;
}

posenc_ggml::MultiParams RefOf(const Case& c) {
  posenc_ggml::MultiParams m;
  m.rope.n_dims = c.p.n_dims;
  m.rope.n_ctx_orig = c.p.n_ctx_orig;
  m.rope.freq_base = c.p.freq_base;
  m.rope.freq_scale = c.p.freq_scale;
  m.rope.ext_factor = c.p.ext_factor;
  m.rope.attn_factor = c.p.attn_factor;
  m.rope.beta_fast = c.p.beta_fast;
  m.rope.beta_slow = c.p.beta_slow;
  m.rope.freq_factors = c.p.freq_factors;
  m.mode = static_cast<posenc_ggml::MultiMode>(static_cast<int>(c.p.mode));
  m.sections = c.p.sections;
  m.ne0 = c.head_dim;
  return m;
}

std::vector<Pos> Positions() {
  std::vector<Pos> out = {{0, 0, 0, 0},
                          {1, 1, 1, 1},
                          {7, 7, 7, 0},
                          {200000, 200000, 200000, 0},
                          {5, 9, 3, 0},
                          {100, 104, 131, 0},
                          {2147483647, 3, 2147483000, 11},
                          {-3, 2, 5, 1}};
  std::mt19937 rng(12);
  std::uniform_int_distribution<std::int32_t> d(0, 1 << 20);
  for (int i = 0; i < 24; ++i) out.push_back({d(rng), d(rng), d(rng), i % 3 ? 0 : d(rng)});
  return out;
}

TEST(GgmlMulti, CosSinRowsMatchTheReferenceBitForBit) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const posenc::Frequencies f = posenc::frequencies_from_ggml(c.p);
    ASSERT_EQ(f.spec.axis_map.axes, 4);
    const std::size_t n = f.inv_freq.size();
    ASSERT_EQ(n, static_cast<std::size_t>(posenc::ggml_pair_count(c.p)));
    for (const Pos& p : Positions()) {
      const std::int64_t ap[4] = {p[0], p[1], p[2], p[3]};
      std::vector<double> cs(n), sn(n);
      posenc::cos_sin_at(f, ap, cs, sn);
      const std::vector<float> ref = posenc_ggml::MultiCache(RefOf(c), p, 1.0f);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(static_cast<float>(cs[i]), ref[2 * i]) << p[0] << "," << p[1] << " pair " << i;
        ASSERT_EQ(static_cast<float>(sn[i]), ref[2 * i + 1]) << p[0] << " pair " << i;
      }
    }
  }
}

// Text tokens: one position on every axis is one-axis NeoX RoPE for mrope and imrope (every axis
// walks the same ladder), but not for vision (its ladder restarts per section).
TEST(GgmlMulti, TextTokensEqualOneAxisNeoxExceptVision) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    GgmlRopeParams one = c.p;
    one.mode = GgmlMode::kNeox;
    one.sections = {};
    if (c.p.mode == GgmlMode::kVision) continue;
    const posenc::Frequencies fm = posenc::frequencies_from_ggml(c.p);
    const posenc::Frequencies f1 = posenc::frequencies_from_ggml(one);
    const std::size_t n = f1.inv_freq.size();
    for (const std::int64_t p : {0, 3, 4097, 200000}) {
      const std::int64_t ap[4] = {p, p, p, p};
      std::vector<double> cm(n), sm(n), c1(n), s1(n);
      posenc::cos_sin_at(fm, ap, cm, sm);
      posenc::cos_sin_at(f1, p, c1, s1);
      EXPECT_EQ(cm, c1) << p;
      EXPECT_EQ(sm, s1) << p;
    }
  }
  // Vision restarts: pair 20 of [20, 20, 20, 20] has pair 0's angle.
  const posenc::Frequencies v =
      posenc::frequencies_from_ggml(Multi(GgmlMode::kVision, 40, {20, 20, 20, 20}));
  EXPECT_EQ(v.inv_freq[20], v.inv_freq[0]);
  EXPECT_EQ(v.inv_freq[21], v.inv_freq[1]);
  // [10, 0, 10, 0]: the empty h section blocks w's restart, so pair 10 keeps the ladder.
  const posenc::Frequencies b =
      posenc::frequencies_from_ggml(Multi(GgmlMode::kVision, 40, {10, 0, 10, 0}));
  EXPECT_NE(b.inv_freq[10], b.inv_freq[0]);
  EXPECT_EQ(b.inv_freq[20], b.inv_freq[0]);  // the cycle starts again at sector 0
}

TEST(GgmlMulti, Qwen3VlImropeReadsTheFourthAxisOnPairs61And62) {
  const posenc::AxisMap m = posenc::ggml_axis_map(Multi(GgmlMode::kImrope, 128, {24, 20, 20, 0}));
  ASSERT_EQ(m.slot_axis.size(), 64u);
  EXPECT_EQ(m.rule, posenc::AxisRule::kGgml);
  for (std::size_t i = 0; i < 64; ++i) {
    const int want = i == 61 || i == 62 ? 3 : (i < 60 ? static_cast<int>(i % 3) : 0);
    EXPECT_EQ(m.slot_axis[i], want) << i;
  }
  // Repeating MROPE sections: [4, 6, 6, 0] cycles every 16 pairs.
  const posenc::AxisMap r = posenc::ggml_axis_map(Multi(GgmlMode::kMrope, 128, {4, 6, 6, 0}));
  EXPECT_EQ(r.slot_axis[16], 0);
  EXPECT_EQ(r.slot_axis[20], 1);
  EXPECT_EQ(r.slot_axis[26], 2);
}

// apply_rope over [4, tokens] positions against the reference's cache and rotate_pairs.
void CheckApply(const Case& c, DType dtype, bool inverse, bool with_table, bool fused) {
  const posenc::Frequencies f = posenc::frequencies_from_ggml(c.p);
  ASSERT_EQ(f.spec.head_dim, c.p.mode == GgmlMode::kVision ? c.head_dim : c.p.n_dims);
  posenc::Frequencies fh = f;
  fh.spec.head_dim = c.head_dim;  // what the CLI does: rotary_dim of a wider head
  const std::vector<Pos> pos = Positions();
  const auto tokens = static_cast<std::int64_t>(pos.size());
  const int heads = 3;
  std::vector<std::int32_t> flat(4 * pos.size());
  for (std::size_t t = 0; t < pos.size(); ++t)
    for (std::size_t a = 0; a < 4; ++a) flat[a * pos.size() + t] = pos[t][a];
  std::mt19937 rng(5);
  const std::size_t elems = static_cast<std::size_t>(tokens * heads * c.head_dim);
  const Buffer in = posenc::testing::Random(dtype, elems, rng);
  Buffer out = in;
  posenc::RopeArgs args;
  args.q = posenc::TensorView::contiguous(out.bytes.data(), dtype, tokens, heads, c.head_dim);
  args.positions = std::span<const std::int32_t>(flat);
  args.direction = inverse ? posenc::Direction::kInverse : posenc::Direction::kForward;
  const posenc::CosSinTable table(fh, 64);
  if (with_table) args.table = &table;
  posenc::apply_rope(fh, args);
  const posenc_ggml::MultiParams ref = RefOf(c);
  for (std::size_t t = 0; t < pos.size(); ++t) {
    const std::vector<float> cache = posenc_ggml::MultiCache(ref, pos[t], inverse ? -1.0f : 1.0f);
    for (int h = 0; h < heads; ++h) {
      const std::size_t at = (t * heads + static_cast<std::size_t>(h)) * c.head_dim;
      std::vector<float> src(static_cast<std::size_t>(c.head_dim));
      for (std::size_t d = 0; d < src.size(); ++d) src[d] = in.get(at + d);
      const std::vector<float> want = posenc_ggml::RotateHead(ref, cache, src, fused);
      for (std::size_t d = 0; d < src.size(); ++d) {
        Buffer w(dtype, 1);
        w.set(0, want[d]);  // ggml's from_f32 into the storage type
        ASSERT_EQ(out.get(at + d), w.get(0))
            << c.name << " token " << t << " head " << h << " dim " << d;
      }
    }
  }
}

TEST(GgmlMulti, ApplyMatchesTheReferenceOnEveryTargetDtypeAndDirection) {
  ForEachTarget([&](const std::string& target) {
    // Targets with FMA fuse the rotation's first product (rotate.cc MulSub / MulAdd).
    const bool fused =
        target.rfind("AVX", 0) == 0 || target == "NEON" || target.rfind("SVE", 0) == 0;
    for (const Case& c : Cases()) {
      for (const DType dtype : {DType::kF32, DType::kF16}) {
        for (const bool inverse : {false, true}) CheckApply(c, dtype, inverse, false, fused);
      }
      CheckApply(c, DType::kF32, false, true, fused);  // a table does not change the rows
    }
  });
}

TEST(GgmlMulti, InverseUndoesForwardAndRerotateMovesPositions) {
  const Case c = Cases()[3];  // imrope_qwen3vl
  posenc::Frequencies f = posenc::frequencies_from_ggml(c.p);
  std::vector<std::int64_t> pos = {5, 900, 5, 901, 5, 902, 0, 0};  // [4, 2]
  std::mt19937 rng(1);
  Buffer x = posenc::testing::Random(DType::kF32, 2 * 128, rng);
  Buffer y = x;
  posenc::RopeArgs args;
  args.q = posenc::TensorView::contiguous(y.bytes.data(), DType::kF32, 2, 1, 128);
  args.positions = std::span<const std::int64_t>(pos);
  posenc::apply_rope(f, args);
  args.direction = posenc::Direction::kInverse;
  posenc::apply_rope(f, args);
  for (std::size_t i = 0; i < 256; ++i) EXPECT_NEAR(y.get(i), x.get(i), 1e-5) << i;
}

TEST(GgmlMulti, ValidateRefusesBadSectionsAndShapes) {
  EXPECT_THAT(error_of([] {
                posenc::validate(Multi(GgmlMode::kMrope, 128, {16, -1, 24, 0}));
              }),
              HasSubstr("sections[1] (-1) must not be negative"));
  // ggml sums the sections in an int: a sum past int32 is refused, not overflowed.
  EXPECT_THAT(error_of([] {
                posenc::validate(Multi(GgmlMode::kMrope, 128, {2147483647, 2147483647, 0, 0}));
              }),
              HasSubstr("sum to 4294967294, more than ggml's int sect_dims holds"));
  EXPECT_THAT(error_of([] {
                posenc::validate(Multi(GgmlMode::kImrope, 128, {0, 0, 0, 8}));
              }),
              HasSubstr("needs a positive t, h or w section"));
  GgmlRopeParams neox = Multi(GgmlMode::kNeox, 128, {16, 24, 24, 0});
  EXPECT_THAT(error_of([&] { posenc::validate(neox); }),
              HasSubstr("are read only by the multi modes"));
  GgmlRopeParams vff = Multi(GgmlMode::kVision, 40, {20, 20, 20, 20});
  vff.freq_factors.assign(20, 1.0f);
  EXPECT_THAT(error_of([&] { posenc::validate(vff); }),
              HasSubstr("freq_factors has 20 entries; expected n_dims (mode vision"));
  EXPECT_THAT(error_of([] {
                posenc::validate_head_dim(Multi(GgmlMode::kVision, 40, {20, 20, 0, 0}), 128);
              }),
              HasSubstr("n_dims (40) must be head_dim / 2 (head_dim 128)"));
  EXPECT_THAT(error_of([] {
                posenc::validate_head_dim(Multi(GgmlMode::kMrope, 64, {64, 64, 64, 0}), 128);
              }),
              HasSubstr("sum to 192, more than the head dim (128"));
  EXPECT_EQ(posenc::parse_ggml_mode("40"), GgmlMode::kImrope);
  EXPECT_EQ(posenc::parse_ggml_mode("vision"), GgmlMode::kVision);
  EXPECT_THAT(error_of([] { posenc::parse_ggml_mode("rope", "--mode"); }),
              HasSubstr("--mode (\"rope\") is not a ggml rope mode"));
}

}  // namespace

namespace {

// A vision tower's spec (vision_sections) in ggml numerics is llama.cpp's clip call for the
// Qwen2-VL towers: ggml_rope_multi(q, pos, nullptr, d_head / 2, {d_head / 4, d_head / 4, ...},
// GGML_ROPE_TYPE_VISION, 32768, 10000, 1, 0, 1, 32, 1). Its rows equal the reference's.
TEST(GgmlMulti, AVisionSpecInGgmlNumericsIsTheVisionMode) {
  const std::int64_t head_dim = 80;  // Qwen2-VL's ViT: embed_dim 1280 / 16 heads
  posenc::RopeSpec spec;
  spec.head_dim = head_dim;
  spec.rotary_dim = head_dim;
  spec.rope_theta = 10000.0;
  const std::int64_t sections[] = {head_dim / 4, head_dim / 4};
  spec.axis_map = posenc::vision_sections(sections);
  const posenc::Frequencies f = posenc::compute_frequencies(spec, posenc::Numerics::kGgml);
  ASSERT_EQ(f.spec.axis_map.axes, 4);

  posenc_ggml::MultiParams m;
  m.rope.n_dims = static_cast<int>(head_dim / 2);
  m.rope.freq_base = 10000.0f;
  m.mode = posenc_ggml::MultiMode::kVision;
  m.sections = {static_cast<int>(head_dim / 4), static_cast<int>(head_dim / 4), 0, 0};
  m.ne0 = static_cast<int>(head_dim);
  const std::size_t n = f.inv_freq.size();
  ASSERT_EQ(n, static_cast<std::size_t>(head_dim / 2));
  for (const Pos& p : Positions()) {
    const std::int64_t ap[4] = {p[0], p[1], p[2], p[3]};
    std::vector<double> cs(n), sn(n);
    posenc::cos_sin_at(f, ap, cs, sn);
    const std::vector<float> ref = posenc_ggml::MultiCache(m, p, 1.0f);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(static_cast<float>(cs[i]), ref[2 * i]) << p[0] << "," << p[1] << " pair " << i;
      ASSERT_EQ(static_cast<float>(sn[i]), ref[2 * i + 1]) << p[0] << " pair " << i;
    }
  }

  // Llama 4's tower rotates adjacent pairs, which ggml's VISION mode cannot.
  spec.layout = posenc::Layout::kInterleaved;
  try {
    (void)posenc::compute_frequencies(spec, posenc::Numerics::kGgml);
    FAIL() << "an interleaved vision spec has no ggml VISION equivalent";
  } catch (const posenc::Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("layout interleaved"));
  }
}

}  // namespace
