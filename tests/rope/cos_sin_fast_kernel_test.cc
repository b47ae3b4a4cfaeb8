// The on-the-fly rows' SIMD kernels (src/rope/kernels/cos_sin_fast_kernel.h) called directly, on
// every SIMD target: the step kernel's rounding decision against the reals within its bound, and
// the anchor kernel's doubles against their derived error. The rows they make, against the exact
// path bit for bit, are cos_sin_fast_test.cc's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/cos_sin.h"
#include "rope/kernels/cos_sin_fast_kernel.h"
#include "support/simd_targets.h"

namespace {

using posenc_test::ForEachTarget;

// The step kernel's rounding decision (kernels/cos_sin_fast_kernel.cc: a vector passes where
// every entry is more than max(2 E, 2^-149) from the midpoint of its float32 cell; a vector that
// fails is checked entry by entry) with values placed where it is hardest. The identity step
// (uc = 1, us = 0) keeps the doubles as given: either side of float32 midpoints by fractions of
// E, just above and below powers of two, in float32's subnormal range and below it, both signs,
// with bounds from 2^-170 to 0.45 of a float32 step. Every entry the kernel does not flag must be
// decided for the reals: each within E of v (less a double step of v, below) rounds to the float
// written, checked exactly in long double against the midpoints either side of that float.
// Deciding with E for 2 E fails this (values just above a power of two, whose lower float32
// neighbour is half a step away), as do a threshold without its floor (float32 subnormals) and
// the largest distance of a group taken for the smallest; cos_sin_fast_test.cc passes the first
// two.
TEST(CosSinFast, StepDecidesRoundingOnlyWhereEveryRealWithinTheBoundAgrees) {
  using LD = long double;
  static_assert(std::numeric_limits<LD>::digits >= 64, "the check below needs x87 long double");
  // Binades k (values in [2^k, 2^(k+1))): normal ones, the smallest, and float32 subnormals.
  const int binades[] = {40,   0,    -1,   -6,   -17,  -18,  -19,  -30,  -100,
                         -125, -126, -127, -130, -140, -148, -149, -150, -160};
  ForEachTarget([&](const std::string&) {
    std::int64_t checked = 0, flagged_total = 0, near_unflagged = 0;
    for (int k : binades) {
      const double q = std::ldexp(1.0, std::max(k - 23, -149));  // float32 step in the binade
      std::vector<double> values;
      for (double j : {0.0, 1.0, 5.0, 0x1p22, 0x1p23 - 1.0}) {  // floats: 2^k, 2^k + q, ...
        const double a = std::ldexp(1.0, k) + j * q;
        if (a >= std::ldexp(1.0, k + 1)) continue;
        for (double t : {-0.5, -0.25, 0.0, 0.25, 0.5}) values.push_back(a + t * q);
      }
      for (double bound :
           {0x1p-170, 0x1p-155, q * 0x1p-30, q * 0x1p-10, q / 8, q * 0.3, q * 0.45}) {
        std::vector<double> c, s;
        for (double v0 : values) {
          for (double e :
               {-3.0, -2.01, -1.99, -1.01, -0.99, -0.5, 0.0, 0.5, 0.99, 1.01, 1.99, 2.01, 3.0}) {
            const double v = v0 + e * bound;
            (c.size() <= s.size() ? c : s).push_back(c.size() % 3 == 0 ? -v : v);
          }
        }
        s.resize(c.size(), 0.5);
        const auto n = static_cast<std::int64_t>(c.size());
        const std::vector<double> given_c = c, given_s = s;
        std::vector<double> uc(c.size(), 1.0), us(c.size(), 0.0);
        std::vector<float> out_c(c.size()), out_s(c.size());
        std::vector<std::int64_t> flagged(c.size());
        posenc::detail::CosSinStep st;
        st.c = c.data();
        st.s = s.data();
        st.uc = uc.data();
        st.us = us.data();
        st.n = n;
        st.bound = bound;
        st.rows = 1;
        st.cos_out = out_c.data();
        st.sin_out = out_s.data();
        st.flagged = flagged.data();
        const std::int64_t count = posenc::detail::cos_sin_step(st);
        ASSERT_EQ(c, given_c) << "the identity step moved a value";
        ASSERT_EQ(s, given_s);
        std::vector<bool> is_flagged(c.size(), false);
        for (std::int64_t j = 0; j < count; ++j)
          is_flagged[static_cast<std::size_t>(flagged[j])] = true;
        flagged_total += count;
        for (std::size_t i = 0; i < c.size(); ++i) {
          if (is_flagged[i]) continue;
          for (auto [v, f] : {std::pair{c[i], out_c[i]}, std::pair{s[i], out_s[i]}}) {
            // The reals rounding to f: between the midpoints with its neighbours (exact sums of
            // two floats in long double), ties aside.
            const LD lo = (LD{f} + LD{std::nextafter(f, -INFINITY)}) / 2;
            const LD hi = (LD{f} + LD{std::nextafter(f, INFINITY)}) / 2;
            // The entry-by-entry test rounds v - E and v + E to double, which the stepper's
            // bound budgets for (cos_sin_fast.cc): the reals within E less that rounding.
            const double top = std::abs(v) + bound;
            const LD within = LD{bound} - (LD{std::nextafter(top, INFINITY)} - LD{top});
            if (within <= 0) continue;
            const LD x = v;
            ++checked;
            EXPECT_TRUE(x - lo > within && hi - x > within)
                << "binade " << k << ", bound " << bound << ": " << v << " written as " << f
                << " though a real within the bound rounds elsewhere";
            near_unflagged += std::min(x - lo, hi - x) < 3 * LD{bound};
          }
        }
      }
    }
    // The values reached both sides of the decision.
    EXPECT_GT(flagged_total, 0);
    EXPECT_GT(near_unflagged, 0);
    EXPECT_GT(checked, 1000);
  });
}

// The anchor kernel's doubles against an independent reference: for angles below pi/4 no
// reduction is needed, so cos and sin of p w = hi + lo (the product split by an FMA) come from
// glibc's long double cosl and sinl (64-bit mantissa: within ~2^-63 of the truth); the kernel's
// must be within 1.0 u (u = 2^-53), its derivation's claim. Larger angles go through the
// reduction: within 3 u of exact_sincos (its 2 u and the kernel's 1 u).
TEST(CosSinFast, AnchorDoublesAreWithinTheirDerivedErrorOnEveryTarget) {
  constexpr double u = 0x1p-53;
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_real_distribution<double> log2p(0.0, 31.0);
  const std::size_t n = 4099;  // a tail on every vector width
  std::vector<double> small_p(n), small_w(n), big_p(n), big_w(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Small angles: |p w| < 0.785 with p up to 2^20 (so that lo is not zero).
    small_p[i] = std::floor(std::exp2(log2p(rng) * 20.0 / 31.0));
    small_w[i] = unit(rng) * 0.785 / small_p[i];
    big_p[i] = std::floor(std::exp2(log2p(rng))) * (i % 2 ? 1.0 : -1.0);
    big_w[i] = std::exp2(unit(rng) * 20.0 - 18.0);
  }
  ForEachTarget([&](const std::string& target) {
    for (const bool small : {true, false}) {
      const std::vector<double>& p = small ? small_p : big_p;
      const std::vector<double>& w = small ? small_w : big_w;
      std::vector<double> c(n), s(n);
      std::vector<float> fc(n), fs(n);
      std::vector<std::int64_t> flagged(n);
      posenc::detail::CosSinAnchor a;
      a.position = p.data();
      a.w = w.data();
      a.n = static_cast<std::int64_t>(n);
      a.af = 1.0;
      a.c = c.data();
      a.s = s.data();
      a.cos_out = fc.data();
      a.sin_out = fs.data();
      a.bound = 0.0;
      a.flagged = flagged.data();
      const std::int64_t k = posenc::detail::cos_sin_anchor(a);
      if (!posenc::detail::cos_sin_anchor_in_simd()) {
        EXPECT_EQ(k, static_cast<std::int64_t>(n));  // no FMA: every pair left to exact_sincos
        continue;
      }
      EXPECT_EQ(k, 0) << target << (small ? " small" : " large") << " angles";
      long double worst = 0.0L;
      for (std::size_t i = 0; i < n; ++i) {
        long double want_c, want_s;  // the reference, unrounded where it is cosl and sinl
        if (small) {
          const double hi = p[i] * w[i];
          const double lo = std::fma(p[i], w[i], -hi);
          const long double angle = static_cast<long double>(hi) + static_cast<long double>(lo);
          want_c = std::cos(angle);
          want_s = std::sin(angle);
        } else {
          double ec, es;
          posenc::exact_sincos(static_cast<std::int64_t>(p[i]), w[i], es, ec);
          want_c = ec;
          want_s = es;
        }
        worst = std::max({worst, std::abs(c[i] - want_c) / u, std::abs(s[i] - want_s) / u});
      }
      std::printf("[  STATS   ] %s: %s angles, worst error %.3f u\n", target.c_str(),
                  small ? "small (against cosl, sinl)" : "large (against exact_sincos)",
                  static_cast<double>(worst));
      EXPECT_LE(worst, small ? 1.0 : 3.0) << target;
    }
  });
}

}  // namespace
