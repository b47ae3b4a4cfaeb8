// src/rope/kernels/kv_cache_stream-inl.h: how the fused KV-cache kernel writes a prefill's cache
// rows with streaming (non-temporal) stores (internal; kv_cache_streaming.h says when): whole
// aligned vectors copied out of a staging row, rows of the cache's own dtype or bf16 and f16 into
// fp8 streamed straight from the input, and rotated k streamed straight from the registers.
// Included once per target after foreach_target.h, by kv_cache-inl.h.

// Per-target include guard: re-entered once for each HWY_TARGET_TOGGLE.
#if defined(POSENC_KERNELS_KV_CACHE_STREAM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_KV_CACHE_STREAM_INL_H_
#undef POSENC_KERNELS_KV_CACHE_STREAM_INL_H_
#else
#define POSENC_KERNELS_KV_CACHE_STREAM_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "rope/kernels/fp8-inl.h"
#include "rope/kernels/half-inl.h"
#include "rope/kernels/kv_cache_kernel.h"
#include "rope/kernels/rotate-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// `bytes` from src to dst: the whole vectors of dst's aligned span with non-temporal stores
// (Stream), the unaligned ends with a plain copy. A streaming store writes a whole line without
// reading it first; a plain store to a line not in the cache reads it in (write-allocate), which
// for a prefill's cache rows is a third stream of reads nobody needs.
HWY_INLINE void StreamBytes(const void* src, void* dst, std::size_t bytes) {
  const auto* in = static_cast<const std::uint8_t*>(src);
  auto* out = static_cast<std::uint8_t*>(dst);
  std::size_t i = 0;
#if POSENC_FULL_VECTORS
  const hn::ScalableTag<std::uint8_t> d;
  const std::size_t lanes = hn::Lanes(d);
  const std::size_t head =
      std::min(bytes, (lanes - reinterpret_cast<std::uintptr_t>(out) % lanes) % lanes);
  std::memcpy(out, in, head);
  for (i = head; i + lanes <= bytes; i += lanes) hn::Stream(hn::LoadU(d, in + i), d, out + i);
#endif
  std::memcpy(out + i, in + i, bytes - i);
}

// Where a head's cache row is made: the row itself, or with stream_cache a buffer on the stack
// that Flush streams out to it.
template <class C>
struct CacheRow {
  CacheRow(const TokenKv& t, C* cache_row)
      : row(cache_row),
        staged(t.stream_cache &&
               static_cast<std::size_t>(t.head_dim) * sizeof(C) <= kMaxStagedRowBytes) {}
  C* target() { return staged ? buffer : row; }
  void Flush(std::int64_t count) {
    if (staged) StreamBytes(buffer, row, static_cast<std::size_t>(count) * sizeof(C));
  }
  C* row;
  bool staged;
  alignas(64) C buffer[kMaxStagedRowBytes / sizeof(C)];
};

// A head row into a cache of its own dtype with stream_cache: its bits as they are (ConvertCopy's
// same-dtype case), streamed straight from the input without the staging row. Returns false,
// doing nothing, for other dtypes or without stream_cache.
template <class InTag, class CTag>
HWY_INLINE bool StreamAsIs(const TokenKv& t, const typename InTag::Storage* in,
                           typename CTag::Storage* out) {
  if constexpr (std::is_same_v<InTag, CTag>) {
    if (t.stream_cache) {
      StreamBytes(in, out, static_cast<std::size_t>(t.head_dim) * sizeof(*in));
      return true;
    }
  }
  return false;
}

// bf16 or f16 words of a head into its fp8 cache row with streaming stores straight from the
// registers (StoreBf16AsFp8<true>, StoreF16AsFp8<true>), with stream_cache, the scale's table,
// whole vectors and a row on a 32-byte boundary; false, nothing done, otherwise (the caller stages
// the row). The same bits as ConvertCopy. In one process on Zen 5 (in a loaded hour, about twice
// the quiet times), medians of 21, bf16 against staging: Llama 2 7B prefill 13.2 -> 10.7 ms,
// Llama 3 8B 4.6 -> 3.9 ms.
template <class InTag, class CTag>
HWY_INLINE bool StreamHalfAsFp8Row([[maybe_unused]] const TokenKv& t,
                                   [[maybe_unused]] const typename InTag::Storage* in,
                                   [[maybe_unused]] typename CTag::Storage* out,
                                   [[maybe_unused]] CacheScale scale) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (!std::is_same_v<InTag, F32Tag> && std::is_same_v<CTag, Fp8Tag>) {
    const hn::ScalableTag<std::uint16_t> du;
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(du));
    if (!t.stream_cache || t.head_dim % lanes != 0 ||
        reinterpret_cast<std::uintptr_t>(out) % static_cast<std::uintptr_t>(lanes) != 0) {
      return false;
    }
    if (!StoresHalfAsFp8<InTag, CTag>(scale)) return false;
    const HalfFp8Tables<InTag> tab(scale);
    WithHalfFp8Store<true>(tab, [&](const auto& store) {
      for (std::int64_t i = 0; i < t.head_dim; i += lanes) store(hn::LoadU(du, in + i), out + i);
    });
    return true;
  }
