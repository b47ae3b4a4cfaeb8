// The benchmark cases' positions (bench/cases.h's case_positions): one axis, the [t, t / 64,
// t % 64] grid, and the Qwen2-VL image prompt against get_rope_index's rule worked out by hand
// (transformers 4.57 Qwen2VLModel.get_rope_index: text t = h = w = index; an image block starting
// at s = max so far + 1 takes t = s, h = s + row, w = s + column; the text after it resumes at
// the block's max + 1), so that a case that ignored its layout would fail here.
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cases.h"
#include "posenc/core/error.h"

namespace {

using posenc::bench::case_positions;
using posenc::bench::Shape;
using ::testing::HasSubstr;

const Shape& ShapeNamed(std::string_view name) {
  for (const Shape& s : posenc::bench::shapes()) {
    if (s.name == name) return s;
  }
  throw std::runtime_error("no shape " + std::string(name));
}

std::int64_t At(const std::vector<std::int64_t>& p, std::int64_t tokens, std::int64_t axis,
                std::int64_t t) {
  return p[static_cast<std::size_t>(axis * tokens + t)];
}

TEST(BenchCases, OneAxisShapesCountFromTheirFirstPosition) {
  for (const Shape& s : posenc::bench::shapes()) {
    if (s.mrope) continue;
    const auto p = case_positions(s);
    ASSERT_EQ(static_cast<std::int64_t>(p.size()), s.tokens) << s.name;
    for (std::int64_t t = 0; t < s.tokens; ++t)
      ASSERT_EQ(p[static_cast<std::size_t>(t)], s.first_position + t) << s.name << " token " << t;
  }
}

TEST(BenchCases, MropeGridIsTByTokenHAndWBy64) {
  const Shape& s = ShapeNamed("mrope-prefill-q");
  const auto p = case_positions(s);
  ASSERT_EQ(static_cast<std::int64_t>(p.size()), 3 * s.tokens);
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    ASSERT_EQ(At(p, s.tokens, 0, t), t);
    ASSERT_EQ(At(p, s.tokens, 1, t), t / 64);
    ASSERT_EQ(At(p, s.tokens, 2, t), t % 64);
  }
}

TEST(BenchCases, ImagePromptHasQwen2VlIds) {
  const Shape& s = ShapeNamed("qwen2-vl-image-prefill-q");
  ASSERT_EQ(s.mrope_layout, "text:32,image:1x128x126,text:32");
  const auto p = case_positions(s);
  ASSERT_EQ(s.tokens, 32 + 64 * 63 + 32);
  ASSERT_EQ(static_cast<std::int64_t>(p.size()), 3 * s.tokens);
  std::int64_t t = 0;
  for (; t < 32; ++t) {
    for (std::int64_t a = 0; a < 3; ++a) ASSERT_EQ(At(p, s.tokens, a, t), t) << t;
  }
  // 128 x 126 patches merged 2 x 2: 64 rows of 63 tokens, starting at s = 32.
  for (std::int64_t row = 0; row < 64; ++row) {
    for (std::int64_t col = 0; col < 63; ++col, ++t) {
      ASSERT_EQ(At(p, s.tokens, 0, t), 32) << t;
      ASSERT_EQ(At(p, s.tokens, 1, t), 32 + row) << t;
      ASSERT_EQ(At(p, s.tokens, 2, t), 32 + col) << t;
    }
  }
  // The block's max is 32 + 63 (h): the text resumes at 96.
  for (std::int64_t j = 0; t < s.tokens; ++t, ++j) {
    for (std::int64_t a = 0; a < 3; ++a) ASSERT_EQ(At(p, s.tokens, a, t), 96 + j) << t;
  }
}

// case_positions(shape) throws posenc::Error with every one of `parts` in its message.
void ExpectRefused(const Shape& shape, std::initializer_list<std::string_view> parts) {
  try {
    case_positions(shape);
    ADD_FAILURE() << "accepted " << shape.name << " with layout '" << shape.mrope_layout << "'";
  } catch (const posenc::Error& e) {
    for (std::string_view part : parts) EXPECT_THAT(e.what(), HasSubstr(std::string(part)));
  }
}

TEST(BenchCases, BadLayoutsAreRefusedNamingTheShape) {
  Shape wrong_count = ShapeNamed("qwen2-vl-image-prefill-q");
  wrong_count.tokens = 4000;
  ExpectRefused(wrong_count, {"qwen2-vl-image-prefill-q", "has 4096 tokens, the shape 4000"});
  Shape one_axis = ShapeNamed("llama2-7b-prefill-q");
  one_axis.mrope_layout = "text:4096";
  ExpectRefused(one_axis, {"llama2-7b-prefill-q", "no 3-axis map"});
}

}  // namespace
