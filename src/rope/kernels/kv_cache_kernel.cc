// The fused RoPE + KV-cache kernel (kv_cache_kernel.h), compiled once per SIMD target like
// rotate.cc. A rotated k element is rounded to k's dtype first and then converted to the cache
// dtype, so the cache holds exactly what apply_rope followed by a conversion would give; the
// rotation itself is rotate-inl.h's, the loops mirror rotate.cc's (full vectors, then one-lane
// tails), so every lane gets the same operations as in apply_rope.
// foreach_target.h re-includes this file once per target: the order of these lines is Highway's.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rope/kernels/kv_cache_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>
#include <type_traits>

#include "rope/kernels/half-inl.h"
#include "rope/kernels/kv_cache_kernel.h"
#include "rope/kernels/rotate-inl.h"
// clang-format on

#ifndef POSENC_KV_CACHE_FP8_TAG_
#define POSENC_KV_CACHE_FP8_TAG_
namespace posenc::detail {
struct Fp8Tag {
  using Storage = std::uint8_t;  // OCP E4M3 (torch float8_e4m3fn) bits
};
}  // namespace posenc::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// float32 -> E4M3: saturate |x| to 448 (infinities too), keep NaN (0x7F), round to nearest even:
// below 2^-6 by adding 2^14 (its float32 ulp is 2^-9, the E4M3 subnormal step) and letting the FPU
// round; above by torch's fp8e4m3fn_from_fp32_value (re-bias by (7 - 127) << 23, round on the
// 20 dropped bits).
template <class D>
HWY_INLINE void StoreFp8(D d, hn::Vec<D> v, std::uint8_t* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint8_t, D> du8;
  const auto bits = hn::BitCast(du, v);
  const auto sign = hn::ShiftRight<24>(hn::And(bits, hn::Set(du, 0x80000000u)));
  const auto abs_bits = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
  const auto ai = hn::BitCast(di, abs_bits);  // non-negative: signed compares are safe
  const auto is_nan = hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x7F800000)));
  const auto max_bits = hn::Set(du, 0x43E00000u);  // 448.0f
  const auto a =
      hn::IfThenElse(hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x43E00000))), max_bits, abs_bits);
  const auto small = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, a), hn::Set(d, 16384.0f))),
                             hn::Set(du, 141u << 23));
  const auto odd = hn::And(hn::ShiftRight<20>(a), hn::Set(du, 1u));
  const auto normal = hn::ShiftRight<20>(hn::Add(hn::Add(a, hn::Set(du, 0xC407FFFFu)), odd));
  auto mag = hn::IfThenElse(hn::RebindMask(du, hn::Lt(hn::BitCast(di, a), hn::Set(di, 121 << 23))),
                            small, normal);
  mag = hn::IfThenElse(is_nan, hn::Set(du, 0x7Fu), mag);
  hn::StoreU(hn::DemoteTo(du8, hn::BitCast(di, hn::Or(mag, sign))), du8, p);
}

template <class Tag, class D>
HWY_INLINE void StoreCache(Tag tag, D d, hn::Vec<D> v, typename Tag::Storage* p, float) {
  StoreF32(tag, d, v, p);
}
template <class D>
HWY_INLINE void StoreCache(Fp8Tag, D d, hn::Vec<D> v, std::uint8_t* p, float scale) {
  StoreFp8(d, hn::Div(v, hn::Set(d, scale)), p);
}

// y rounded to the storage of `tag` and widened back (exact): what apply_rope would have stored.
template <class Tag, class D>
HWY_INLINE hn::Vec<D> RoundTo(Tag tag, D d, hn::Vec<D> y) {
  if constexpr (std::is_same_v<Tag, F32Tag>) {
    return y;
  } else {
    alignas(64) typename Tag::Storage tmp[64];  // >= the lanes of any target's float vector
    StoreF32(tag, d, y, tmp);
    return LoadF32(tag, d, tmp);
  }
}

// bf16 in registers: half.h's rounding (+0x7FFF + lsb, NaNs quieted) kept in the top 16 bits.
template <class D>
HWY_INLINE hn::Vec<D> RoundTo(BF16Tag, D d, hn::Vec<D> y) {
  const hn::RebindToUnsigned<D> du;
  const auto bits = hn::BitCast(du, y);
  const auto high = hn::Set(du, 0xFFFF0000u);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::And(hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), lsb), high);
  const auto quiet = hn::And(hn::Or(bits, hn::Set(du, 0x400000u)), high);
  const auto is_nan = hn::RebindMask(du, hn::Not(hn::Eq(y, y)));
  return hn::BitCast(d, hn::IfThenElse(is_nan, quiet, rounded));
}

// One rotated k vector of dims [j, j + lanes) of the rotated range.
template <class KTag, class CTag, class D>
HWY_INLINE void EmitK(KTag ktag, CTag ctag, D d, hn::Vec<D> y, typename KTag::Storage* back,
                      typename CTag::Storage* cache, float scale) {
  if (back) StoreF32(ktag, d, y, back);
  if constexpr (std::is_same_v<KTag, CTag>) {
    StoreF32(ktag, d, y, cache);
  } else {
    StoreCache(ctag, d, RoundTo(ktag, d, y), cache, scale);
  }
}

// Dims [0, count) converted from `in` to the cache, unchanged in value (apart from fp8's scale).
template <class InTag, class CTag>
HWY_INLINE void ConvertCopy(InTag itag, CTag ctag, const typename InTag::Storage* in,
                            typename CTag::Storage* out, std::int64_t count, float scale) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + lanes <= count; i += lanes)
    StoreCache(ctag, d, LoadF32(itag, d, in + i), out + i, scale);
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) StoreCache(ctag, d1, LoadF32(itag, d1, in + i), out + i, scale);
}

