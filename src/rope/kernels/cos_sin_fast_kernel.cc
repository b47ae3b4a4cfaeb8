// The on-the-fly cos/sin step (cos_sin_fast_kernel.h), written once with Highway and compiled for
// every SIMD target. Four double lanes per AVX2 vector; where the target has no FMA the two
// products are rounded separately, which the bound in rope/cos_sin_fast.cc allows for.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rope/kernels/cos_sin_fast_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "core/pi_reduction.h"
#include "rope/kernels/cos_sin_fast_kernel.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Which roundings are decided. Each entry v is written as fl32(v), and it is the exact path's
// float where every real within the bound E of v rounds to it. Rounding [v - E, v + E] to float32
// twice and comparing (FlagLanes, below) decides that exactly, at two conversions per entry, the
// step's dearest operation here; the vectors use a sufficient test at one conversion:
//   |v - m| > t, t = max(2 E, 2^-149),
// m the midpoint of v's float32 cell: v's sign, exponent and top 23 mantissa bits, then a one bit
// (a float32 a = trunc(|v|) and m = a + q/2, q = 2^(k-23) the float32 step of |v|'s binade
// [2^k, 2^(k+1))). v - m is exact (Sterbenz: one sign and binade). In a normal binade, with
// x = |v|: if x < m - t, then x + E < m, and x - E >= a - E > a - q/4, where a's lower
// neighbour is q or q/2 (a = 2^k) below it, because q/2 >= m - x > 2 E; so every real of
// (x - E, x + E) rounds to a, x among them. If x > m + t, they all lie in (m, a + q + q/4) and
// round to a + q. Below float32's normal range (2^k <= 2^-127, double subnormals too) the
// float32 step is 2^-149, not q, but there |v - m| <= q/2 <= 2^-151 < t: flagged. NaN and
// infinities give NaN (flagged where compared one vector at a time). Against the exact test it
// flags about twice as many entries (those within 2 E of a midpoint, not E, and the tiny ones),
// and groups that fail are checked entry by entry by FlagLanes.
// Measured (a standalone copy of the step on Zen 4, 64 pairs, 16 rows a call): 28.6-29.3 ns a
// row with the exact test per vector, 21.5 with this one, 11.2 with no test at all.
inline double DecisionThreshold(double bound) { return std::max(2.0 * bound, 0x1p-149); }

// Stores fl32(v) at o; returns v - m, m the midpoint of v's float32 cell (above).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V StoreRoundedMidDistance(D d, V v, float* HWY_RESTRICT o) {
  const hn::Rebind<float, D> df;
  const hn::RebindToUnsigned<D> du;
  hn::StoreU(hn::DemoteTo(df, v), df, o);
  const auto keep = hn::Set(du, ~((std::uint64_t{1} << 29) - 1));  // sign, exponent, 23 bits
  const auto half = hn::Set(du, std::uint64_t{1} << 28);
  return hn::Sub(v, hn::BitCast(d, hn::OrAnd(half, hn::BitCast(du, v), keep)));
}

// min(|a|, |b|) for finite a, b: one vrangepd on AVX-512. What either form gives for a NaN is not
// relied on: the stepped doubles are cos and sin times the attention factor (a finite double)
// plus a bounded error, from anchors whose flagged pairs exact_sincos replaced (cos_sin_fast.cc).
template <class V>
HWY_INLINE V MinAbs(V a, V b) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (sizeof(a.raw) == 64) return V{_mm512_range_pd(a.raw, b.raw, 0xA)};
#endif
  return hn::Min(hn::Abs(a), hn::Abs(b));
}

// The exact test per entry, from the doubles c, s, for a group that failed as a whole: where
// fl32(v - E) == fl32(v + E) every double within E of v, the exact path's among them, rounds to
// the float written, fl32(v) (rounding to nearest is monotonic); entries listed as first + i.
HWY_NOINLINE std::int64_t FlagLanes(const double* c, const double* s, std::int64_t* list,
                                    double row_bound, std::int64_t first, std::int64_t begin,
                                    std::int64_t end, std::int64_t flagged) {
  const hn::CappedTag<double, 1> d1;
  const hn::Rebind<float, decltype(d1)> f1;
  const auto bound = hn::Set(d1, row_bound);
  for (std::int64_t i = begin; i < end; ++i) {
    bool ok = true;
    for (const double* row : {c, s}) {
      const auto v = hn::LoadU(d1, row + i);
      ok = ok && hn::AllTrue(f1, hn::Eq(hn::DemoteTo(f1, hn::Sub(v, bound)),
                                        hn::DemoteTo(f1, hn::Add(v, bound))));
    }
    if (!ok) list[flagged++] = first + i;
  }
  return flagged;
}

