// Multi-axis RoPE (M-RoPE): the axis-map constructors against tests/reference/mrope_reference.h,
// their validation, and apply_rope / rerotate_keys / cos_sin_at with [axes, tokens] positions on
// every SIMD target, dtype and layout: accuracy against the exact rotation at each slot's
// position, text-only positions bit for bit equal to one-axis RoPE, the per-axis relative
// property, the inverse, table rows equal to computed rows, and shape errors.
//
// Sections are the published configs' values:
//   Qwen2-VL-7B-Instruct / Qwen2.5-VL-7B-Instruct config.json: rope_scaling.mrope_section
//     [16, 24, 24] (head_dim 128).
//   Qwen3-VL-8B-Instruct config.json text_config.rope_scaling: mrope_section [24, 20, 20],
//     mrope_interleaved true; Qwen3.5: [11, 11, 10] on 64 rotary dims.
//   GLM-4.1V-9B-Thinking config.json: mrope_section [8, 12, 12], partial_rotary_factor 0.5.
//   ERNIE-4.5-VL-28B-A3B config.json: mrope_section [22, 22, 20] (h, w, t).
//   HunYuan-VL (vLLM xdrope.py): xdrope_section [16, 16, 16, 16].
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/cos_sin.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "reference/mrope_reference.h"
#include "reference/rope_reference.h"
#include "support/error_of.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

using posenc::AxisMap;
using posenc::DType;
using posenc::Layout;
using posenc::Numerics;
using posenc::testing::Buffer;
using posenc::testing::CheckRotationSlots;
using posenc::testing::error_of;
using posenc::testing::Random;
using posenc::testing::Spec;
using posenc_ref::SlotRef;
using posenc_test::ForEachTarget;
using ::testing::HasSubstr;
using Sections = std::vector<std::int64_t>;

struct MapCase {
  std::string name;
  AxisMap map;
  std::vector<SlotRef> ref;
  std::int64_t head_dim;
};

std::vector<MapCase> Maps() {
  const Sections qwen2{16, 24, 24}, qwen3{24, 20, 20}, qwen35{11, 11, 10}, glm{8, 12, 12},
      ernie{22, 22, 20}, xd{16, 16, 16, 16}, odd{3, 2, 2};
  return {
      {"qwen2-vl", posenc::mrope_sections(qwen2), posenc_ref::ContiguousSlots(qwen2), 128},
      {"qwen3-vl", posenc::mrope_interleaved(qwen3), posenc_ref::InterleavedSlots(qwen3), 128},
      {"qwen3.5", posenc::mrope_interleaved(qwen35), posenc_ref::InterleavedSlots(qwen35), 64},
      {"glm-4.1v", posenc::mrope_sections(glm), posenc_ref::ContiguousSlots(glm), 64},
      {"ernie-4.5-vl", posenc::ernie_mrope(ernie), posenc_ref::ErnieSlots(ernie), 128},
      {"xdrope", posenc::xdrope_sections(xd), posenc_ref::XdropeSlots(xd), 128},
      {"odd-7-slots", posenc::mrope_sections(odd), posenc_ref::ContiguousSlots(odd), 14},
      {"odd-7-interleaved", posenc::mrope_interleaved(odd), posenc_ref::InterleavedSlots(odd), 14},
  };
}

posenc::RopeSpec MapSpec(const MapCase& c, Layout layout, std::int64_t offset = 0) {
  posenc::RopeSpec s = Spec(c.head_dim + offset, c.head_dim, offset, layout);
  s.axis_map = c.map;
  return s;
}

// Axis-major [axes, tokens] positions, random per axis.
std::vector<std::int64_t> AxisPositions(std::int64_t axes, std::int64_t tokens, std::mt19937& rng,
                                        std::int64_t max = 1 << 20) {
  std::uniform_int_distribution<std::int64_t> d(0, max);
  std::vector<std::int64_t> p(static_cast<std::size_t>(axes * tokens));
  for (auto& x : p) x = d(rng);
  return p;
}

