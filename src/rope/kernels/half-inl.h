// src/rope/kernels/half-inl.h: float32 lanes from and to each storage type (F32Tag, F16Tag, BF16Tag
// in rope/kernels/half.h), for the Highway kernels (internal). Included once per target after
// foreach_target.h, like Highway's own -inl headers. Widening is exact; narrowing rounds to
// nearest even, keeps subnormals, and keeps NaN a (quiet) NaN and infinities infinite: the
// lane-wise forms of half.h's scalar recipes. Any lane count works, one lane included.

// Per-target include guard: re-entered once for each HWY_TARGET_TOGGLE.
#if defined(POSENC_KERNELS_HALF_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_HALF_INL_H_
#undef POSENC_KERNELS_HALF_INL_H_
#else
#define POSENC_KERNELS_HALF_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

#include "rope/kernels/half.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
HWY_INLINE hn::Vec<D> LoadF32(F32Tag, D d, const float* p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE void StoreF32(F32Tag, D d, hn::Vec<D> v, float* p) {
  hn::StoreU(v, d, p);
}

template <class D>
HWY_INLINE hn::Vec<D> LoadF32(BF16Tag, D d, const std::uint16_t* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<std::uint16_t, D> du16;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, p))));
}
template <class D>
HWY_INLINE void StoreF32(BF16Tag, D, hn::Vec<D> v, std::uint16_t* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint16_t, D> du16;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), lsb));
  const auto quiet = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, 0x40u));
  const auto is_nan = hn::RebindMask(du, hn::Not(hn::Eq(v, v)));
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, hn::IfThenElse(is_nan, quiet, rounded))), du16, p);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// F16C: vcvtph2ps widens exactly, vcvtps2ph narrows with an immediate round-to-nearest-even mode.
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(F16Tag, D d, const std::uint16_t* p) {
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}
template <class D>
HWY_INLINE void StoreF32(F16Tag, D, hn::Vec<D> v, std::uint16_t* p) {
  const hn::Rebind<hwy::float16_t, D> dh;
  hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
}
#else
// Integer lane recipes: Highway 1.0's portable f16 demotion truncates on the SSE targets.
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(F16Tag, D d, const std::uint16_t* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint16_t, D> du16;
  const auto wide = hn::PromoteTo(du, hn::LoadU(du16, p));
  // Rebuild the float32 bits; subnormals through an exact multiply.
  const auto sign = hn::ShiftLeft<16>(hn::And(wide, hn::Set(du, 0x8000u)));
  const auto exp = hn::And(hn::ShiftRight<10>(wide), hn::Set(du, 0x1Fu));
  const auto mant = hn::And(wide, hn::Set(du, 0x3FFu));
  const auto normal =
      hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(mant));
  const auto special = hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(mant));
  const auto sub =
      hn::Mul(hn::ConvertTo(d, hn::BitCast(di, mant)), hn::Set(d, 5.9604644775390625e-08f));
  auto mag = hn::IfThenElse(hn::RebindMask(du, hn::Eq(exp, hn::Set(du, 0x1Fu))), special, normal);
  mag = hn::IfThenElse(hn::RebindMask(du, hn::Eq(exp, hn::Zero(du))), hn::BitCast(du, sub), mag);
  return hn::BitCast(d, hn::Or(mag, sign));
}
template <class D>
HWY_INLINE void StoreF32(F16Tag, D d, hn::Vec<D> v, std::uint16_t* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint16_t, D> du16;
  const auto bits = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u));
  const auto a = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
  const auto ai = hn::BitCast(di, a);  // non-negative, so signed compares are safe
  const auto odd = hn::And(hn::ShiftRight<13>(a), hn::Set(du, 1u));
  const auto normal = hn::ShiftRight<13>(hn::Add(hn::Add(a, hn::Set(du, 0xC8000FFFu)), odd));
  const auto magic = hn::Set(d, 0.5f);  // ulp 2^-24 = the float16 subnormal step
  const auto small =
      hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, a), magic)), hn::Set(du, 0x3F000000u));
  const auto special = hn::IfThenElse(hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x7F800000))),
                                      hn::Set(du, 0x7E00u), hn::Set(du, 0x7C00u));
  auto mag = hn::IfThenElse(hn::RebindMask(du, hn::Lt(ai, hn::Set(di, 0x38800000))), small, normal);
  mag = hn::IfThenElse(hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x477FFFFF))), special, mag);
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, hn::Or(mag, sign))), du16, p);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_HALF_INL_H_