// One step of a vector of pairs held in registers: (c, s) <- (c uc - s us, s uc + c us).
template <class V>
HWY_INLINE void StepPair(V& c, V& s, V uc, V us) {
  const V c2 = hn::MulSub(c, uc, hn::Mul(s, us));
  const V s2 = hn::MulAdd(s, uc, hn::Mul(c, us));
  c = c2;
  s = s2;
}

// Pairs [i, i + K Lanes(d)), K = 2 with kTwo else 1, through every row of the call, their doubles
// kept in registers from one row to the next (named registers, not arrays: SVE's and RVV's vectors
// are sizeless). Row by row (the loop before this one) each row's doubles were stored and loaded
// back for the next row, and the chain through that store and load, not the conversions, bound
// the step: in a standalone copy of both loops on Zen 5 (64 pairs, 16 rows a call) 19.3 ns a row
// against 12.3 with two vectors in registers; without the conversions at all, row by row still
// took 16.1 ns.
template <bool kTwo, class D>
HWY_INLINE std::int64_t StepColumns(D d, const CosSinStep& a, std::int64_t i,
                                    std::int64_t flagged) {
  using V = hn::Vec<D>;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t j = i + lanes;  // the second vector's pairs (kTwo)
  V c0 = hn::LoadU(d, a.c + i), s0 = hn::LoadU(d, a.s + i);
  const V uc0 = hn::LoadU(d, a.uc + i), us0 = hn::LoadU(d, a.us + i);
  V c1 = c0, s1 = s0, uc1 = uc0, us1 = us0;
  if constexpr (kTwo) {
    c1 = hn::LoadU(d, a.c + j);
    s1 = hn::LoadU(d, a.s + j);
    uc1 = hn::LoadU(d, a.uc + j);
    us1 = hn::LoadU(d, a.us + j);
  }
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const double row_bound = a.bound + static_cast<double>(r) * a.bound_step;
    float* HWY_RESTRICT oc = a.cos_out + r * a.out_stride + i;
    float* HWY_RESTRICT os = a.sin_out + r * a.out_stride + i;
    StepPair(c0, s0, uc0, us0);
    // The doubles are finite (entries of at most |af| (1 + 2^-30), |af| < 2^64), as MinAbs needs.
    V nearest = MinAbs(StoreRoundedMidDistance(d, c0, oc), StoreRoundedMidDistance(d, s0, os));
    if constexpr (kTwo) {
      StepPair(c1, s1, uc1, us1);
      nearest = MinAbs(nearest, MinAbs(StoreRoundedMidDistance(d, c1, oc + lanes),
                                       StoreRoundedMidDistance(d, s1, os + lanes)));
    }
    const bool ok = hn::AllTrue(d, hn::Gt(nearest, hn::Set(d, DecisionThreshold(row_bound))));
    // At most about 1e-3 of the groups fail (measured in a standalone copy, Llama 2's
    // frequencies): the exact check of this row's entries, out of line.
    if (HWY_UNLIKELY(!ok)) {
      constexpr std::size_t kMaxLanes = HWY_MAX_BYTES / sizeof(double);
      double row_c[2 * kMaxLanes], row_s[2 * kMaxLanes];
      hn::StoreU(c0, d, row_c);
      hn::StoreU(s0, d, row_s);
      if constexpr (kTwo) {
        hn::StoreU(c1, d, row_c + lanes);
        hn::StoreU(s1, d, row_s + lanes);
      }
      flagged = FlagLanes(row_c, row_s, a.flagged, row_bound, r * a.n + i, 0,
                          (kTwo ? 2 : 1) * lanes, flagged);
    }
  }
  hn::StoreU(c0, d, a.c + i);
  hn::StoreU(s0, d, a.s + i);
  if constexpr (kTwo) {
    hn::StoreU(c1, d, a.c + j);
    hn::StoreU(s1, d, a.s + j);
  }
  return flagged;
}

