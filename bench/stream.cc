// The streaming roofline kernel (stream.h), compiled once per SIMD target like the RoPE kernels
// and dispatched the same way (a forced target applies to it too). The order of these lines is
// Highway's foreach_target.h, not alphabetical.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stream.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <type_traits>

#include "rope/kernels/avx512_bf16.h"
#include "rope/kernels/half-inl.h"
#include "rope/kernels/rotate-inl.h"
#include "rope/kernels/rotate.h"
#include "stream.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class Tag>
HWY_INLINE void ScaleTyped(Tag tag, typename Tag::Storage* x, std::int64_t count, float scale) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const auto vs = hn::Set(d, scale);
  std::int64_t i = 0;
#if HWY_TARGET == HWY_AVX3
  // The kernels' AVX-512 BF16 rounding where they use it (rope/kernels/avx512_bf16.h).
  if constexpr (std::is_same_v<Tag, detail::BF16Tag>) {
    if (detail::scale_bf16_avx512_bf16(x, count, scale)) return;
  }
#endif
#if HWY_TARGET != HWY_SCALAR
  if constexpr (std::is_same_v<Tag, detail::BF16Tag>) {  // the kernel's even/odd bf16 form
    for (; i + 2 * lanes <= count; i += 2 * lanes) {
      detail::prefetch_ahead(x + i, 2 * lanes);
      hn::Vec<decltype(d)> even, odd;
      detail::HWY_NAMESPACE::LoadBf16EvenOdd(d, x + i, even, odd);
      detail::HWY_NAMESPACE::StoreBf16EvenOddResults(d, hn::Mul(even, vs), hn::Mul(odd, vs), x + i);
    }
  }
#endif
  for (; i + 2 * lanes <= count; i += 2 * lanes) {
    detail::prefetch_ahead(x + i, 2 * lanes);
    const auto y0 = hn::Mul(detail::HWY_NAMESPACE::LoadF32(tag, d, x + i), vs);
    const auto y1 = hn::Mul(detail::HWY_NAMESPACE::LoadF32(tag, d, x + i + lanes), vs);
    detail::HWY_NAMESPACE::StoreResultsF32x2(tag, d, y0, y1, x + i);
  }
  for (; i + lanes <= count; i += lanes) {
    detail::HWY_NAMESPACE::StoreF32(
        tag, d, hn::Mul(detail::HWY_NAMESPACE::LoadF32(tag, d, x + i), vs), x + i);
  }
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) {
    detail::HWY_NAMESPACE::StoreF32(
        tag, d1, hn::Mul(detail::HWY_NAMESPACE::LoadF32(tag, d1, x + i), hn::Set(d1, scale)),
        x + i);
  }
}

void StreamScale(void* data, DType dtype, std::int64_t count, float scale) {
  switch (dtype) {
    case DType::kF32:
      return ScaleTyped(detail::F32Tag(), static_cast<float*>(data), count, scale);
    case DType::kF16:
      return ScaleTyped(detail::F16Tag(), static_cast<std::uint16_t*>(data), count, scale);
    case DType::kBF16:
      return ScaleTyped(detail::BF16Tag(), static_cast<std::uint16_t*>(data), count, scale);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::bench {

HWY_EXPORT(StreamScale);

void stream_scale(void* data, DType dtype, std::int64_t count, float scale) {
  HWY_DYNAMIC_DISPATCH(StreamScale)(data, dtype, count, scale);
}

}  // namespace posenc::bench
#endif  // HWY_ONCE