// The reference's per-(token, slot) positions of axis-major positions.
std::vector<std::int64_t> RefSlotPositions(const std::vector<SlotRef>& ref,
                                           const std::vector<std::int64_t>& pos, std::int64_t axes,
                                           std::int64_t tokens) {
  std::vector<std::int64_t> out;
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::vector<std::int64_t> ap;
    for (std::int64_t a = 0; a < axes; ++a)
      ap.push_back(pos[static_cast<std::size_t>(a * tokens + t)]);
    const auto sp = posenc_ref::SlotPositions(ref, ap);
    out.insert(out.end(), sp.begin(), sp.end());
  }
  return out;
}

int Apply(const posenc::Frequencies& f, Buffer& buf, std::int64_t tokens, std::int64_t heads,
          const std::vector<std::int64_t>& pos, posenc::Direction dir,
          const posenc::CosSinTable* table = nullptr) {
  posenc::RopeArgs args;
  args.q =
      posenc::TensorView::contiguous(buf.bytes.data(), buf.dtype, tokens, heads, f.spec.head_dim);
  args.positions = std::span<const std::int64_t>(pos);
  args.direction = dir;
  args.table = table;
  return posenc::apply_rope(f, args);
}

TEST(AxisMap, ConstructorsMatchTheReferenceFormulas) {
  for (const MapCase& c : Maps()) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.map.slot_axis.size(), c.ref.size());
    for (std::size_t j = 0; j < c.ref.size(); ++j) {
      EXPECT_EQ(c.map.slot_axis[j], c.ref[j].axis) << "slot " << j;
      // Every one of these models rotates slot j with inv_freq[j] (ERNIE: after undoing its
      // permutation), so the map alone decides the position.
      EXPECT_EQ(c.ref[j].freq, static_cast<std::int64_t>(j)) << "slot " << j;
    }
  }
  // The doc's spelled-out sets: Qwen3-VL's t = {0, 3, ..., 57} and {60..63}.
  const AxisMap q3 = posenc::mrope_interleaved(Sections{24, 20, 20});
  for (int j = 0; j < 64; ++j) {
    const bool t = (j < 60 && j % 3 == 0) || j >= 60;
    EXPECT_EQ(q3.slot_axis[static_cast<std::size_t>(j)] == 0, t) << j;
  }
  EXPECT_EQ(posenc::xdrope_sections(Sections{16, 16, 16, 16}).axes, 4);
  EXPECT_EQ(posenc::axis_name(posenc::xdrope_sections(Sections{16, 16, 16, 16}), 0), "p");
  EXPECT_EQ(posenc::axis_name(posenc::mrope_sections(Sections{16, 24, 24}), 2), "w");
}

TEST(AxisMap, Glm4vSetsHalfTheHeadInAdjacentPairs) {
  posenc::RopeSpec s = Spec(128, 128, 0, Layout::kHalfSplit);
  posenc::set_glm4v_mrope(s, Sections{8, 12, 12});
  EXPECT_EQ(s.rotary_dim, 64);
  EXPECT_EQ(s.layout, Layout::kInterleaved);
  EXPECT_TRUE(posenc::validate(s).empty());
  posenc::RopeSpec bad = Spec(6, 6, 0, Layout::kHalfSplit);
  EXPECT_THAT(error_of([&] {
                posenc::set_glm4v_mrope(bad, Sections{1, 0, 0});
              }),
              HasSubstr("head_dim (6)"));
}

