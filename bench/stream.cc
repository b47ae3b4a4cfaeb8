// The streaming roofline kernel (stream.h), compiled once per SIMD target like the RoPE kernels
// and dispatched the same way (a forced target applies to it too). The order of these lines is
// Highway's foreach_target.h, not alphabetical.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stream.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "rope/kernels/half-inl.h"
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