std::int64_t CosSinStepRow(const CosSinStep& a) {
  const hn::ScalableTag<double> d;
  const hn::CappedTag<double, 1> d1;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  // Two vectors at a time: the chain from one row to the next (a multiply and a fused one) has
  // work beside it; four ran no faster (hd 64 / 128 / 256: 13.2-13.8 / 26.9-27.9 / 49.7-52.3 ns a
  // row, two: 12.9-13.8 / 26.7-29.1 / 49.1-53.4; row by row 19.6-20.7 / 42.0-49.3 / 62.4-62.5).
  std::int64_t flagged = 0;
  std::int64_t i = 0;
  for (; i + 2 * lanes <= a.n; i += 2 * lanes) flagged = StepColumns<true>(d, a, i, flagged);
  for (; i + lanes <= a.n; i += lanes) flagged = StepColumns<false>(d, a, i, flagged);
  for (; i < a.n; ++i) flagged = StepColumns<false>(d1, a, i, flagged);
  return flagged;
}

// The anchor rows (CosSinAnchor). The reduction is exact_sincos's (src/core/cos_sin.cc), operation
// for operation: the library is built with -ffp-contract=off, and the MulAdd / MulSub below are the
// fused operations exact_sincos gets from std::fma, so r_hi and r_lo are its bits. With x = r_hi,
// |x| <= 0.79 (checked: pi/4 = 0.7854; a lane outside, or not finite, is flagged), y = fl(x^2)
// and u = 2^-53, sin and cos of x + r_lo are Taylor polynomials:
//  sin: S = x + (x^3 P(y) + r_lo (1 - y/2)), P's coefficients -1/3! .. +1/17!, the first term
//    left out below 0.79^19 / 19! < 1e-19 (0.001 u). P by FMAs in Horner form is within 2.2 u
//    relative (each coefficient rounded once, one rounding per FMA, y's error damped by
//    y P'(y) / P(y) < 0.04), x^3 = fl(x y) within 2 u, so x^3 P is within 4.3 u of at most
//    0.79^3 / 6 < 0.083: 0.36 u; the FMA adding r_lo (1 - y/2) (|r_lo| <= 2^-54, and
//    cos x - (1 - y/2) < 0.017 makes that term's error negligible) rounds by half an ulp of a
//    value below 0.125: u/16; x + t by u/2 (|S| < 0.72 < 1). sin(x + r_lo) = sin x + r_lo cos x
//    + O(r_lo^2 = 2^-108). Total < 0.92 u.
//  cos: C = 1 + ((y^2 Q(y) - (y_lo / 2 + r_lo S)) - y / 2), y + y_lo = x^2 exactly (an FMA), Q's
//    coefficients 1/4! .. -1/18!, the first term left out < 0.79^20 / 20! < 4e-21. y^2 Q within
//    6.1 u of < 0.017: 0.11 u; the small terms (each < 2^-54) round by < 0.02 u; the difference
//    with y / 2 (halving is exact; the difference is below 0.33) by u/4; 1 + that by u/2. Total
//    < 0.89 u.
// So each is within 1.0 u of the true value where the bound of rope/cos_sin_fast.cc assumes 2 u
// for exact_sincos: the bound of every stepped row holds from these anchors too, and the exact
// path's double (2 u) is within 3 u |af| plus the two products' roundings of the entry here, well
// inside the bound of a first row (16 u |af|), which the caller passes.
constexpr double InvFactorial(int k) {
  double f = 1.0;
  for (int i = 2; i <= k; ++i) f *= i;  // exact: 18! < 2^53
  return 1.0 / f;                       // correctly rounded
}
// P(y) and Q(y), lowest power first.
constexpr double kSinP[8] = {-InvFactorial(3),  InvFactorial(5),   -InvFactorial(7),
                             InvFactorial(9),   -InvFactorial(11), InvFactorial(13),
                             -InvFactorial(15), InvFactorial(17)};
