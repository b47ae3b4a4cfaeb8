// The RoPE rotation kernel, written once with Google Highway and compiled for every SIMD target
// (foreach_target.h), dispatched at run time to the best one the CPU has.
//
// Per pair the work is 2 loads, 4 multiplies (2 fused), 2 stores: the kernel is bound by memory
// bandwidth, not arithmetic, so it streams each head once and keeps cos/sin rows in L1 (one row
// of n floats serves every head of the token).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/rotate.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstring>

#include "kernels/half.h"
#include "kernels/rotate.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Loads: widen to float32 (exact for f16 and bf16).
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float* p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const std::uint16_t* p, DType dtype) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<std::uint16_t, D> du16;
  const auto wide = hn::PromoteTo(du, hn::LoadU(du16, p));
  if (dtype == DType::kBF16) return hn::BitCast(d, hn::ShiftLeft<16>(wide));
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  // F16C (vcvtph2ps): exact, one instruction.
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
#endif
  // float16: rebuild the float32 bits; subnormals through an exact multiply.
  const auto sign = hn::ShiftLeft<16>(hn::And(wide, hn::Set(du, 0x8000u)));
  const auto exp = hn::And(hn::ShiftRight<10>(wide), hn::Set(du, 0x1Fu));
  const auto mant = hn::And(wide, hn::Set(du, 0x3FFu));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(mant));
  const auto special = hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(mant));
  const hn::RebindToSigned<D> di;
  const auto sub = hn::Mul(hn::ConvertTo(d, hn::BitCast(di, mant)), hn::Set(d, 5.9604644775390625e-08f));
  auto mag = hn::IfThenElse(hn::RebindMask(du, hn::Eq(exp, hn::Set(du, 0x1Fu))), special, normal);
  mag = hn::IfThenElse(hn::RebindMask(du, hn::Eq(exp, hn::Zero(du))), hn::BitCast(du, sub), mag);
  return hn::BitCast(d, hn::Or(mag, sign));
}

// Stores: round to nearest even, lane-wise versions of half.h's recipes.
template <class D>
HWY_INLINE void StoreF32(D d, hn::Vec<D> v, float* p) {
  hn::StoreU(v, d, p);
}
template <class D>
HWY_INLINE void StoreF32(D d, hn::Vec<D> v, std::uint16_t* p, DType dtype) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint16_t, D> du16;
  const auto bits = hn::BitCast(du, v);
  hn::Vec<decltype(du)> out;
  if (dtype == DType::kBF16) {
    const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), lsb));
    const auto quiet = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, 0x40u));
    const auto is_nan = hn::RebindMask(du, hn::Not(hn::Eq(v, v)));
    out = hn::IfThenElse(is_nan, quiet, rounded);
  } else {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    // F16C (vcvtps2ph with an immediate round-to-nearest-even mode). Highway's portable
    // demotion truncates on the SSE targets, so those keep the bit recipe below.
    const hn::Rebind<hwy::float16_t, D> dh;
    hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
    return;
#endif
    const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u));
    const auto a = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
    const auto ai = hn::BitCast(di, a);  // non-negative, so signed compares are safe
    const auto odd = hn::And(hn::ShiftRight<13>(a), hn::Set(du, 1u));
    const auto normal = hn::ShiftRight<13>(hn::Add(hn::Add(a, hn::Set(du, 0xC8000FFFu)), odd));
    const auto magic = hn::Set(d, 0.5f);  // ulp 2^-24 = the float16 subnormal step
    const auto small = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, a), magic)), hn::Set(du, 0x3F000000u));
    const auto special = hn::IfThenElse(hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x7F800000))),
                                        hn::Set(du, 0x7E00u), hn::Set(du, 0x7C00u));
    auto mag = hn::IfThenElse(hn::RebindMask(du, hn::Lt(ai, hn::Set(di, 0x38800000))), small, normal);
    mag = hn::IfThenElse(hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x477FFFFF))), special, mag);
    out = hn::Or(mag, sign);
  }
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, out)), du16, p);
}

// Scalar helpers for the tails, with the same fused operations as the vector body.
HWY_INLINE float LoadScalar(const float* p, DType) { return *p; }
HWY_INLINE float LoadScalar(const std::uint16_t* p, DType dtype) {
  return dtype == DType::kBF16 ? f32_from_bf16(*p) : f32_from_f16(*p);
}
HWY_INLINE void StoreScalar(float v, float* p, DType) { *p = v; }
HWY_INLINE void StoreScalar(float v, std::uint16_t* p, DType dtype) {
  *p = dtype == DType::kBF16 ? bf16_from_f32(v) : f16_from_f32(v);
}

