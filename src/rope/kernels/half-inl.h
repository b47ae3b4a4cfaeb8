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
// bf16 rounding, lane-wise half.h's bf16_from_f32: the result is in the top 16 bits of each u32
// lane (the low 16 are junk). Finite and infinite lanes: bits + 0x7FFF + lsb (round to nearest
// even; a carry out of the mantissa bumps the exponent, which is the correctly rounded result,
// max finite rounding up to infinity included). NaN lanes: the quiet bit set and the payload
// truncated, never rounded (rounding could carry a NaN into infinity or across the sign).
// 6 vector ops: shift, and, 2 adds, or, unordered compare, blend (IsNaN: one vcmpunordps).
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> Bf16HighBits(D, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), lsb);
  const auto quiet = hn::Or(bits, hn::Set(du, 0x400000u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet, rounded);
}

// The same bits for a v computed by an arithmetic operation (the rotation's FMAs, the stream's
// multiply), which is never a signaling NaN (IEEE 754 6.2: operations deliver quiet NaNs). A
// quiet NaN's reference result, (bits >> 16) | 0x40, is its top half as it is, so it only must
// not round: the increment is masked off (and-not) instead of blending in a quieted copy.
// 5 vector ops: shift, and, add, unordered compare, and-not, add.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> Bf16HighBitsOfResult(D, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const auto bits = hn::BitCast(du, v);
  const auto inc =
      hn::Add(hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u)), hn::Set(du, 0x7FFFu));
  return hn::Add(bits, hn::AndNot(hn::BitCast(du, hn::VecFromMask(D(), hn::IsNaN(v))), inc));
}

template <class D>
HWY_INLINE void StoreF32(BF16Tag, D d, hn::Vec<D> v, std::uint16_t* p) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint16_t, D> du16;
  const auto high = hn::ShiftRight<16>(Bf16HighBits(d, v));
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, high)), du16, p);
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

// Two vectors to 2 * Lanes(d) consecutive elements: the same bits as two StoreF32 calls. For
// bf16 the two vectors' top halves are packed by one ConcatOdd (AVX2: two shifts, a pack and one
// cross-lane permute for 16 lanes) instead of two DemoteTo (a pack and a permute each).
template <class Tag, class D>
HWY_INLINE void StoreF32x2(Tag tag, D d, hn::Vec<D> v0, hn::Vec<D> v1, typename Tag::Storage* p) {
  StoreF32(tag, d, v0, p);
  StoreF32(tag, d, v1, p + hn::Lanes(d));
}
// StoreF32x2 for v0, v1 computed by arithmetic (never signaling NaNs): the same bits, cheaper.
template <class Tag, class D>
HWY_INLINE void StoreResultsF32x2(Tag tag, D d, hn::Vec<D> v0, hn::Vec<D> v1,
                                  typename Tag::Storage* p) {
  StoreF32x2(tag, d, v0, v1, p);
}
#if HWY_TARGET != HWY_SCALAR
template <class D>
HWY_INLINE void StoreF32x2(BF16Tag, D d, hn::Vec<D> v0, hn::Vec<D> v1, std::uint16_t* p) {
  const hn::Repartition<std::uint16_t, D> du16;  // 2 * Lanes(d) lanes
  const auto packed = hn::ConcatOdd(du16, hn::BitCast(du16, Bf16HighBits(d, v1)),
                                    hn::BitCast(du16, Bf16HighBits(d, v0)));
  hn::StoreU(packed, du16, p);
}
template <class D>
HWY_INLINE void StoreResultsF32x2(BF16Tag, D d, hn::Vec<D> v0, hn::Vec<D> v1, std::uint16_t* p) {
  const hn::Repartition<std::uint16_t, D> du16;
  const auto packed = hn::ConcatOdd(du16, hn::BitCast(du16, Bf16HighBitsOfResult(d, v1)),
                                    hn::BitCast(du16, Bf16HighBitsOfResult(d, v0)));
  hn::StoreU(packed, du16, p);
}

// bf16 in even/odd form: 2 * Lanes(d) consecutive bf16 loaded as one vector give two float
// vectors, the even elements (the low halves shifted up) and the odd ones (the high halves, in
// place), with no widening shuffle; a result pair goes back by one shift and one blend of the
// rounded top halves, with no pack and no cross-lane permute. The lanes hold elements 0, 2, 4, ...
// and 1, 3, 5, ...: callers pair them with rows in the same order. Same bits as LoadF32/StoreF32.
template <class D>
HWY_INLINE void LoadBf16EvenOdd(D d, const std::uint16_t* p, hn::Vec<D>& even, hn::Vec<D>& odd) {
  const hn::RebindToUnsigned<D> du;
  const hn::Repartition<std::uint16_t, D> du16;
  const auto x = hn::BitCast(du, hn::LoadU(du16, p));
  even = hn::BitCast(d, hn::ShiftLeft<16>(x));
  odd = hn::BitCast(d, hn::And(x, hn::Set(du, 0xFFFF0000u)));
}
// even, odd computed by arithmetic (never signaling NaNs: Bf16HighBitsOfResult).
template <class D>
HWY_INLINE void StoreBf16EvenOddResults(D d, hn::Vec<D> even, hn::Vec<D> odd, std::uint16_t* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Repartition<std::uint16_t, D> du16;
  const auto high = hn::MaskFromVec(hn::BitCast(du16, hn::Set(du, 0xFFFF0000u)));
  const auto lo = hn::BitCast(du16, hn::ShiftRight<16>(Bf16HighBitsOfResult(d, even)));
  const auto hi = hn::BitCast(du16, Bf16HighBitsOfResult(d, odd));
  hn::StoreU(hn::IfThenElse(high, hi, lo), du16, p);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_HALF_INL_H_