constexpr double kCosQ[8] = {InvFactorial(4),   -InvFactorial(6), InvFactorial(8),
                             -InvFactorial(10), InvFactorial(12), -InvFactorial(14),
                             InvFactorial(16),  -InvFactorial(18)};

template <class D, class V = hn::Vec<D>>
HWY_INLINE bool AnchorLanes(D d, const double* HWY_RESTRICT position, const double* HWY_RESTRICT w,
                            V af, V threshold, double* HWY_RESTRICT pc, double* HWY_RESTRICT ps,
                            float* HWY_RESTRICT oc, float* HWY_RESTRICT os) {
  const auto p = hn::LoadU(d, position);
  const auto om = hn::LoadU(d, w);
  // exact_sincos: p * omega = hi + lo; k the nearest multiple of pi/2; r_hi + r_lo the remainder.
  const auto hi = hn::Mul(p, om);
  const auto lo = hn::MulSub(p, om, hi);
  const auto k = hn::Round(hn::Mul(hi, hn::Set(d, kTwoOverPi)));
  const auto t_hi = hn::Mul(k, hn::Set(d, kHalfPi1));
  const auto t_lo = hn::MulSub(k, hn::Set(d, kHalfPi1), t_hi);
  const auto head = hn::Sub(hi, t_hi);
  const auto tail = hn::Sub(hn::Sub(hn::Sub(lo, t_lo), hn::Mul(k, hn::Set(d, kHalfPi2))),
                            hn::Mul(k, hn::Set(d, kHalfPi3)));
  const auto x = hn::Add(head, tail);
  const auto b = hn::Sub(x, head);
  const auto r_lo = hn::Add(hn::Sub(head, hn::Sub(x, b)), hn::Sub(tail, b));
  const auto in_range = hn::Lt(hn::Abs(x), hn::Set(d, 0.79));
  // The polynomials (the derivation above).
  const auto y = hn::Mul(x, x);
  const auto y_lo = hn::MulSub(x, x, y);
  auto ps_poly = hn::Set(d, kSinP[7]);
  auto qc_poly = hn::Set(d, kCosQ[7]);
  for (int j = 6; j >= 0; --j) {
    ps_poly = hn::MulAdd(ps_poly, y, hn::Set(d, kSinP[j]));
    qc_poly = hn::MulAdd(qc_poly, y, hn::Set(d, kCosQ[j]));
  }
  const auto x3 = hn::Mul(x, y);
  const auto y2 = hn::Mul(y, y);
  const auto half_y = hn::Mul(y, hn::Set(d, 0.5));
  const auto sin_x =
      hn::Add(x, hn::MulAdd(x3, ps_poly, hn::Mul(r_lo, hn::Sub(hn::Set(d, 1.0), half_y))));
  const auto small = hn::MulAdd(r_lo, sin_x, hn::Mul(y_lo, hn::Set(d, 0.5)));
  const auto cos_x =
      hn::Add(hn::Set(d, 1.0), hn::Sub(hn::Sub(hn::Mul(y2, qc_poly), small), half_y));
  // The quadrant, as exact_sincos's switch on k & 3: odd swaps, 2 and 3 negate the sine, 1 and 2
  // the cosine. q = k mod 4 in double (exact for every integer-valued double, and equal to
  // int64(k) & 3 wherever that is defined): no conversion to int64, which AVX2 has no instruction
  // for.
  const auto q = hn::NegMulAdd(hn::Set(d, 4.0), hn::Floor(hn::Mul(k, hn::Set(d, 0.25))), k);
  const auto is1 = hn::Eq(q, hn::Set(d, 1.0));
  const auto is2 = hn::Eq(q, hn::Set(d, 2.0));
  const auto is3 = hn::Eq(q, hn::Set(d, 3.0));
  const auto swap = hn::Or(is1, is3);
  const auto neg_s = hn::Or(is2, is3);
  const auto neg_c = hn::Or(is1, is2);
  auto sn = hn::IfThenElse(swap, cos_x, sin_x);
  auto cs = hn::IfThenElse(swap, sin_x, cos_x);
  sn = hn::IfThenElse(neg_s, hn::Neg(sn), sn);
  cs = hn::IfThenElse(neg_c, hn::Neg(cs), cs);
  const auto nan = hn::Set(d, std::numeric_limits<double>::quiet_NaN());
  const auto c_af = hn::IfThenElse(in_range, hn::Mul(cs, af), nan);
  const auto s_af = hn::IfThenElse(in_range, hn::Mul(sn, af), nan);
  hn::StoreU(c_af, d, pc);
  hn::StoreU(s_af, d, ps);
  // One vector at a time, where NaN (a lane out of range) fails the compare. A lane whose product
  // p w is zero (hi and lo both zero: position 0, or frequency 0) is exact: the reduction above
  // gives x = +0 and r_lo = +0 whatever the zeros' signs, so sin_x = +0 and cos_x = 1 exactly, as
  // exact_sincos gives (+0, 1) there (the same operations), and af and +0 af are the exact path's
  // doubles. Its sine, a zero, is one the midpoint test cannot pass: without this, every pair of
  // a row at position 0 went to exact_sincos (about 1.1 us a row of 64 pairs).
  const auto exact = hn::And(hn::Eq(hi, hn::Zero(d)), hn::Eq(lo, hn::Zero(d)));
  const auto to_mid_c = hn::Abs(StoreRoundedMidDistance(d, c_af, oc));
  const auto to_mid_s = hn::Abs(StoreRoundedMidDistance(d, s_af, os));
  return hn::AllTrue(
      d, hn::Or(hn::And(hn::Gt(to_mid_c, threshold), hn::Gt(to_mid_s, threshold)), exact));
}