#endif
  return false;
}

// Every head row of the token (t.heads rows of t.head_dim words at in + h in_stride) into its fp8
// cache row (out + h t.cache_head_stride) with streaming stores, 64 values at a time in byte
// lanes (fp8-inl.h's Bf16RowsToFp8Vbmi, F16RowsToFp8Vbmi), in one call for the token: with
// stream_cache, AVX-512 VBMI, the scale's table, rows of whole 64-value blocks on 32-byte
// boundaries; false, nothing done, otherwise (the caller goes head by head). `prefetch`: each
// row's prefetch_ahead.
template <class InTag, class CTag>
HWY_INLINE bool StreamHalfAsFp8Rows([[maybe_unused]] const TokenKv& t,
                                    [[maybe_unused]] const typename InTag::Storage* in,
                                    [[maybe_unused]] std::int64_t in_stride,
                                    [[maybe_unused]] typename CTag::Storage* out,
                                    [[maybe_unused]] CacheScale scale,
                                    [[maybe_unused]] bool prefetch) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (!std::is_same_v<InTag, F32Tag> && std::is_same_v<CTag, Fp8Tag>) {
    if (!t.stream_cache || t.head_dim % 64 != 0 || t.cache_head_stride % 32 != 0 ||
        reinterpret_cast<std::uintptr_t>(out) % 32 != 0 || !HalfFp8ByBytes<InTag>(scale)) {
      return false;
    }
    const HalfFp8Tables<InTag> tab(scale);
    HalfRowsToFp8Bytes<true>(in, in_stride, out, t.cache_head_stride, t.heads, t.head_dim, scale,
                             tab, prefetch);
    return true;
  }
#endif
  return false;
}

#if POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// StoreResultsF32x2 (the same bits) with streaming stores, to p aligned to 2 * Lanes(d) floats'
// bytes at f32 (Lanes(d) at f16 and bf16): two full vectors for f32, two half vectors of F16C's
// vcvtps2ph, one vector of the packed bf16 words. The write-combining buffer joins consecutive
// streaming stores into whole lines.
template <class D>
HWY_INLINE void StreamResultsF32x2(F32Tag, D d, hn::Vec<D> v0, hn::Vec<D> v1, float* p) {
  hn::Stream(v0, d, p);
  hn::Stream(v1, d, p + hn::Lanes(d));
}
template <class D>
HWY_INLINE void StreamResultsF32x2(F16Tag, D, hn::Vec<D> v0, hn::Vec<D> v1, std::uint16_t* p) {
  const hn::Rebind<hwy::float16_t, D> dh;
  const hn::Rebind<std::uint16_t, D> du16;
  hn::Stream(hn::BitCast(du16, hn::DemoteTo(dh, v0)), du16, p);
  hn::Stream(hn::BitCast(du16, hn::DemoteTo(dh, v1)), du16, p + hn::Lanes(du16));
}
template <class D>
HWY_INLINE void StreamResultsF32x2(BF16Tag, D d, hn::Vec<D> v0, hn::Vec<D> v1, std::uint16_t* p) {
  const hn::Repartition<std::uint16_t, D> du16;
  hn::Stream(hn::ConcatOdd(du16, hn::BitCast(du16, Bf16HighBitsOfResult(d, v1)),
                           hn::BitCast(du16, Bf16HighBitsOfResult(d, v0))),
             du16, p);
}
inline constexpr bool kStreamResultsF32x2 = true;
#else
template <class Tag, class D>
HWY_INLINE void StreamResultsF32x2(Tag, D, hn::Vec<D>, hn::Vec<D>, typename Tag::Storage*) {}
inline constexpr bool kStreamResultsF32x2 = false;
#endif
#endif  // POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_KV_CACHE_STREAM_INL_H_
