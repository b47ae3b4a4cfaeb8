// M-RoPE position ids (posenc/core/mrope_positions.h): goldens with their source, the rules
// against the independent reference (tests/reference/mrope_positions_reference.h), and every error.
#include "posenc/core/mrope_positions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "posenc/core/error.h"
#include "reference/mrope_positions_reference.h"

namespace posenc {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

MropePositions positions(const std::string& layout, MropeModel model, MropeRule rule,
                         std::int64_t merge = 2, double tps = 2) {
  return mrope_positions(parse_mrope_layout(layout), {model, merge, tps}, rule);
}

std::vector<std::int64_t> range(std::int64_t from, std::int64_t count) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(count));
  std::iota(v.begin(), v.end(), from);
  return v;
}

std::string error_of(const std::string& layout, MropeModel model = MropeModel::kQwen25Vl,
                     std::int64_t merge = 2, double tps = 2) {
  try {
    positions(layout, model, MropeRule::kHf45, merge, tps);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// transformers' test_qwen2_vl_video_temporal_scaling (the v5 walk; rope-in-engines.md §1.2):
// tokens_per_second 2, second_per_grid_ts 2.0, grid (2, 2, 2) with spatial_merge_size 1 after one
// text token: t = [1,1,1,1,5,5,5,5] and the next text at 3.
TEST(MropePositions, TransformersTemporalScalingTestUnderHf53) {
  const MropePositions p =
      positions("text:1,video:2x2x2@2,text:1", MropeModel::kQwen25Vl, MropeRule::kHf53, 1, 2);
  EXPECT_THAT(p.ids[0], ElementsAre(0, 1, 1, 1, 1, 5, 5, 5, 5, 3));
  EXPECT_THAT(p.ids[1], ElementsAre(0, 1, 1, 2, 2, 1, 1, 2, 2, 3));
  EXPECT_THAT(p.ids[2], ElementsAre(0, 1, 2, 1, 2, 1, 2, 1, 2, 3));
  EXPECT_EQ(p.rope_deltas, 5 + 1 - 10);
  // hf-4.5 places the text at max + 1 = 6: the rules first differ at that token (9).
  const MropePositions old =
      positions("text:1,video:2x2x2@2,text:1", MropeModel::kQwen25Vl, MropeRule::kHf45, 1, 2);
  EXPECT_THAT(old.ids[0], ElementsAre(0, 1, 1, 1, 1, 5, 5, 5, 5, 6));
  EXPECT_EQ(old.rope_deltas, 6 + 1 - 10);
  EXPECT_EQ(mrope_first_difference(p, old), 9);
}

// rope-in-engines.md §1.2 worked example: text [0..L-1], an image (1, 28, 28) -> 196 tokens with
// t = L, h = L + r, w = L + c (r, c in 0..13); the text resumes at L + 14, under both rules.
TEST(MropePositions, DocWorkedExampleImageInText) {
  constexpr std::int64_t L = 5;
  for (MropeRule rule : {MropeRule::kHf45, MropeRule::kHf53}) {
    for (MropeModel model :
         {MropeModel::kQwen2Vl, MropeModel::kQwen25Vl, MropeModel::kQwen3Vl, MropeModel::kGlm4v}) {
      const MropePositions p = positions("text:5,image:1x28x28,text:3", model, rule);
      ASSERT_EQ(p.tokens(), L + 196 + 3);
      for (std::int64_t j = 0; j < L; ++j) {
        for (int a = 0; a < 3; ++a) EXPECT_EQ(p.ids[a][j], j);
      }
      for (std::int64_t r = 0; r < 14; ++r) {
        for (std::int64_t c = 0; c < 14; ++c) {
          const auto j = static_cast<std::size_t>(L + r * 14 + c);
          EXPECT_EQ(p.ids[0][j], L);
          EXPECT_EQ(p.ids[1][j], L + r);
          EXPECT_EQ(p.ids[2][j], L + c);
        }
      }
      for (int a = 0; a < 3; ++a) {
        EXPECT_THAT(std::vector<std::int64_t>(p.ids[a].end() - 3, p.ids[a].end()),
                    ElementsAre(L + 14, L + 15, L + 16))
            << mrope_rule_name(rule);
      }
      EXPECT_EQ(p.rope_deltas, (L + 16) + 1 - (L + 196 + 3));
      // Decode: every axis at cache position + rope_deltas; the next token follows L + 16.
      EXPECT_THAT(mrope_decode_position(p.tokens(), p.rope_deltas),
                  ElementsAre(L + 17, L + 17, L + 17));
    }
  }
}

// Qwen3-VL (and GLM-4.1V): a video is one block per frame, t constant inside the frame; the
// time lives in the timestamp text. 3 frames of 4x4 patches (2x2 tokens) after 2 text tokens:
// frames at 2, 4, 6 (each max + 1 = start + max(H', W'), so both rules agree), text at 8.
TEST(MropePositions, Qwen3VlVideoIsOneBlockPerFrame) {
  for (MropeModel model : {MropeModel::kQwen3Vl, MropeModel::kGlm4v}) {
    for (MropeRule rule : {MropeRule::kHf45, MropeRule::kHf53}) {
      const MropePositions p = positions("text:2,video:3x4x4@0.5,text:1", model, rule);
      EXPECT_THAT(p.ids[0], ElementsAre(0, 1, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6, 8));
      EXPECT_THAT(p.ids[1], ElementsAre(0, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8));
      EXPECT_THAT(p.ids[2], ElementsAre(0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8));
      EXPECT_EQ(p.rope_deltas, 9 - 15);
    }
  }
  // Timestamp text between frames, as the processor writes it: "<0.5 seconds>" etc.
  const MropePositions p = positions("text:1,video:1x4x4@1,text:3,video:1x4x4@1",
                                     MropeModel::kQwen3Vl, MropeRule::kHf45);
  EXPECT_THAT(p.ids[0], ElementsAre(0, 1, 1, 1, 1, 3, 4, 5, 6, 6, 6, 6));
}

// GLM-4.1V: the Qwen2-VL scheme at st_idx = max + 1 (4.57 Glm4vModel.get_rope_index), a 2x3-token
// image then a 2-frame video, each frame at t = its start.
TEST(MropePositions, Glm41vImageThenVideo) {
  const MropePositions p =
      positions("text:3,image:1x4x6,video:2x4x4@1,text:1", MropeModel::kGlm4v, MropeRule::kHf45);
  EXPECT_THAT(p.ids[0], ElementsAre(0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 6, 6, 6, 8, 8, 8, 8, 10));
  EXPECT_THAT(p.ids[1], ElementsAre(0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 6, 7, 7, 8, 8, 9, 9, 10));
  EXPECT_THAT(p.ids[2], ElementsAre(0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 6, 7, 8, 9, 8, 9, 10));
  EXPECT_EQ(p.rope_deltas, 11 - 18);
}

// Qwen2-VL has no time scaling: t = start + k. A 6-group video of 2x2 tokens reaches start + 5,
// so hf-4.5 resumes the text at start + 6 and hf-5.3 at start + max(H', W') = start + 2.
TEST(MropePositions, RulesFirstDifferAfterALongVideo) {
  const std::string layout = "text:1,video:6x4x4@1,text:2";
  const MropePositions a = positions(layout, MropeModel::kQwen2Vl, MropeRule::kHf45);
  const MropePositions b = positions(layout, MropeModel::kQwen2Vl, MropeRule::kHf53);
  EXPECT_EQ(mrope_first_difference(a, b), 1 + 24);
  EXPECT_THAT(std::vector<std::int64_t>(a.ids[0].begin() + 1, a.ids[0].begin() + 25),
              ElementsAre(1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6));
  EXPECT_EQ(a.ids[0][25], 7);
  EXPECT_EQ(b.ids[0][25], 3);
  EXPECT_EQ(a.rope_deltas, 9 - 27);
  EXPECT_EQ(b.rope_deltas, 7 - 27);  // the video's t = 6 stays the maximum
  // A video short enough that (T - 1) * interval < max(H', W') gives the same ids.
  EXPECT_EQ(mrope_first_difference(
                positions("text:1,video:2x4x4@1,text:2", MropeModel::kQwen2Vl, MropeRule::kHf45),
                positions("text:1,video:2x4x4@1,text:2", MropeModel::kQwen2Vl, MropeRule::kHf53)),
            std::nullopt);
}

// Qwen2.5-VL: t = start + trunc(k * trunc(S) * tokens_per_second). 4.57 puts S through an int64
// tensor and the v5 walk takes int(S): 0.5 s gives every group the same t (transformers#48669),
// 1.5 s steps like 1 s.
TEST(MropePositions, Qwen25VlTruncatesAFractionalSecondPerGrid) {
  for (MropeRule rule : {MropeRule::kHf45, MropeRule::kHf53}) {
    EXPECT_THAT(positions("video:3x2x2@0.5", MropeModel::kQwen25Vl, rule, 2, 2).ids[0],
                ElementsAre(0, 0, 0));
    EXPECT_THAT(positions("video:3x2x2@1.5", MropeModel::kQwen25Vl, rule, 2, 2).ids[0],
                ElementsAre(0, 2, 4));
    EXPECT_THAT(positions("video:3x2x2@2", MropeModel::kQwen25Vl, rule, 2, 2).ids[0],
                ElementsAre(0, 4, 8));
    // A fractional tokens_per_second multiplies after the truncation of S, then truncates.
    EXPECT_THAT(positions("video:3x2x2@1", MropeModel::kQwen25Vl, rule, 2, 2.5).ids[0],
                ElementsAre(0, 2, 5));
  }
}

// Images with T > 1: 4.57 Qwen2.5-VL multiplies by second_per_grid_t = 0 (t constant); the v5
// walk uses a time interval of 1 (#45325 kept tokens_per_second off images).
TEST(MropePositions, Qwen25VlImageTemporalIdsPerRule) {
  const MropePositions a = positions("image:2x2x2", MropeModel::kQwen25Vl, MropeRule::kHf45);
  const MropePositions b = positions("image:2x2x2", MropeModel::kQwen25Vl, MropeRule::kHf53);
  EXPECT_THAT(a.ids[0], ElementsAre(0, 0));
  EXPECT_THAT(b.ids[0], ElementsAre(0, 1));
  EXPECT_EQ(mrope_first_difference(a, b), 1);
  EXPECT_THAT(positions("image:2x2x2", MropeModel::kQwen2Vl, MropeRule::kHf45).ids[0],
              ElementsAre(0, 1));
}

TEST(MropePositions, TextOnlyIsOneAxisCounting) {
  for (MropeRule rule : {MropeRule::kHf45, MropeRule::kHf53}) {
    const MropePositions p = positions("text:7,text:4", MropeModel::kQwen3Vl, rule);
    for (int a = 0; a < 3; ++a) EXPECT_THAT(p.ids[a], ElementsAreArray(range(0, 11)));
    EXPECT_EQ(p.rope_deltas, 0);
  }
}

posenc_ref::VlModel ref_model(MropeModel m) {
  switch (m) {
    case MropeModel::kQwen2Vl:
      return posenc_ref::VlModel::kQwen2Vl;
    case MropeModel::kQwen25Vl:
      return posenc_ref::VlModel::kQwen25Vl;
    case MropeModel::kQwen3Vl:
      return posenc_ref::VlModel::kQwen3Vl;
    case MropeModel::kGlm4v:
      return posenc_ref::VlModel::kGlm4v;
  }
  return posenc_ref::VlModel::kQwen2Vl;
}

// Every model x rule x merge size x tokens_per_second over layouts that mix adjacent vision
// blocks, long videos, wide and tall grids, and fractional seconds, against the reference.
TEST(MropePositions, MatchesTheReference) {
  const std::vector<std::string> layouts = {
      "text:3",
      "image:1x4x4",
      "video:5x4x8@2,video:3x8x4@0.5",
      "text:2,image:2x8x4,image:1x4x12,text:1",
      "text:4,video:9x4x4@1,text:2,video:2x12x4@1.5,text:3",
      "video:1x4x4@3,text:1,image:3x4x4,video:4x4x4@0.25,text:5",
  };
  int compared = 0;
  for (const std::string& text : layouts) {
    const std::vector<MropeSegment> layout = parse_mrope_layout(text);
    std::vector<posenc_ref::VlSegment> ref;
    for (const MropeSegment& s : layout) {
      const char kind = s.kind == MropeSegmentKind::kText    ? 't'
                        : s.kind == MropeSegmentKind::kImage ? 'i'
                                                             : 'v';
      ref.push_back({kind, s.tokens, s.t, s.h, s.w, s.second_per_grid_t});
    }
    for (MropeModel model :
         {MropeModel::kQwen2Vl, MropeModel::kQwen25Vl, MropeModel::kQwen3Vl, MropeModel::kGlm4v}) {
      for (MropeRule rule : {MropeRule::kHf45, MropeRule::kHf53}) {
        for (std::int64_t merge : {1, 2, 4}) {
          for (double tps : {1.0, 2.0, 4.0, 2.5}) {
            const MropePositions p = mrope_positions(layout, {model, merge, tps}, rule);
            const posenc_ref::VlIds r = posenc_ref::vl_positions(ref, ref_model(model), merge, tps,
                                                                 rule == MropeRule::kHf53);
            const std::string what = text + " " + std::string(mrope_model_name(model)) + " " +
                                     std::string(mrope_rule_name(rule)) +
                                     " m=" + std::to_string(merge) + " tps=" + std::to_string(tps);
            for (int a = 0; a < 3; ++a) EXPECT_EQ(p.ids[a], r.axes[a]) << what << " axis " << a;
            EXPECT_EQ(p.rope_deltas, r.delta) << what;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 6 * 4 * 2 * 3 * 4);
}

TEST(MropeLayout, ParsesAndPrintsBack) {
  const std::string text = "text:5,image:1x28x28,text:3,video:4x28x28@0.5";
  const std::vector<MropeSegment> layout = parse_mrope_layout(text);
  ASSERT_EQ(layout.size(), 4u);
  EXPECT_EQ(layout[1].kind, MropeSegmentKind::kImage);
  EXPECT_EQ(layout[3].t, 4);
  EXPECT_EQ(layout[3].second_per_grid_t, 0.5);
  EXPECT_EQ(mrope_layout_text(layout), text);
  EXPECT_EQ(parse_mrope_rule("hf-5.3"), MropeRule::kHf53);
  EXPECT_EQ(parse_mrope_model("glm-4.1v"), MropeModel::kGlm4v);
}

std::string parse_error_of(const std::string& text) {
  try {
    parse_mrope_layout(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MropeLayout, ErrorsNameTheSegmentAndTheValue) {
  EXPECT_THAT(parse_error_of(""), HasSubstr("--layout (\"\") must not be empty"));
  EXPECT_THAT(parse_error_of("text:5,audio:3"),
              HasSubstr("layout segment 2 (\"audio:3\"): unknown segment kind \"audio\""));
  EXPECT_THAT(parse_error_of("text5"), HasSubstr("segment 1 (\"text5\"): no ':'"));
  EXPECT_THAT(parse_error_of("text:5,,text:1"), HasSubstr("segment 2 (\"\"): empty segment"));
  EXPECT_THAT(parse_error_of("text:0"), HasSubstr("N (0) must be an integer >= 1"));
  EXPECT_THAT(parse_error_of("text:-3"), HasSubstr("N (-3) must be an integer >= 1"));
  EXPECT_THAT(parse_error_of("text:2.5"), HasSubstr("N (2.5) must be an integer >= 1"));
  EXPECT_THAT(parse_error_of("image:0x28x28"), HasSubstr("T (0) must be an integer >= 1"));
  EXPECT_THAT(parse_error_of("image:1x-28x28"), HasSubstr("H (-28) must be an integer >= 1"));
  EXPECT_THAT(parse_error_of("image:1x28x"), HasSubstr("W () must be an integer >= 1"));
  EXPECT_THAT(parse_error_of("image:1x28"), HasSubstr("the grid (1x28) must be TxHxW"));
  EXPECT_THAT(parse_error_of("image:1x2x2x2"), HasSubstr("must be TxHxW"));
  EXPECT_THAT(parse_error_of("image:99999999999999999999x2x2"),
              HasSubstr("T (99999999999999999999) must be an integer >= 1"));
  EXPECT_THAT(parse_error_of("image:1x28x28@1"), HasSubstr("an image takes no @S"));
  EXPECT_THAT(parse_error_of("text:1,video:4x28x28"),
              HasSubstr("layout segment 2 (\"video:4x28x28\"): a video needs @S"));
  for (const char* s : {"0", "-1", "inf", "nan", "", "x", "1e999", "0.5s"}) {
    EXPECT_THAT(parse_error_of(std::string("video:4x28x28@") + s),
                HasSubstr("S (" + std::string(s) + ") must be a finite number > 0"))
        << s;
  }
}

TEST(MropePositions, ErrorsNameTheSegmentAndTheValue) {
  EXPECT_THAT(error_of("text:2,image:1x27x28"),
              HasSubstr("layout segment 2 (\"image:1x27x28\"): H (27) must be a multiple of "
                        "spatial_merge_size (2)"));
  EXPECT_THAT(error_of("video:2x28x30@1", MropeModel::kQwen25Vl, 4),
              HasSubstr("W (30) must be a multiple of spatial_merge_size (4)"));
  EXPECT_THAT(error_of("text:1", MropeModel::kQwen25Vl, 0),
              HasSubstr("spatial_merge_size (0) must be an integer >= 1"));
  EXPECT_THAT(error_of("text:1", MropeModel::kQwen25Vl, 2, 0),
              HasSubstr("tokens_per_second (0) must be a finite number > 0"));
  EXPECT_THAT(error_of("text:1", MropeModel::kQwen25Vl, 2, std::nan("")),
              HasSubstr("tokens_per_second (nan) must be a finite number > 0"));
  EXPECT_EQ(error_of("text:1", MropeModel::kQwen2Vl, 2, 0), "(no error)");  // not read there
  EXPECT_THAT(
      error_of("image:1x4096x4096,image:1x2x2"),
      HasSubstr("segment 2 (\"image:1x2x2\"): the layout reaches more than 4194304 tokens"));
  EXPECT_THAT(error_of("image:1x10000000000x10000000000"), HasSubstr("more than 4194304 tokens"));
  EXPECT_THAT(error_of("video:2x2x2@1e300"),
              HasSubstr("the temporal id of group 1 (2e+300) is past int32 (2147483647)"));
  EXPECT_THAT(
      error_of("text:4000000,video:10x2x2@119300000,text:1"),
      HasSubstr("segment 2 (\"video:10x2x2@119300000\"): position ids reach 2151400000, past "
                "int32 (2147483647)"));
  // Structured input that bypasses the parser is checked too.
  MropeSegment zero;
  zero.kind = MropeSegmentKind::kText;
  EXPECT_THROW(mrope_positions(std::vector{zero}, {}, MropeRule::kHf45), Error);
  EXPECT_THROW(mrope_positions(std::vector<MropeSegment>{}, {}, MropeRule::kHf45), Error);
  EXPECT_THAT(
      [] {
        try {
          parse_mrope_rule("hf-5");
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("--rule (\"hf-5\") must be hf-4.5"));
  EXPECT_THROW(mrope_decode_position(-1, 0), Error);
  EXPECT_THROW(mrope_decode_position(0, -1), Error);
  EXPECT_THROW(mrope_decode_position(INT64_MAX, 1), Error);
}

}  // namespace
}  // namespace posenc