bool AnchorInSimd() { return HWY_NATIVE_FMA != 0; }

std::int64_t CosSinAnchorRow(const CosSinAnchor& a) {
  std::int64_t flagged = 0;
#if HWY_NATIVE_FMA
  const hn::ScalableTag<double> d;
  const hn::CappedTag<double, 1> d1;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const auto af = hn::Set(d, a.af);
  const auto threshold = hn::Set(d, DecisionThreshold(a.bound));
  std::int64_t i = 0;
  // Groups of up to 64 vectors, as CosSinStepRow.
  while (i + lanes <= a.n) {
    const std::int64_t begin = i;
    std::uint64_t failed = 0;
    for (unsigned g = 0; g < 64 && i + lanes <= a.n; ++g, i += lanes) {
      const bool ok = AnchorLanes(d, a.position + i, a.w + i, af, threshold, a.c + i, a.s + i,
                                  a.cos_out + i, a.sin_out + i);
      failed |= static_cast<std::uint64_t>(!ok) << g;
    }
    for (; failed != 0; failed &= failed - 1) {
      const std::int64_t at = begin + lanes * static_cast<std::int64_t>(std::countr_zero(failed));
      flagged = FlagLanes(a.c, a.s, a.flagged, a.bound, 0, at, at + lanes, flagged);
    }
  }
  for (; i < a.n; ++i) {
    if (!AnchorLanes(d1, a.position + i, a.w + i, hn::Set(d1, a.af),
                     hn::Set(d1, DecisionThreshold(a.bound)), a.c + i, a.s + i, a.cos_out + i,
                     a.sin_out + i)) {
      a.flagged[flagged++] = i;
    }
  }
#else
  // No fused multiply-add: the reduction's exact products would need Dekker's splitting; these
  // targets (SSE4 and below) leave every pair to exact_sincos.
  for (std::int64_t i = 0; i < a.n; ++i) a.flagged[flagged++] = i;
#endif
  return flagged;
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::detail {

HWY_EXPORT(CosSinStepRow);

std::int64_t cos_sin_step(const CosSinStep& args) {
  return HWY_DYNAMIC_DISPATCH(CosSinStepRow)(args);
}

HWY_EXPORT(CosSinAnchorRow);

std::int64_t cos_sin_anchor(const CosSinAnchor& args) {
  return HWY_DYNAMIC_DISPATCH(CosSinAnchorRow)(args);
}

HWY_EXPORT(AnchorInSimd);

bool cos_sin_anchor_in_simd() { return HWY_DYNAMIC_DISPATCH(AnchorInSimd)(); }

}  // namespace posenc::detail
#endif  // HWY_ONCE
