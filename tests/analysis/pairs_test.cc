// posenc/analysis/pairs.h: the per-pair rows of `posenc inspect` and the report, against the
// formulas written out here (plain RoPE w_i = theta^(-2i/d); linear divides every w_i by s).
#include "posenc/analysis/pairs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "posenc/core/defaults.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"

namespace posenc {
namespace {

RopeSpec linear_spec(std::int64_t original, std::int64_t max_positions) {
  RopeSpec s;
  s.head_dim = 64;
  s.rotary_dim = 64;
  s.rope_theta = 10000.0;
  s.method = Method::kLinear;
  s.factor = 4.0;
  s.original_max_position_embeddings = original;
  s.max_position_embeddings = max_positions;
  return s;
}

void expect_near_rel(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-13 * std::abs(expected)) << expected;
}

TEST(PairRows, LinearAgainstTheFormulas) {
  const Frequencies f = compute_frequencies(linear_spec(4096, 16384));
  const std::vector<PairRow> rows = pair_rows(f);
  ASSERT_EQ(rows.size(), 32u);
  const double two_pi = 2.0 * std::numbers::pi;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double w0 = std::pow(10000.0, -2.0 * static_cast<double>(i) / 64.0);
    const PairRow& r = rows[i];
    EXPECT_EQ(r.index, static_cast<std::int64_t>(i));
    expect_near_rel(r.inv_freq, w0 / 4.0);
    ASSERT_TRUE(r.wavelength && r.rotations && r.ratio) << i;
    expect_near_rel(*r.wavelength, two_pi * 4.0 / w0);
    expect_near_rel(*r.rotations, 4096.0 * w0 / two_pi);  // over the original context
    expect_near_rel(*r.ratio, 0.25);
    EXPECT_EQ(r.weight, 1.0);
    EXPECT_EQ(r.treatment, "interpolated");
  }
}

TEST(PairRows, ContextIsTheOriginalElseMaxPositionsElseAssumed) {
  const double two_pi = 2.0 * std::numbers::pi;
  const auto r0 = [&](const RopeSpec& s) {
    return *pair_rows(compute_frequencies(s))[0].rotations;
  };
  expect_near_rel(r0(linear_spec(4096, 16384)), 4096.0 / two_pi);
  expect_near_rel(r0(linear_spec(0, 16384)), 16384.0 / two_pi);
  expect_near_rel(r0(linear_spec(0, 0)), static_cast<double>(kAssumedContext) / two_pi);
  // An explicit context; none when it is not positive.
  const Frequencies f = compute_frequencies(linear_spec(4096, 16384));
  expect_near_rel(*pair_rows(f, 100.0)[0].rotations, 100.0 / two_pi);
  EXPECT_FALSE(pair_rows(f, 0.0)[0].rotations.has_value());
}

}  // namespace
}  // namespace posenc