template <class KTag, class CTag>
HWY_INLINE void RotateKHead(KTag ktag, CTag ctag, const typename KTag::Storage* in,
                            typename KTag::Storage* back, typename CTag::Storage* out,
                            const TokenKv& t) {
  const std::int64_t n = t.pairs;
  const float scale = t.k_scale;
  auto at = [&](std::int64_t j) { return back ? back + j : nullptr; };
  if (t.layout == Layout::kHalfSplit) {
    const hn::ScalableTag<float> d;
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
    std::int64_t i = 0;
    auto body = [&](auto dd, std::int64_t i0) {
      hn::Vec<decltype(dd)> ya, yb;
      HalfSplitMath(dd, LoadF32(ktag, dd, in + i0), LoadF32(ktag, dd, in + i0 + n),
                    hn::LoadU(dd, t.c + i0), hn::LoadU(dd, t.s + i0), ya, yb);
      EmitK(ktag, ctag, dd, ya, at(i0), out + i0, scale);
      EmitK(ktag, ctag, dd, yb, at(i0 + n), out + i0 + n, scale);
    };
    for (; i + lanes <= n; i += lanes) body(d, i);
    const hn::CappedTag<float, 1> d1;
    for (; i < n; ++i) body(d1, i);
    return;
  }
  const std::int64_t dims = 2 * n;
  std::int64_t j = 0;
#if HWY_TARGET != HWY_SCALAR  // as rotate.cc: one lane holds no pair to swap
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (; j + lanes <= dims; j += lanes) {
    const auto x = LoadF32(ktag, d, in + j);
    EmitK(ktag, ctag, d,
          InterleavedMath(d, x, hn::Shuffle2301(x), hn::LoadU(d, t.c + j), hn::LoadU(d, t.s + j)),
          at(j), out + j, scale);
  }
#endif
  const hn::CappedTag<float, 1> d1;
  for (; j < dims; j += 2) {
    const auto a = LoadF32(ktag, d1, in + j);
    const auto b = LoadF32(ktag, d1, in + j + 1);
    const auto ya = InterleavedMath(d1, a, b, hn::LoadU(d1, t.c + j), hn::LoadU(d1, t.s + j));
    const auto yb =
        InterleavedMath(d1, b, a, hn::LoadU(d1, t.c + j + 1), hn::LoadU(d1, t.s + j + 1));
    EmitK(ktag, ctag, d1, ya, at(j), out + j, scale);
    EmitK(ktag, ctag, d1, yb, at(j + 1), out + j + 1, scale);
  }
}

template <class KTag, class CTag>
HWY_INLINE void AppendK(KTag ktag, CTag ctag, const TokenKv& t) {
  using K = typename KTag::Storage;
  using C = typename CTag::Storage;
  const K* in = static_cast<const K*>(t.k);
  K* back = static_cast<K*>(t.k_back);
  C* out = static_cast<C*>(t.k_cache);
  const std::int64_t rotated = 2 * t.pairs;
  for (std::int64_t h = 0; h < t.heads; ++h) {
    const K* hin = in + h * t.k_head_stride;
    C* hout = out + h * t.cache_head_stride;
    if (rotated == 0) {
      ConvertCopy(ktag, ctag, hin, hout, t.head_dim, t.k_scale);
      continue;
    }
    ConvertCopy(ktag, ctag, hin, hout, t.offset, t.k_scale);
    const std::int64_t end = t.offset + rotated;
    ConvertCopy(ktag, ctag, hin + end, hout + end, t.head_dim - end, t.k_scale);
    RotateKHead(ktag, ctag, hin + t.offset, back ? back + h * t.k_head_stride + t.offset : nullptr,
                hout + t.offset, t);
  }
}

template <class VTag, class CTag>
HWY_INLINE void AppendV(VTag vtag, CTag ctag, const TokenKv& t) {
  const auto* in = static_cast<const typename VTag::Storage*>(t.v);
  auto* out = static_cast<typename CTag::Storage*>(t.v_cache);
  for (std::int64_t h = 0; h < t.heads; ++h) {
    ConvertCopy(vtag, ctag, in + h * t.v_head_stride, out + h * t.cache_head_stride, t.head_dim,
                t.v_scale);
  }
}

// The branches on the runtime dtypes: each (input, cache) pair is compiled once.
template <class CTag>
HWY_INLINE void AppendTyped(CTag ctag, const TokenKv& t) {
  switch (t.k_dtype) {
    case DType::kF32:
      AppendK(F32Tag(), ctag, t);
      break;
    case DType::kF16:
      AppendK(F16Tag(), ctag, t);
      break;
    case DType::kBF16:
      AppendK(BF16Tag(), ctag, t);
      break;
  }
  switch (t.v_dtype) {
    case DType::kF32:
      return AppendV(F32Tag(), ctag, t);
    case DType::kF16:
      return AppendV(F16Tag(), ctag, t);
    case DType::kBF16:
      return AppendV(BF16Tag(), ctag, t);
  }
}

void AppendTokenKv(const TokenKv& t) {
  switch (t.cache_dtype) {
    case CacheDType::kF32:
      return AppendTyped(F32Tag(), t);
    case CacheDType::kF16:
      return AppendTyped(F16Tag(), t);
    case CacheDType::kBF16:
      return AppendTyped(BF16Tag(), t);
    case CacheDType::kFp8E4M3:
      return AppendTyped(Fp8Tag(), t);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::detail {

HWY_EXPORT(AppendTokenKv);

void append_token_kv(const TokenKv& args) { HWY_DYNAMIC_DISPATCH(AppendTokenKv)(args); }

}  // namespace posenc::detail
#endif  // HWY_ONCE