template <class D, typename T>
HWY_INLINE hn::Vec<D> Load(D d, const T* p, DType dtype) {
  if constexpr (std::is_same_v<T, float>) {
    (void)dtype;
    return LoadF32(d, p);
  } else {
    return LoadF32(d, p, dtype);
  }
}
template <class D, typename T>
HWY_INLINE void Store(D d, hn::Vec<D> v, T* p, DType dtype) {
  if constexpr (std::is_same_v<T, float>) {
    (void)dtype;
    StoreF32(d, v, p);
  } else {
    StoreF32(d, v, p, dtype);
  }
}

// Half-split: a = x[i], b = x[i + n]; y_a = a c - b s, y_b = b c + a s.
template <typename T>
HWY_INLINE void RotateHalfSplit(const T* in, T* out, std::int64_t n, const float* c, const float* s,
                                DType dtype) {
  const hn::ScalableTag<float> d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto a = Load(d, in + i, dtype);
    const auto b = Load(d, in + n + i, dtype);
    const auto vc = hn::LoadU(d, c + i);
    const auto vs = hn::LoadU(d, s + i);
    Store(d, hn::MulSub(a, vc, hn::Mul(b, vs)), out + i, dtype);
    Store(d, hn::MulAdd(b, vc, hn::Mul(a, vs)), out + n + i, dtype);
  }
  for (; i < n; ++i) {
    const float a = LoadScalar(in + i, dtype);
    const float b = LoadScalar(in + n + i, dtype);
    StoreScalar(std::fma(a, c[i], -(b * s[i])), out + i, dtype);
    StoreScalar(std::fma(b, c[i], a * s[i]), out + n + i, dtype);
  }
}

// Interleaved: y = x c2 + swap_pairs(x) s2 over 2n lanes (c2, s2 expanded by the caller).
template <typename T>
HWY_INLINE void RotateInterleaved(const T* in, T* out, std::int64_t n, const float* c2,
                                  const float* s2, DType dtype) {
  const hn::ScalableTag<float> d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t dims = 2 * n;
  std::int64_t j = 0;
#if HWY_TARGET != HWY_SCALAR  // one lane: no pair to swap, the scalar loop below does it all
  for (; j + lanes <= dims; j += lanes) {
    const auto x = Load(d, in + j, dtype);
    const auto swapped = hn::Shuffle2301(x);
    Store(d, hn::MulAdd(x, hn::LoadU(d, c2 + j), hn::Mul(swapped, hn::LoadU(d, s2 + j))), out + j, dtype);
  }
#else
  (void)lanes;
#endif
  for (; j < dims; j += 2) {
    const float a = LoadScalar(in + j, dtype);
    const float b = LoadScalar(in + j + 1, dtype);
    StoreScalar(std::fma(a, c2[j], b * s2[j]), out + j, dtype);
    StoreScalar(std::fma(b, c2[j + 1], a * s2[j + 1]), out + j + 1, dtype);
  }
}

template <typename T>
HWY_INLINE void RotateTyped(const TokenHeads& t) {
  const T* in = static_cast<const T*>(t.in);
  T* out = static_cast<T*>(t.out);
  const std::int64_t rotated = 2 * t.pairs;
  for (std::int64_t h = 0; h < t.heads; ++h) {
    const T* hin = in + h * t.head_stride;
    T* hout = out + h * t.head_stride;
    if (t.copy_rest) {
      std::memcpy(hout, hin, static_cast<std::size_t>(t.offset) * sizeof(T));
      std::memcpy(hout + t.offset + rotated, hin + t.offset + rotated,
                  static_cast<std::size_t>(t.head_dim - t.offset - rotated) * sizeof(T));
    }
    if (t.layout == Layout::kHalfSplit) {
      RotateHalfSplit(hin + t.offset, hout + t.offset, t.pairs, t.c, t.s, t.dtype);
    } else {
      RotateInterleaved(hin + t.offset, hout + t.offset, t.pairs, t.c, t.s, t.dtype);
    }
  }
}

void RotateTokenHeads(const TokenHeads& t) {
  if (t.dtype == DType::kF32) {
    RotateTyped<float>(t);
  } else {
    RotateTyped<std::uint16_t>(t);
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::detail {

HWY_EXPORT(RotateTokenHeads);
HWY_EXPORT(TargetName);

void rotate_token_heads(const TokenHeads& args) { HWY_DYNAMIC_DISPATCH(RotateTokenHeads)(args); }

const char* active_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace posenc::detail
#endif  // HWY_ONCE