TEST(AxisMap, BadSectionsAreRefusedNamingTheFieldAndValue) {
  EXPECT_THAT(error_of([] {
                posenc::mrope_sections(Sections{16, 24});
              }),
              HasSubstr("mrope_section ([16, 24]) must have 3 entries"));
  EXPECT_THAT(error_of([] {
                posenc::xdrope_sections(Sections{16, 24, 24});
              }),
              HasSubstr("xdrope_section ([16, 24, 24]) must have 4 entries"));
  EXPECT_THAT(error_of([] {
                posenc::mrope_interleaved(Sections{16, -1, 24});
              }),
              HasSubstr("mrope_section[1] (-1)"));
  EXPECT_THAT(error_of([] {
                posenc::mrope_sections(Sections{0, 0, 0});
              }),
              HasSubstr("must not be all zeros"));
  EXPECT_THAT(error_of([] {
                posenc::ernie_mrope(Sections{22, 20, 22});
              }),
              HasSubstr("h and w sections (22, 20) must be equal"));
  // Sections must cover the rotated slots exactly (vLLM asserts it).
  posenc::RopeSpec s = Spec(128, 128, 0, Layout::kHalfSplit);
  s.axis_map = posenc::mrope_sections(Sections{16, 24, 20});
  const std::string e = error_of([&] { posenc::validate(s); });
  EXPECT_THAT(e, HasSubstr("mrope_section ([16, 24, 20]) sums to 60, but rotary_dim / 2 is 64"));
  EXPECT_THAT(e, HasSubstr("sum(mrope_section) == rotary_dim // 2"));
  EXPECT_THROW(posenc::compute_frequencies(s), posenc::Error);
}

// Every target, dtype, layout, partial rotary (an offset and pass-through dims), default and
// YaRN (Qwen3-VL ships YaRN): each pair rotated by its slot's axis position, within the kernel
// tolerance of the exact rotation, with and without a table.
TEST(MultiAxisApply, AccuracyAgainstTheReferenceMapOnEveryTarget) {
  std::mt19937 rng(2024);
  ForEachTarget([&](const std::string& target) {
    for (const MapCase& c : Maps()) {
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
        for (Layout layout : {Layout::kHalfSplit, Layout::kInterleaved}) {
          for (bool yarn : {false, true}) {
            posenc::RopeSpec spec =
                MapSpec(c, layout, /*offset=*/layout == Layout::kHalfSplit ? 0 : 4);
            if (yarn) {
              spec.method = posenc::Method::kYarn;
              spec.factor = 3.0;
              spec.original_max_position_embeddings = 256000;
            }
            const posenc::Frequencies f = posenc::compute_frequencies(spec);
            const std::int64_t tokens = 5, heads = 3, axes = c.map.axes;
            const auto pos = AxisPositions(axes, tokens, rng);
            const Buffer in =
                Random(dtype, static_cast<std::size_t>(tokens * heads * spec.head_dim), rng);
            const auto slot_pos = RefSlotPositions(c.ref, pos, axes, tokens);
            const std::string what =
                target + " " + c.name + " " + std::string(posenc::dtype_name(dtype)) + " " +
                std::string(posenc::layout_name(layout)) + (yarn ? " yarn" : "");
            Buffer out = in;
            Apply(f, out, tokens, heads, pos, posenc::Direction::kForward);
            CheckRotationSlots(f, in, out, tokens, heads, slot_pos, false, what);
            // Table rows gathered per slot: the same bits as the computed rows (one token has
            // an axis position past the table: computed).
            const posenc::CosSinTable table(f, 4096);
            auto near = AxisPositions(axes, tokens, rng, 4095);
            near[static_cast<std::size_t>((axes - 1) * tokens)] = 5000;
            Buffer via_table = in, computed = in;
            Apply(f, via_table, tokens, heads, near, posenc::Direction::kForward, &table);
            Apply(f, computed, tokens, heads, near, posenc::Direction::kForward);
            EXPECT_EQ(via_table.bytes, computed.bytes) << what << " table";
            Buffer inv = in;
            Apply(f, inv, tokens, heads, pos, posenc::Direction::kInverse);
            CheckRotationSlots(f, in, inv, tokens, heads, slot_pos, true, what + " inverse");
          }
        }
      }
    }
  });
}

