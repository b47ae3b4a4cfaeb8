// The on-the-fly cos/sin step (cos_sin_fast_kernel.h), written once with Highway and compiled for
// every SIMD target. Four double lanes per AVX2 vector; where the target has no FMA the two
// products are rounded separately, which the bound in rope/cos_sin_fast.cc allows for.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rope/kernels/cos_sin_fast_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <bit>
#include <cstdint>

#include "rope/kernels/cos_sin_fast_kernel.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Pairs [i, i + Lanes(d)): returns true when every entry's interval rounds to one float32.
// Rounding to nearest is monotonic, so fl32(v - e) == fl32(v + e) means every double within e of
// v, the exact path's among them, rounds to fl32(v - e), the float written (where the check fails
// the caller overwrites it).
template <class D>
HWY_INLINE bool StepLanes(D d, double* HWY_RESTRICT pc, double* HWY_RESTRICT ps,
                          const double* HWY_RESTRICT uc, const double* HWY_RESTRICT us,
                          float* HWY_RESTRICT oc, float* HWY_RESTRICT os, hn::Vec<D> bound) {
  const hn::Rebind<float, D> df;
  const auto c = hn::LoadU(d, pc);
  const auto s = hn::LoadU(d, ps);
  const auto vuc = hn::LoadU(d, uc);
  const auto vus = hn::LoadU(d, us);
  const auto c2 = hn::MulSub(c, vuc, hn::Mul(s, vus));
  const auto s2 = hn::MulAdd(s, vuc, hn::Mul(c, vus));
  hn::StoreU(c2, d, pc);
  hn::StoreU(s2, d, ps);
  const auto lo_c = hn::DemoteTo(df, hn::Sub(c2, bound));
  const auto lo_s = hn::DemoteTo(df, hn::Sub(s2, bound));
  hn::StoreU(lo_c, df, oc);
  hn::StoreU(lo_s, df, os);
  const auto ok_c = hn::Eq(lo_c, hn::DemoteTo(df, hn::Add(c2, bound)));
  const auto ok_s = hn::Eq(lo_s, hn::DemoteTo(df, hn::Add(s2, bound)));
  return hn::AllTrue(df, hn::And(ok_c, ok_s));
}

// The same check per entry, from the stepped doubles, for a group that failed as a whole; entries
// listed as first + i.
HWY_NOINLINE std::int64_t FlagLanes(const CosSinStep& a, double row_bound, std::int64_t first,
                                    std::int64_t begin, std::int64_t end, std::int64_t flagged) {
  const hn::CappedTag<double, 1> d1;
  const hn::Rebind<float, decltype(d1)> f1;
  const auto bound = hn::Set(d1, row_bound);
  for (std::int64_t i = begin; i < end; ++i) {
    bool ok = true;
    for (const double* row : {a.c, a.s}) {
      const auto v = hn::LoadU(d1, row + i);
      ok = ok && hn::AllTrue(f1, hn::Eq(hn::DemoteTo(f1, hn::Sub(v, bound)),
                                        hn::DemoteTo(f1, hn::Add(v, bound))));
    }
    if (!ok) a.flagged[flagged++] = first + i;
  }
  return flagged;
}

std::int64_t CosSinStepRow(const CosSinStep& a) {
  const hn::ScalableTag<double> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  double* HWY_RESTRICT c = a.c;
  double* HWY_RESTRICT s = a.s;
  const double* HWY_RESTRICT uc = a.uc;
  const double* HWY_RESTRICT us = a.us;
  const std::int64_t n = a.n;
  const hn::CappedTag<double, 1> d1;
  std::int64_t flagged = 0;
  // Rows in one call: the next row's first vectors overlap this row's last ones in the pipeline
  // (a call per row spent about a quarter of a row's time on the call and the loop's ends).
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const double row_bound = a.bound + static_cast<double>(r) * a.bound_step;
    const auto bound = hn::Set(d, row_bound);
    float* HWY_RESTRICT oc = a.cos_out + r * a.out_stride;
    float* HWY_RESTRICT os = a.sin_out + r * a.out_stride;
    std::int64_t i = 0;
    // Groups of up to 64 vectors without a branch per vector (the check fails for about 2e-3 of
    // the pairs): a bit per vector that failed, then the per-entry check of those, so the vectors
    // of a row overlap in the pipeline. The row is bound by its four double-to-float conversions
    // per vector (about 1.75 cycles each on Zen 5, 1.6 on Sapphire Rapids), not by this loop.
    while (i + lanes <= n) {
      const std::int64_t begin = i;
      std::uint64_t failed = 0;
      for (unsigned g = 0; g < 64 && i + lanes <= n; ++g, i += lanes) {
        const bool ok = StepLanes(d, c + i, s + i, uc + i, us + i, oc + i, os + i, bound);
        failed |= static_cast<std::uint64_t>(!ok) << g;
      }
      for (; failed != 0; failed &= failed - 1) {
        const std::int64_t at = begin + lanes * static_cast<std::int64_t>(std::countr_zero(failed));
        flagged = FlagLanes(a, row_bound, r * n, at, at + lanes, flagged);
      }
    }
    const auto bound1 = hn::Set(d1, row_bound);
    for (; i < n; ++i) {
      if (!StepLanes(d1, c + i, s + i, uc + i, us + i, oc + i, os + i, bound1))
        a.flagged[flagged++] = r * n + i;
    }
  }
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

}  // namespace posenc::detail
#endif  // HWY_ONCE
