// The streaming roofline kernel (stream.h), compiled once per SIMD target like the RoPE kernels
// and dispatched the same way (a forced target applies to it too). The order of these lines is
// Highway's foreach_target.h, not alphabetical.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stream.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>
#include <type_traits>

#include "rope/kernels/avx512_bf16.h"
#include "rope/kernels/half-inl.h"
#include "rope/kernels/kv_cache-inl.h"
#include "rope/kernels/rotate-inl.h"
#include "rope/kernels/rotate.h"
#include "stream.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class Tag>
HWY_INLINE void ScaleTyped(Tag tag, typename Tag::Storage* x, std::int64_t count, float scale,
                           bool prefetch) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const auto vs = hn::Set(d, scale);
  std::int64_t i = 0;
#if HWY_TARGET == HWY_AVX3
  // The kernels' AVX-512 BF16 rounding where they use it (rope/kernels/avx512_bf16.h).
  if constexpr (std::is_same_v<Tag, detail::BF16Tag>) {
    if (detail::scale_bf16_avx512_bf16(x, count, scale, prefetch)) return;
  }
#endif
#if HWY_TARGET != HWY_SCALAR
  if constexpr (std::is_same_v<Tag, detail::BF16Tag>) {  // the kernel's even/odd bf16 form
    for (; i + 2 * lanes <= count; i += 2 * lanes) {
      if (prefetch) detail::prefetch_ahead(x + i, 2 * lanes);
      hn::Vec<decltype(d)> even, odd;
      detail::HWY_NAMESPACE::LoadBf16EvenOdd(d, x + i, even, odd);
      detail::HWY_NAMESPACE::StoreBf16EvenOddResults(d, hn::Mul(even, vs), hn::Mul(odd, vs), x + i);
    }
  }
#endif
  for (; i + 2 * lanes <= count; i += 2 * lanes) {
    if (prefetch) detail::prefetch_ahead(x + i, 2 * lanes);
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

void StreamScale(void* data, DType dtype, std::int64_t count, float scale, bool prefetch) {
  switch (dtype) {
    case DType::kF32:
      return ScaleTyped(detail::F32Tag(), static_cast<float*>(data), count, scale, prefetch);
    case DType::kF16:
      return ScaleTyped(detail::F16Tag(), static_cast<std::uint16_t*>(data), count, scale,
                        prefetch);
    case DType::kBF16:
      return ScaleTyped(detail::BF16Tag(), static_cast<std::uint16_t*>(data), count, scale,
                        prefetch);
  }
}

// bytes from src to dst as the fused kernel streams a row of v (kv_cache-inl.h: prefetch_ahead,
// then StreamBytes, streaming stores on dst's whole aligned vectors, plain copies for the ends).
void StreamCopy(const void* src, void* dst, std::size_t bytes, bool prefetch) {
  if (prefetch) {
    detail::prefetch_ahead(static_cast<const std::uint8_t*>(src), static_cast<std::int64_t>(bytes));
  }
  detail::HWY_NAMESPACE::StreamBytes(src, dst, bytes);
}

// count two-byte elements to their high bytes at dst: streaming stores of whole vectors where dst
// is aligned (the rows of the benchmarks' caches are), plain ones otherwise.
void NarrowCopy(const void* src, void* dst, std::size_t count, [[maybe_unused]] bool streaming,
                [[maybe_unused]] bool prefetch) {
  const auto* in = static_cast<const std::uint16_t*>(src);
  auto* out = static_cast<std::uint8_t*>(dst);
  std::size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<std::int16_t> d16;
  const hn::Rebind<std::uint8_t, decltype(d16)> d8;
  const std::size_t lanes = hn::Lanes(d16);
  // The narrowed vector is half a register: streamed where that is at least 16 bytes (AVX2 and
  // up; SSE4's 8-byte half would need an 8-byte streaming store) and dst is aligned to it.
  const bool aligned = lanes >= 16 && reinterpret_cast<std::uintptr_t>(out) % lanes == 0;
  for (; i + lanes <= count; i += lanes) {
    if (prefetch) detail::prefetch_ahead(in + i, static_cast<std::int64_t>(lanes));
    const auto x = hn::LoadU(d16, reinterpret_cast<const std::int16_t*>(in + i));
    const auto high = hn::DemoteTo(d8, hn::ShiftRight<8>(hn::And(x, hn::Set(d16, 0x7F00))));
    if (streaming && aligned) {
      hn::Stream(high, d8, out + i);
    } else {
      hn::StoreU(high, d8, out + i);
    }
  }
#endif
  for (; i < count; ++i) out[i] = static_cast<std::uint8_t>((in[i] >> 8) & 0x7Fu);
}

void StreamAppend(const AppendStream& a) {
  const auto bytes = static_cast<std::size_t>(a.cache_row_bytes);
  for (std::int64_t t = 0; t < a.tokens; ++t) {
    const std::int64_t at = t * a.token_stride_bytes;
    StreamScale(static_cast<char*>(a.q) + at, a.dtype, a.q_elements, -1.0f, a.prefetch);
    const std::int64_t off = a.cache_offsets[t];
    const char* k = static_cast<const char*>(a.k) + at;
    const char* v = static_cast<const char*>(a.v) + at;
    char* kc = static_cast<char*>(a.key_cache) + off;
    char* vc = static_cast<char*>(a.value_cache) + off;
    if (a.narrow) {
      NarrowCopy(k, kc, bytes, a.streaming, a.prefetch);
      NarrowCopy(v, vc, bytes, a.streaming, a.prefetch);
    } else if (a.streaming) {
      StreamCopy(k, kc, bytes, a.prefetch);
      StreamCopy(v, vc, bytes, a.prefetch);
    } else {
      std::memcpy(kc, k, bytes);
      std::memcpy(vc, v, bytes);
    }
  }
  if (a.streaming) hwy::FlushStream();
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::bench {

HWY_EXPORT(StreamScale);
HWY_EXPORT(StreamAppend);

void stream_scale(void* data, DType dtype, std::int64_t count, float scale, bool prefetch) {
  HWY_DYNAMIC_DISPATCH(StreamScale)(data, dtype, count, scale, prefetch);
}

void stream_append(const AppendStream& args) { HWY_DYNAMIC_DISPATCH(StreamAppend)(args); }

}  // namespace posenc::bench
#endif  // HWY_ONCE