// Text tokens carry t = h = w (= e): M-RoPE is then one-axis RoPE bit for bit, in every
// numerics (its own float32 rules included), dtype, layout, with and without a table.
TEST(MultiAxisApply, TextOnlyPositionsGiveOneAxisRopeBitForBitOnEveryTarget) {
  std::mt19937 rng(7);
  ForEachTarget([&](const std::string& target) {
    for (const MapCase& c : Maps()) {
      for (Numerics numerics : {Numerics::kPrecise, Numerics::kHf, Numerics::kGgml}) {
        for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
          for (Layout layout : {Layout::kHalfSplit, Layout::kInterleaved}) {
            const posenc::RopeSpec multi = MapSpec(c, layout);
            posenc::RopeSpec single = multi;
            single.axis_map = AxisMap{};
            const auto fm = posenc::compute_frequencies(multi, numerics);
            const auto fs = posenc::compute_frequencies(single, numerics);
            const std::int64_t tokens = 4, heads = 2, axes = c.map.axes;
            std::vector<std::int64_t> one = {0, 17, 4095, 300000};
            std::vector<std::int64_t> all;
            for (std::int64_t a = 0; a < axes; ++a) all.insert(all.end(), one.begin(), one.end());
            const Buffer in =
                Random(dtype, static_cast<std::size_t>(tokens * heads * c.head_dim), rng);
            Buffer a = in, b = in, t = in;
            Apply(fm, a, tokens, heads, all, posenc::Direction::kForward);
            Apply(fs, b, tokens, heads, one, posenc::Direction::kForward);
            const posenc::CosSinTable table(fm, 5000);
            Apply(fm, t, tokens, heads, all, posenc::Direction::kForward, &table);
            const std::string what = target + " " + c.name + " " +
                                     std::string(posenc::numerics_name(numerics)) + " " +
                                     std::string(posenc::dtype_name(dtype));
            EXPECT_EQ(a.bytes, b.bytes) << what;
            EXPECT_EQ(t.bytes, b.bytes) << what << " table";
          }
        }
      }
    }
  });
}

// <R(m) q, R(n) k> depends on m - n axis by axis: shifting every axis of both tokens by its own
// offset leaves the score unchanged.
TEST(MultiAxisApply, RelativePropertyHoldsPerAxis) {
  std::mt19937 rng(99);
  for (const MapCase& c : Maps()) {
    const posenc::Frequencies f = posenc::compute_frequencies(MapSpec(c, Layout::kHalfSplit));
    const std::int64_t axes = c.map.axes;
    const Buffer q = Random(DType::kF32, static_cast<std::size_t>(c.head_dim), rng);
    const Buffer k = Random(DType::kF32, static_cast<std::size_t>(c.head_dim), rng);
    auto score = [&](const std::vector<std::int64_t>& m, const std::vector<std::int64_t>& n) {
      Buffer rq = q, rk = k;
      Apply(f, rq, 1, 1, m, posenc::Direction::kForward);
      Apply(f, rk, 1, 1, n, posenc::Direction::kForward);
      double dot = 0;
      for (std::int64_t d = 0; d < c.head_dim; ++d)
        dot += double{rq.get(static_cast<std::size_t>(d))} * rk.get(static_cast<std::size_t>(d));
      return dot;
    };
    const auto m = AxisPositions(axes, 1, rng, 5000), n = AxisPositions(axes, 1, rng, 5000);
    const double base = score(m, n);
    for (int trial = 0; trial < 4; ++trial) {
      const auto shift = AxisPositions(axes, 1, rng, 3000);
      std::vector<std::int64_t> m2 = m, n2 = n;
      for (std::int64_t a = 0; a < axes; ++a) {
        m2[static_cast<std::size_t>(a)] += shift[static_cast<std::size_t>(a)];
        n2[static_cast<std::size_t>(a)] += shift[static_cast<std::size_t>(a)];
      }
      EXPECT_NEAR(score(m2, n2), base, 1e-4 * (1 + std::abs(base))) << c.name;
    }
    // And it does depend on each axis' difference: moving one axis of one token changes it.
    for (std::int64_t a = 0; a < axes; ++a) {
      std::vector<std::int64_t> m2 = m;
      m2[static_cast<std::size_t>(a)] += 7;
      EXPECT_GT(std::abs(score(m2, n) - base), 1e-4) << c.name << " axis " << a;
    }
  }
}

