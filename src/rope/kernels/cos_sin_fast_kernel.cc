// The on-the-fly cos/sin step (cos_sin_fast_kernel.h), written once with Highway and compiled for
// every SIMD target. Four double lanes per AVX2 vector; where the target has no FMA the two
// products are rounded separately, which the bound in rope/cos_sin_fast.cc allows for.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rope/kernels/cos_sin_fast_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "rope/kernels/cos_sin_fast_kernel.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Pairs [i, i + Lanes(d)): returns true when every entry's interval rounds to one float32.
// Rounding to nearest is monotonic, so fl32(v - e) == fl32(v + e) means every double within e of
// v, the exact path's among them, rounds to fl32(v).
template <class D>
HWY_INLINE bool StepLanes(D d, const CosSinStep& a, std::int64_t i, hn::Vec<D> scale,
                          hn::Vec<D> bound) {
  const hn::Rebind<float, D> df;
  const auto c = hn::LoadU(d, a.c + i);
  const auto s = hn::LoadU(d, a.s + i);
  const auto uc = hn::LoadU(d, a.uc + i);
  const auto us = hn::LoadU(d, a.us + i);
  const auto c2 = hn::MulSub(c, uc, hn::Mul(s, us));
  const auto s2 = hn::MulAdd(s, uc, hn::Mul(c, us));
  hn::StoreU(c2, d, a.c + i);
  hn::StoreU(s2, d, a.s + i);
  const auto vc = hn::Mul(c2, scale);
  const auto vs = hn::Mul(s2, scale);
  hn::StoreU(hn::DemoteTo(df, vc), df, a.cos_out + i);
  hn::StoreU(hn::DemoteTo(df, vs), df, a.sin_out + i);
  const auto ok_c =
      hn::Eq(hn::DemoteTo(df, hn::Sub(vc, bound)), hn::DemoteTo(df, hn::Add(vc, bound)));
  const auto ok_s =
      hn::Eq(hn::DemoteTo(df, hn::Sub(vs, bound)), hn::DemoteTo(df, hn::Add(vs, bound)));
  return hn::AllTrue(df, hn::And(ok_c, ok_s));
}

// The same check per entry, from the stepped doubles, for a group that failed as a whole.
HWY_NOINLINE std::int64_t FlagLanes(const CosSinStep& a, std::int64_t begin, std::int64_t end,
                                    std::int64_t flagged) {
  const hn::CappedTag<double, 1> d1;
  const hn::Rebind<float, decltype(d1)> f1;
  const auto scale = hn::Set(d1, a.scale), bound = hn::Set(d1, a.bound);
  for (std::int64_t i = begin; i < end; ++i) {
    bool ok = true;
    for (const double* row : {a.c, a.s}) {
      const auto v = hn::Mul(hn::LoadU(d1, row + i), scale);
      ok = ok && hn::AllTrue(f1, hn::Eq(hn::DemoteTo(f1, hn::Sub(v, bound)),
                                        hn::DemoteTo(f1, hn::Add(v, bound))));
    }
    if (!ok) a.flagged[flagged++] = i;
  }
  return flagged;
}

std::int64_t CosSinStepRow(const CosSinStep& a) {
  const hn::ScalableTag<double> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const auto scale = hn::Set(d, a.scale), bound = hn::Set(d, a.bound);
  std::int64_t flagged = 0, i = 0;
  for (; i + lanes <= a.n; i += lanes) {
    if (!StepLanes(d, a, i, scale, bound)) flagged = FlagLanes(a, i, i + lanes, flagged);
  }
  const hn::CappedTag<double, 1> d1;
  const auto scale1 = hn::Set(d1, a.scale), bound1 = hn::Set(d1, a.bound);
  for (; i < a.n; ++i) {
    if (!StepLanes(d1, a, i, scale1, bound1)) a.flagged[flagged++] = i;
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