// cos_sin_at with per-axis positions: slot i equals the one-axis row at its axis' position, bit
// for bit (precise, ggml; hf for the rules that select from per-axis cos/sin rows).
TEST(MultiAxisCosSin, SlotsComeFromTheirAxisRow) {
  for (const MapCase& c : Maps()) {
    for (Numerics numerics : {Numerics::kPrecise, Numerics::kHf, Numerics::kGgml}) {
      const auto f = posenc::compute_frequencies(MapSpec(c, Layout::kHalfSplit), numerics);
      const std::size_t n = static_cast<std::size_t>(f.pair_count());
      const std::vector<std::int64_t> ap = {123456, 5, 4000, 77};
      const std::span<const std::int64_t> axis_pos(ap.data(), static_cast<std::size_t>(c.map.axes));
      std::vector<double> cm(n), sm(n), c1(n), s1(n);
      posenc::cos_sin_at(f, axis_pos, cm, sm);
      std::vector<float> cf(n), sf(n);
      posenc::cos_sin_row_f32(f, axis_pos, cf, sf);
      for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(cf[i], static_cast<float>(cm[i]));
        EXPECT_EQ(sf[i], static_cast<float>(sm[i]));
      }
      for (std::size_t i = 0; i < n; ++i) {
        posenc::cos_sin_at(f, ap[static_cast<std::size_t>(c.ref[i].axis)], c1, s1);
        if (posenc::gathers_angles(f)) {
          // Torch's cos over the gathered row: within a float32 ulp of the per-axis value.
          EXPECT_NEAR(cm[i], c1[i], 2e-7) << c.name << " slot " << i;
          EXPECT_NEAR(sm[i], s1[i], 2e-7) << c.name << " slot " << i;
        } else {
          EXPECT_EQ(cm[i], c1[i]) << c.name << " " << posenc::numerics_name(numerics) << " slot "
                                  << i;
          EXPECT_EQ(sm[i], s1[i]) << c.name << " " << posenc::numerics_name(numerics) << " slot "
                                  << i;
        }
      }
      std::vector<std::int64_t> wrong(static_cast<std::size_t>(c.map.axes + 1), 0);
      EXPECT_THAT(error_of([&] { posenc::cos_sin_at(f, wrong, cm, sm); }),
                  HasSubstr("hold " + std::to_string(c.map.axes + 1) +
                            " positions, but the spec's axis map"));
    }
  }
}

// transformers' M-RoPE forward: position_ids [axes, batch, seq]. Each slot of the cos/sin row
// is the one-axis forward's value at the position of its axis (hf: bit for bit where torch's cos
// runs over per-axis embs, Qwen2-VL's way; within an ulp where it runs over gathered angles).
TEST(MultiAxisCosSin, RotaryForwardTakesAxesBatchSeqPositionIds) {
  std::mt19937 rng(3);
  for (const MapCase& c : Maps()) {
    for (Numerics numerics : {Numerics::kPrecise, Numerics::kHf}) {
      const auto f = posenc::compute_frequencies(MapSpec(c, Layout::kHalfSplit), numerics);
      posenc::RopeSpec single_spec = MapSpec(c, Layout::kHalfSplit);
      single_spec.axis_map = AxisMap{};
      const auto single = posenc::compute_frequencies(single_spec, numerics);
      const std::int64_t batch = 2, seq = 8, axes = c.map.axes, tokens = batch * seq;
      const std::size_t width = static_cast<std::size_t>(c.head_dim);
      const auto pos = AxisPositions(axes, tokens, rng, 300000);
      std::vector<float> cm(static_cast<std::size_t>(tokens) * width), sm(cm.size());
      posenc::rotary_forward_cos_sin(f, pos, batch, true, cm, sm);
      for (std::int64_t a = 0; a < axes; ++a) {
        const std::span<const std::int64_t> row(pos.data() + a * tokens,
                                                static_cast<std::size_t>(tokens));
        std::vector<float> c1(cm.size()), s1(cm.size());
        posenc::rotary_forward_cos_sin(single, row, batch, true, c1, s1);
        for (std::size_t k = 0; k < static_cast<std::size_t>(tokens); ++k) {
          for (std::size_t j = 0; j < width; ++j) {
            if (c.ref[j % (width / 2)].axis != a) continue;
            const std::size_t at = k * width + j;
            if (posenc::gathers_angles(f)) {
              EXPECT_NEAR(cm[at], c1[at], 1.2e-7) << c.name << " token " << k << " dim " << j;
              EXPECT_NEAR(sm[at], s1[at], 1.2e-7) << c.name << " token " << k << " dim " << j;
            } else {
              EXPECT_EQ(cm[at], c1[at]) << c.name << " token " << k << " dim " << j;
              EXPECT_EQ(sm[at], s1[at]) << c.name << " token " << k << " dim " << j;
            }
          }
        }
      }
      EXPECT_THAT(error_of([&] {
                    posenc::rotary_forward_cos_sin(f, std::span<const std::int64_t>(pos.data(), 5),
                                                   batch, true, cm, sm);
                  }),
                  HasSubstr("positions (5) must divide into " + std::to_string(axes) + " axes x"));
    }
  }
}

TEST(MultiAxisApply, WrongPositionShapesAreRefusedNamingBothNumbers) {
  const MapCase c = Maps()[0];
  const auto f = posenc::compute_frequencies(MapSpec(c, Layout::kHalfSplit));
  std::mt19937 rng(1);
  Buffer buf = Random(DType::kF32, static_cast<std::size_t>(8 * 2 * c.head_dim), rng);
  const std::vector<std::int64_t> one_axis(8, 3);  // [1, 8] for a 3-axis spec
  const std::string e =
      error_of([&] { Apply(f, buf, 8, 2, one_axis, posenc::Direction::kForward); });
  EXPECT_THAT(e, HasSubstr("positions must be [axes, tokens] = [3, 8] (24 entries"));
  EXPECT_THAT(e, HasSubstr("got 8 positions = [1, 8] (1 axes)"));
  const std::vector<std::int64_t> short_tokens(21, 3);  // [3, 7] for 8 tokens
  EXPECT_THAT(error_of([&] { Apply(f, buf, 8, 2, short_tokens, posenc::Direction::kForward); }),
              HasSubstr("q's 8 tokens; got 21 positions"));
  // A one-axis spec given [1, tokens] behaves as today.
  posenc::RopeSpec single = MapSpec(c, Layout::kHalfSplit);
  single.axis_map = AxisMap{};
  const auto fs = posenc::compute_frequencies(single);
  EXPECT_NO_THROW(Apply(fs, buf, 8, 2, one_axis, posenc::Direction::kForward));
  EXPECT_THAT(error_of([&] {
                posenc::rerotate_keys(
                    f, f,
                    posenc::TensorView::contiguous(buf.bytes.data(), DType::kF32, 8, 2, c.head_dim),
                    std::span<const std::int64_t>(one_axis));
              }),
              HasSubstr("rerotate_keys: positions must be [axes, tokens] = [3, 8]"));
  EXPECT_THAT(error_of([&] {
                posenc::rerotate_keys(
                    f, fs,
                    posenc::TensorView::contiguous(buf.bytes.data(), DType::kF32, 8, 2, c.head_dim),
                    std::span<const std::int64_t>(one_axis));
              }),
              HasSubstr("axis maps contiguous vs single"));
}

// Frequencies built or changed by hand skip compute_frequencies' checks: a map whose slot reads an
// axis past the count, or with a slot per pair missing, is refused with the numbers by the
// table's gather and by the stepper on the fly, not read out of bounds.
TEST(MultiAxisApply, HandMadeMapsOutOfRangeAreRefused) {
  const MapCase c = Maps()[0];
  const auto good = posenc::compute_frequencies(MapSpec(c, Layout::kHalfSplit));
  const posenc::CosSinTable table(good, 64);
  std::mt19937 rng(4);
  Buffer buf = Random(DType::kF32, static_cast<std::size_t>(2 * 2 * c.head_dim), rng);
  const std::vector<std::int64_t> image = {5, 5, 6, 7, 8, 9};  // [3, 2]: no text token
  EXPECT_NO_THROW(Apply(good, buf, 2, 2, image, posenc::Direction::kForward, &table));
  auto past = good;
  past.spec.axis_map.slot_axis[5] = 3;
  EXPECT_THAT(error_of([&] { Apply(past, buf, 2, 2, image, posenc::Direction::kForward, &table); }),
              HasSubstr("axis_map: " + std::to_string(c.head_dim / 2) +
                        " slots reading axes up to 3; expected one per frequency pair (" +
                        std::to_string(c.head_dim / 2) + "), each below the axis count (3)"));
  auto short_map = good;
  short_map.spec.axis_map.slot_axis.pop_back();
  EXPECT_THAT(
      error_of([&] { Apply(short_map, buf, 2, 2, image, posenc::Direction::kForward, &table); }),
      HasSubstr("axis_map: " + std::to_string(c.head_dim / 2 - 1) + " slots"));
  // On the fly the stepper reads positions by the map: refused there too.
  EXPECT_THAT(error_of([&] { Apply(past, buf, 2, 2, image, posenc::Direction::kForward); }),
              HasSubstr("CosSinStepper: a slot of the axis map reads axis 3, not below its axis "
                        "count (3)"));
  EXPECT_THAT(error_of([&] { Apply(short_map, buf, 2, 2, image, posenc::Direction::kForward); }),
              HasSubstr("CosSinStepper: the axis map has " + std::to_string(c.head_dim / 2 - 1) +
                        " slots; expected one per frequency pair (" +
                        std::to_string(c.head_dim / 2) + ")"));
}

// Re-rotating a multi-axis key cache from one YaRN factor to another gives the keys rotated with
// the new factor directly (to float32 rounding).
TEST(MultiAxisRerotate, MovesKeysBetweenFrequenciesPerSlot) {
  std::mt19937 rng(5);
  for (const MapCase& c : Maps()) {
    posenc::RopeSpec a = MapSpec(c, Layout::kInterleaved);
    a.method = posenc::Method::kYarn;
    a.factor = 2.0;
    a.original_max_position_embeddings = 4096;
    posenc::RopeSpec b = a;
    b.factor = 4.0;
    const auto fa = posenc::compute_frequencies(a), fb = posenc::compute_frequencies(b);
    const std::int64_t tokens = 3, heads = 2;
    const auto pos = AxisPositions(c.map.axes, tokens, rng, 20000);
    const Buffer k =
        Random(DType::kF32, static_cast<std::size_t>(tokens * heads * c.head_dim), rng);
    Buffer via = k, direct = k;
    Apply(fa, via, tokens, heads, pos, posenc::Direction::kForward);
    posenc::rerotate_keys(
        fa, fb,
        posenc::TensorView::contiguous(via.bytes.data(), DType::kF32, tokens, heads, c.head_dim),
        std::span<const std::int64_t>(pos));
    Apply(fb, direct, tokens, heads, pos, posenc::Direction::kForward);
    for (std::size_t i = 0; i < static_cast<std::size_t>(tokens * heads * c.head_dim); ++i)
      EXPECT_NEAR(via.get(i), direct.get(i), 2e-5) << c.name << " element " << i;
  }
}

}  // namespace
