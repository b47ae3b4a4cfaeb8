// src/rope/kernels/kv_cache-inl.h: the fused RoPE + KV-cache kernel's per-target code (internal),
// shared by kv_cache_kernel.cc (f32, f16, bf16 caches) and kv_cache_fp8_kernel.cc (fp8 E4M3
// caches). Included once per target after foreach_target.h, like half-inl.h. The streaming stores
// of a prefill's cache rows are kv_cache_stream-inl.h's, the E4M3 rounding fp8-inl.h's.
//
// A rotated k element is rounded to k's dtype first and then converted to the cache dtype, so the
// cache holds exactly what apply_rope followed by a conversion would give; the rotation itself is
// rotate-inl.h's, the loops mirror rotate.cc's (two vectors, one vector, then one-lane tails), so
// every lane gets the same operations as in apply_rope.
//
// Compile cost: ConvertCopy and RotateKHead are out-of-line leaves (HWY_NOINLINE), one per
// (dtype, cache dtype) pair, and AppendTyped only loops over heads and calls them. What made this
// kernel slow to build under clang's ASan + UBSan was the EMU128 target, which now takes the
// one-lane path (POSENC_FULL_VECTORS, rotate-inl.h); out-of-line leaves alone did not help
// (measured), but they keep each function small.

// Per-target include guard: re-entered once for each HWY_TARGET_TOGGLE.
#if defined(POSENC_KERNELS_KV_CACHE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_KV_CACHE_INL_H_
#undef POSENC_KERNELS_KV_CACHE_INL_H_
#else
#define POSENC_KERNELS_KV_CACHE_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

#include "rope/kernels/avx512_bf16.h"
#include "rope/kernels/fp8-inl.h"
#include "rope/kernels/half-inl.h"
#include "rope/kernels/kv_cache_kernel.h"
#include "rope/kernels/kv_cache_stream-inl.h"
#include "rope/kernels/rotate-inl.h"
#include "rope/kernels/rotate.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// k's and v's fp8 scales as the stores take them (the others ignore them).
HWY_INLINE CacheScale KeyScale(const TokenKv& t) {
  return {t.k_scale, t.k_inv_scale, t.k_fp8_map, t.k_f16_fp8_map};
}
HWY_INLINE CacheScale ValueScale(const TokenKv& t) {
  return {t.v_scale, t.v_inv_scale, t.v_fp8_map, t.v_f16_fp8_map};
}

template <class Tag, class D>
HWY_INLINE void StoreCache(Tag tag, D d, hn::Vec<D> v, typename Tag::Storage* p, CacheScale) {
  StoreF32(tag, d, v, p);
}
template <class D>
HWY_INLINE void StoreCache(Fp8Tag, D d, hn::Vec<D> v, std::uint8_t* p, CacheScale sc) {
  StoreFp8Scaled(d, v, sc.scale, sc.inv, p);
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

// bf16 in registers: half-inl.h's rounding kept in the top 16 bits (y is a rotation result,
// never a signaling NaN, so Bf16HighBitsOfResult's shorter form gives the same bits).
template <class D>
HWY_INLINE hn::Vec<D> RoundTo(BF16Tag, D d, hn::Vec<D> y) {
  const hn::RebindToUnsigned<D> du;
  return hn::BitCast(d, hn::And(Bf16HighBitsOfResult(d, y), hn::Set(du, 0xFFFF0000u)));
}

// Two vectors to 2 * Lanes(d) consecutive cache elements (half-inl.h's StoreF32x2 packs bf16).
template <class Tag, class D>
HWY_INLINE void StoreCache2(Tag tag, D d, hn::Vec<D> v0, hn::Vec<D> v1, typename Tag::Storage* p,
                            CacheScale) {
  StoreF32x2(tag, d, v0, v1, p);
}
template <class D>
HWY_INLINE void StoreCache2(Fp8Tag tag, D d, hn::Vec<D> v0, hn::Vec<D> v1, std::uint8_t* p,
                            CacheScale sc) {
  StoreCache(tag, d, v0, p, sc);
  StoreCache(tag, d, v1, p + hn::Lanes(d), sc);
}

// One rotated k vector of dims [j, j + lanes) of the rotated range.
template <class KTag, class CTag, class D>
HWY_INLINE void EmitK(KTag ktag, CTag ctag, D d, hn::Vec<D> y, typename KTag::Storage* back,
                      typename CTag::Storage* cache, CacheScale scale) {
  if (back) StoreF32(ktag, d, y, back);
  if constexpr (std::is_same_v<KTag, CTag>) {
    StoreF32(ktag, d, y, cache);
  } else {
    StoreCache(ctag, d, RoundTo(ktag, d, y), cache, scale);
  }
}

// Two rotated k vectors of dims [j, j + 2 lanes).
template <class KTag, class CTag, class D>
HWY_INLINE void EmitK2(KTag ktag, CTag ctag, D d, hn::Vec<D> y0, hn::Vec<D> y1,
                       typename KTag::Storage* back, typename CTag::Storage* cache,
                       CacheScale scale) {
  if (back) StoreResultsF32x2(ktag, d, y0, y1, back);
  if constexpr (std::is_same_v<KTag, CTag>) {
    StoreResultsF32x2(ktag, d, y0, y1, cache);
  } else {
    StoreCache2(ctag, d, RoundTo(ktag, d, y0), RoundTo(ktag, d, y1), cache, scale);
  }
}

// Dims [0, count) converted from `in` to the cache, unchanged in value (apart from fp8's scale).
template <class InTag, class CTag>
HWY_NOINLINE void ConvertCopy(InTag itag, CTag ctag, const typename InTag::Storage* in,
                              typename CTag::Storage* out, std::int64_t count, CacheScale scale) {
  if constexpr (std::is_same_v<InTag, CTag>) {
    // The cache's own dtype (the scale is fp8's only): a copy of the bits. Widening and rounding
    // back gives the same value, but costs two conversions per lane and would quiet a signaling
    // NaN, which a plain copy keeps.
    std::memcpy(out, in, static_cast<std::size_t>(count) * sizeof(*in));
    return;
  }
  std::int64_t i = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (!std::is_same_v<InTag, F32Tag> && std::is_same_v<CTag, Fp8Tag>) {
    if (StoresHalfAsFp8<InTag, CTag>(scale)) {
      const HalfFp8Tables<InTag> tab(scale);
      if (count >= 64 && HalfFp8ByBytes<InTag>(scale)) {
        i = count / 64 * 64;
        HalfRowsToFp8Bytes<false>(in, 0, out, 0, 1, i, scale, tab, false);
      }
      const hn::ScalableTag<std::uint16_t> du;
      const auto lanes = static_cast<std::int64_t>(hn::Lanes(du));
      WithHalfFp8Store(tab, [&](const auto& store) {
        for (; i + lanes <= count; i += lanes) store(hn::LoadU(du, in + i), out + i);
      });
    }
  }
#endif
#if POSENC_FULL_VECTORS
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (; i + 2 * lanes <= count; i += 2 * lanes) {
    StoreCache2(ctag, d, LoadF32(itag, d, in + i), LoadF32(itag, d, in + i + lanes), out + i,
                scale);
  }
  for (; i + lanes <= count; i += lanes)
    StoreCache(ctag, d, LoadF32(itag, d, in + i), out + i, scale);
  NarrowerVectors(i, count, [&](auto dd, std::int64_t i0) {
    StoreCache(ctag, dd, LoadF32(itag, dd, in + i0), out + i0, scale);
  });
#endif
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) StoreCache(ctag, d1, LoadF32(itag, d1, in + i), out + i, scale);
}

// EmitK2, or with HalfFp8Tables (tab: bf16 or f16 k into fp8 on AVX-512; else null) the two
// vectors' words (what apply_rope stores, also to `back`) converted to E4M3 in 16-bit lanes.
template <class KTag, class CTag, class D>
HWY_INLINE void EmitK2Mapped(KTag ktag, CTag ctag, D d, hn::Vec<D> y0, hn::Vec<D> y1,
                             typename KTag::Storage* back, typename CTag::Storage* cache,
                             CacheScale scale, [[maybe_unused]] const HalfFp8Tables<KTag>* tab) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (!std::is_same_v<KTag, F32Tag> && std::is_same_v<CTag, Fp8Tag> &&
                hn::MaxLanes(D()) * 2 == hn::MaxLanes(hn::ScalableTag<std::uint16_t>())) {
    if (tab) {
      alignas(64) std::uint16_t words[2 * hn::MaxLanes(D())];
      std::uint16_t* w = back ? back : words;
      StoreResultsF32x2(ktag, d, y0, y1, w);
      StoreHalfAsFp8(hn::LoadU(hn::ScalableTag<std::uint16_t>(), w), *tab, cache);
      return;
    }
  }
#endif
  EmitK2(ktag, ctag, d, y0, y1, back, cache, scale);
}

// One head of k rotated into its cache row (and into `back` where it is not null). t's row is
// as rotate.h describes, except that an interleaved one comes expanded (c2, s2: AppendK expands
// it once for the token's heads).
template <class KTag, class CTag>
HWY_NOINLINE void RotateKHead(KTag ktag, CTag ctag, const typename KTag::Storage* in,
                              typename KTag::Storage* back, typename CTag::Storage* out,
                              const TokenKv& t) {
  const std::int64_t n = t.pairs;
  const CacheScale scale = KeyScale(t);
  // The table in registers for the whole head, where there is one.
  std::optional<HalfFp8Tables<KTag>> tables;
  if (StoresHalfAsFp8<KTag, CTag>(scale)) tables.emplace(scale);
  [[maybe_unused]] const HalfFp8Tables<KTag>* tab = tables ? &*tables : nullptr;
  auto at = [&](std::int64_t j) { return back ? back + j : nullptr; };
  if (t.layout == Layout::kHalfSplit) {
    std::int64_t i = 0;
    auto body = [&](auto dd, std::int64_t i0) {
      hn::Vec<decltype(dd)> ya, yb;
      HalfSplitMath(dd, LoadF32(ktag, dd, in + i0), LoadF32(ktag, dd, in + i0 + n),
                    hn::LoadU(dd, t.c + i0), hn::LoadU(dd, t.s + i0), ya, yb);
      EmitK(ktag, ctag, dd, ya, at(i0), out + i0, scale);
      EmitK(ktag, ctag, dd, yb, at(i0 + n), out + i0 + n, scale);
    };
#if POSENC_FULL_VECTORS
    const hn::ScalableTag<float> d;
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
      hn::Vec<decltype(d)> ya0, yb0, ya1, yb1;
      HalfSplitMath(d, LoadF32(ktag, d, in + i), LoadF32(ktag, d, in + i + n),
                    hn::LoadU(d, t.c + i), hn::LoadU(d, t.s + i), ya0, yb0);
      HalfSplitMath(d, LoadF32(ktag, d, in + i + lanes), LoadF32(ktag, d, in + i + n + lanes),
                    hn::LoadU(d, t.c + i + lanes), hn::LoadU(d, t.s + i + lanes), ya1, yb1);
      EmitK2Mapped(ktag, ctag, d, ya0, ya1, at(i), out + i, scale, tab);
      EmitK2Mapped(ktag, ctag, d, yb0, yb1, at(i + n), out + i + n, scale, tab);
    }
    for (; i + lanes <= n; i += lanes) body(d, i);
    NarrowerVectors(i, n, body);
#endif
    const hn::CappedTag<float, 1> d1;
    for (; i < n; ++i) body(d1, i);
    return;
  }
  const std::int64_t dims = 2 * n;
  std::int64_t j = 0;
#if POSENC_FULL_VECTORS  // (and as rotate.cc: HWY_SCALAR's one lane holds no pair)
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (; j + 2 * lanes <= dims; j += 2 * lanes) {
    const auto x0 = LoadF32(ktag, d, in + j);
    const auto x1 = LoadF32(ktag, d, in + j + lanes);
    const auto y0 =
        InterleavedMath(d, x0, hn::Shuffle2301(x0), hn::LoadU(d, t.c + j), hn::LoadU(d, t.s + j));
    const auto y1 = InterleavedMath(d, x1, hn::Shuffle2301(x1), hn::LoadU(d, t.c + j + lanes),
                                    hn::LoadU(d, t.s + j + lanes));
    EmitK2Mapped(ktag, ctag, d, y0, y1, at(j), out + j, scale, tab);
  }
  auto interleaved = [&](auto dd, std::int64_t j0) {
    const auto x = LoadF32(ktag, dd, in + j0);
    EmitK(ktag, ctag, dd,
          InterleavedMath(dd, x, hn::Shuffle2301(x), hn::LoadU(dd, t.c + j0),
                          hn::LoadU(dd, t.s + j0)),
          at(j0), out + j0, scale);
  };
  for (; j + lanes <= dims; j += lanes) interleaved(d, j);
  NarrowerVectors(j, dims, interleaved);
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

#if POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE
// k into a cache of its own dtype, full rotary of n = kVecs * lanes pairs, half-split or
// interleaved (AppendKFixed's counts): rotate.cc's rows in registers, loaded once for all of the
// token's heads. Per element the operations of RotateKHead's two-vector body (the same
// HalfSplitMath or InterleavedMath, EmitK2's same-dtype stores): the same bits. With stream_cache, a cache row that
// starts on a vector boundary takes the results straight from the registers with streaming
// stores (StreamResultsF32x2); other rows are staged (CacheRow). In one process on Zen 5,
// medians of 21, staged against streamed from the registers: Llama 2 7B prefill f16 6.20 -> 5.02
// ms, bf16 6.61 -> 6.14, f32 12.56 -> 12.16; Llama 3 8B f16 2.67 -> 2.34.
template <bool kInterleaved, std::size_t kVecs, class Tag>
HWY_NOINLINE void AppendKRowInRegisters(Tag tag, const TokenKv& t) {
  using T = typename Tag::Storage;
  const hn::ScalableTag<float> d;
  constexpr std::size_t kLanes = hn::MaxLanes(d);
  constexpr auto n = static_cast<std::int64_t>(kVecs * kLanes);
  // Interleaved: the row expanded (rotate-inl.h's InterleavedRowLanes), 2 kVecs vectors of c2 and
  // of s2, each vector of dims rotated by InterleavedMath as RotateKHead does.
  constexpr std::size_t kRowVecs = kInterleaved ? 2 * kVecs : kVecs;
  const T* in = static_cast<const T*>(t.k);
  T* back = static_cast<T*>(t.k_back);
  T* out = static_cast<T*>(t.k_cache);
  hn::Vec<decltype(d)> vc[kRowVecs], vs[kRowVecs];
  LoadRowVecs<kInterleaved>(d, t.c, t.s, vc, vs);
  // A row of 2n elements starting on a vector boundary keeps every pair of vectors' store on one
  // (n is a whole number of vectors). Vectors go two at a time; an odd last one of a half-split
  // row (kVecs 1, 3, 5: head_dim 32, 96, 160 on AVX-512) alone, and such rows are staged rather
  // than streamed.
  constexpr std::size_t kAlign = hn::MaxLanes(hn::ScalableTag<std::uint8_t>());
  constexpr std::size_t kPaired = kRowVecs / 2 * 2;
  // kBack: the rotated k also goes back into k (TokenKv::k_back). A compile-time choice, so that
  // a call without it tests nothing per store.
  auto rotate_head = [&](const T* a, T* ab, T* y, auto stream, auto with_back) {
    constexpr bool kBack = decltype(with_back)::value;
    if constexpr (kInterleaved) {
#pragma GCC unroll 8
      for (std::size_t k = 0; k < kRowVecs; k += 2) {
        const std::size_t i = k * kLanes;
        const auto x0 = LoadF32(tag, d, a + i);
        const auto x1 = LoadF32(tag, d, a + i + kLanes);
        const auto y0 = InterleavedMath(d, x0, hn::Shuffle2301(x0), vc[k], vs[k]);
        const auto y1 = InterleavedMath(d, x1, hn::Shuffle2301(x1), vc[k + 1], vs[k + 1]);
        if constexpr (decltype(stream)::value) {
          if constexpr (kBack) StoreResultsF32x2(tag, d, y0, y1, ab + i);
          StreamResultsF32x2(tag, d, y0, y1, y + i);
        } else {
          EmitK2(tag, tag, d, y0, y1, kBack ? ab + i : nullptr, y + i, CacheScale{});
        }
      }
    } else {
#pragma GCC unroll 8
      for (std::size_t k = 0; k < kPaired; k += 2) {
        const std::size_t i = k * kLanes;
        hn::Vec<decltype(d)> ya0, yb0, ya1, yb1;
        HalfSplitMath(d, LoadF32(tag, d, a + i), LoadF32(tag, d, a + n + i), vc[k], vs[k], ya0,
                      yb0);
        HalfSplitMath(d, LoadF32(tag, d, a + i + kLanes), LoadF32(tag, d, a + n + i + kLanes),
                      vc[k + 1], vs[k + 1], ya1, yb1);
        if constexpr (decltype(stream)::value) {
          if constexpr (kBack) {
            StoreResultsF32x2(tag, d, ya0, ya1, ab + i);
            StoreResultsF32x2(tag, d, yb0, yb1, ab + n + i);
          }
          StreamResultsF32x2(tag, d, ya0, ya1, y + i);
          StreamResultsF32x2(tag, d, yb0, yb1, y + n + i);
        } else {
          EmitK2(tag, tag, d, ya0, ya1, kBack ? ab + i : nullptr, y + i, CacheScale{});
          EmitK2(tag, tag, d, yb0, yb1, kBack ? ab + n + i : nullptr, y + n + i, CacheScale{});
        }
      }
      if constexpr (kPaired < kRowVecs) {  // an odd last vector: never streamed (see each_head)
        constexpr std::size_t i = kPaired * kLanes;
        hn::Vec<decltype(d)> ya, yb;
        HalfSplitMath(d, LoadF32(tag, d, a + i), LoadF32(tag, d, a + n + i), vc[kPaired],
                      vs[kPaired], ya, yb);
        EmitK(tag, tag, d, ya, kBack ? ab + i : nullptr, y + i, CacheScale{});
        EmitK(tag, tag, d, yb, kBack ? ab + n + i : nullptr, y + n + i, CacheScale{});
      }
    }
  };
  // t's fields in registers, as rotate.cc's RotateHeadsInRegisters (the stores may
  // alias them), and the choices made once per token (streaming or not, k written back or not)
  // instead of per head and per store. A decode step's time did not change measurably with the
  // second part (the first is measured in rotate.cc).
  const std::int64_t heads = t.heads, k_head_stride = t.k_head_stride;
  const std::int64_t cache_head_stride = t.cache_head_stride;
  const bool prefetch = t.prefetch, stream_cache = t.stream_cache;
  auto each_head = [&](auto with_back) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const T* a = in + h * k_head_stride;
      T* ab = decltype(with_back)::value ? back + h * k_head_stride : nullptr;
      T* cache_row = out + h * cache_head_stride;
      if (prefetch) prefetch_ahead(a, 2 * n);
      if (!stream_cache) {
        rotate_head(a, ab, cache_row, std::false_type(), with_back);
      } else if (kStreamResultsF32x2 && kPaired == kRowVecs &&
                 reinterpret_cast<std::uintptr_t>(cache_row) % kAlign == 0) {
        rotate_head(a, ab, cache_row, std::true_type(), with_back);
      } else {
        CacheRow<T> row(t, cache_row);
        rotate_head(a, ab, row.target(), std::false_type(), with_back);
        row.Flush(2 * n);
      }
    }
  };
  if (back) {
    each_head(std::true_type());
  } else {
    each_head(std::false_type());
  }
}

// AppendKRowInRegisters where it applies (the row counts of rotate.cc's RotateRowInRegisters);
// false otherwise.
template <class Tag>
HWY_INLINE bool AppendKFixed(Tag tag, const TokenKv& t) {
  if (t.offset != 0 || t.head_dim != 2 * t.pairs) return false;
  constexpr bool kWide = HWY_MAX_BYTES >= 64;
  if (t.layout == Layout::kHalfSplit) {
    auto append = [&](auto vecs) { AppendKRowInRegisters<false, decltype(vecs)::value>(tag, t); };
    return kWide ? WithRowVecs<1, 2, 3, 4, 5, 6, 8>(t.pairs, append)
                 : WithRowVecs<1, 2, 3, 4, 8>(t.pairs, append);
  }
  auto append = [&](auto vecs) { AppendKRowInRegisters<true, decltype(vecs)::value>(tag, t); };
  return kWide ? WithRowVecs<1, 2, 3, 4>(t.pairs, append) : WithRowVecs<1, 2>(t.pairs, append);
}
#endif

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// A token's bf16 or f16 keys, heads packed (k_head_stride == head_dim) and every dim rotated,
// rotated by rotate_token_heads, apply_rope's own kernel (AVX-512 BF16's rounding and rows in
// registers where it has them), into `out` (k itself, a buffer, or a cache cell of packed heads).
HWY_INLINE void RotatePackedKeys(const TokenKv& t, void* out) {
  TokenHeads th;
  th.in = t.k;
  th.out = out;
  th.dtype = t.k_dtype;
  th.heads = t.heads;
  th.head_stride = t.head_dim;
  th.head_dim = t.head_dim;
  th.offset = 0;
  th.pairs = t.pairs;
  th.layout = t.layout;
  th.copy_rest = false;  // every dim is rotated
  th.prefetch = t.prefetch;
  th.c = t.c;
  th.s = t.s;
  rotate_token_heads(th);
}

// bf16 or f16 k into an fp8 cache by the scale's table (StoreBf16AsFp8, StoreF16AsFp8), every dim
// rotated, heads packed: the token's heads rotated by rotate_token_heads, apply_rope's own kernel
// (rows in registers; for bf16 AVX-512 BF16's rounding), into k itself when it is rotated in place
// or else a buffer on the stack, then each head's words rounded to E4M3 by ConvertCopy, all in
// L1. Rotating and rounding in one loop (RotateKHead) needs more than the 32 vector registers:
// GCC re-broadcast StoreBf16AsFp8's constants on every iteration, and a 64-token decode of Llama 2
// 7B took about 1.25 times rotate-then-copy (Zen 5); f16 keys took RotateKHead's float32 path
// until session 27, about 3 times bf16's time (docs/kernel-log.md). The same bits: the words are
// apply_rope's, and ConvertCopy rounds them as EmitK2Mapped does. (A bf16 cache the same way was
// no faster than AppendKRowInRegisters at prefill, three alternations: Llama 2 7B 5.88-5.93
// against 5.66-5.88 ms, Llama 3 8B 1.92-2.02 against 2.09-2.20 ms; left as it is.) False, nothing
// done, where it does not apply.
template <class KTag>
HWY_INLINE bool AppendHalfKAsFp8ByToken(KTag ktag, const TokenKv& t) {
  constexpr std::int64_t kMaxWords = 8192;  // 16 KiB: Llama 2 7B's 32 heads of 128 take half
  const CacheScale ks = KeyScale(t);
  if (!StoresHalfAsFp8<KTag, Fp8Tag>(ks) || t.pairs == 0 || t.offset != 0 ||
      2 * t.pairs != t.head_dim || t.k_head_stride != t.head_dim ||
      t.heads * t.head_dim > kMaxWords) {
    return false;
  }
  alignas(64) std::uint16_t words[kMaxWords];
  void* rotated_to = t.k_back ? t.k_back : words;
  RotatePackedKeys(t, rotated_to);
  const auto* rotated = static_cast<const std::uint16_t*>(rotated_to);
  auto* out = static_cast<std::uint8_t*>(t.k_cache);
  if (!t.stream_cache && t.cache_head_stride == t.head_dim) {  // one cell of packed heads
    ConvertCopy(ktag, Fp8Tag(), rotated, out, t.heads * t.head_dim, ks);
    return true;
  }
  if (StreamHalfAsFp8Rows<KTag, Fp8Tag>(t, rotated, t.head_dim, out, ks, false)) return true;
  for (std::int64_t h = 0; h < t.heads; ++h) {
    std::uint8_t* cache_row = out + h * t.cache_head_stride;
    if (StreamHalfAsFp8Row<KTag, Fp8Tag>(t, rotated + h * t.head_dim, cache_row, ks)) continue;
    CacheRow<std::uint8_t> row(t, cache_row);
    ConvertCopy(ktag, Fp8Tag(), rotated + h * t.head_dim, row.target(), t.head_dim, ks);
    row.Flush(t.head_dim);
  }
  return true;
}
#endif

// bf16 k into a bf16 cache without stream_cache (a decode, a short append), every dim rotated,
// heads packed in k and in the cache cell (vLLM's layout, FlashInfer's NHD): with AVX-512 BF16 on,
// the token's heads are rotated by rotate_token_heads, apply_rope's own kernel (the hardware's
// rounding, rows in registers), straight into the cache cell, or into k when it is rotated in
// place and then copied. AppendKRowInRegisters rounds bf16 in software (Highway's AVX3 code has no
// vcvtne2ps2bf16). The same bits: the words are apply_rope's, and a bf16 cache takes them as they
// are. Session 20, Zen 4, `posenc bench --filter 'fused-(prefill|decode).*/bf16/cache:bf16'`, the
// binaries before and after in turn, three rounds: Llama 2 7B one-token decode 1.17-1.18 ->
// 0.89-0.97 us (1.00-1.10x -> 1.25-1.32x over rotate-then-copy), 64-token decode 66-69 -> 51-65 us,
// Llama 3 8B 31-33 -> 29 us. With stream_cache (a prefill) rotating a token into an L1 buffer and
// streaming it out was slower for Llama 2 7B (6.5-6.9 -> 7.3-7.6 ms), so prefills keep
// AppendKRowInRegisters. False, nothing done, where it does not apply.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
HWY_INLINE bool AppendBf16KByToken(const TokenKv& t) {
  if (!avx512_bf16_enabled() || t.stream_cache || t.pairs == 0 || t.offset != 0 ||
      2 * t.pairs != t.head_dim || t.k_head_stride != t.head_dim ||
      t.cache_head_stride != t.head_dim) {
    return false;
  }
  RotatePackedKeys(t, t.k_back ? t.k_back : t.k_cache);
  if (t.k_back) {
    std::memcpy(t.k_cache, t.k_back,
                static_cast<std::size_t>(t.heads * t.head_dim) * sizeof(std::uint16_t));
  }
  return true;
}
#endif

template <class KTag, class CTag>
HWY_INLINE void AppendK(KTag ktag, CTag ctag, const TokenKv& t) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (std::is_same_v<KTag, BF16Tag> && std::is_same_v<CTag, BF16Tag>) {
    if (AppendBf16KByToken(t)) return;
  }
#endif
#if POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE
  if constexpr (std::is_same_v<KTag, CTag>) {
    if (AppendKFixed(ktag, t)) return;
  }
#endif
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (!std::is_same_v<KTag, F32Tag> && std::is_same_v<CTag, Fp8Tag>) {
    if (AppendHalfKAsFp8ByToken(ktag, t)) return;
  }
#endif
  using K = typename KTag::Storage;
  using C = typename CTag::Storage;
  const K* in = static_cast<const K*>(t.k);
  K* back = static_cast<K*>(t.k_back);
  C* out = static_cast<C*>(t.k_cache);
  const std::int64_t rotated = 2 * t.pairs;
  const CacheScale ks = KeyScale(t);
  // RotateKHead reads an interleaved row expanded (rotate.h): once for all the heads.
  const InterleavedRowBuffer row2(t.layout, t.c, t.s, t.pairs);
  TokenKv tk = t;
  if (row2.c2) {
    tk.c = row2.c2;
    tk.s = row2.s2;
  }
  for (std::int64_t h = 0; h < t.heads; ++h) {
    const K* hin = in + h * t.k_head_stride;
    if (t.prefetch) prefetch_ahead(hin, t.head_dim);
    if (rotated == 0 && StreamAsIs<KTag, CTag>(t, hin, out + h * t.cache_head_stride)) continue;
    CacheRow<C> row(t, out + h * t.cache_head_stride);
    C* hout = row.target();
    if (rotated == 0) {
      ConvertCopy(ktag, ctag, hin, hout, t.head_dim, ks);
    } else {
      // The unrotated dims (partial rotary) around the rotated ones; usually none.
      if (t.offset > 0) ConvertCopy(ktag, ctag, hin, hout, t.offset, ks);
      const std::int64_t end = t.offset + rotated;
      if (end < t.head_dim) ConvertCopy(ktag, ctag, hin + end, hout + end, t.head_dim - end, ks);
      RotateKHead(ktag, ctag, hin + t.offset,
                  back ? back + h * t.k_head_stride + t.offset : nullptr, hout + t.offset, tk);
    }
    row.Flush(t.head_dim);
  }
}

template <class VTag, class CTag>
HWY_INLINE void AppendV(VTag vtag, CTag ctag, const TokenKv& t) {
  const auto* in = static_cast<const typename VTag::Storage*>(t.v);
  auto* out = static_cast<typename CTag::Storage*>(t.v_cache);
  const CacheScale vs = ValueScale(t);
  if (!t.stream_cache && t.v_head_stride == t.head_dim && t.cache_head_stride == t.head_dim) {
    // Heads packed in v and in the cache cell (vLLM's layout, FlashInfer's NHD): the token's row
    // in one call, not one per head (ConvertCopy's set-up, a memcpy's, per head of 128).
    if (t.prefetch) prefetch_ahead(in, t.heads * t.head_dim);
    ConvertCopy(vtag, ctag, in, out, t.heads * t.head_dim, vs);
    return;
  }
  if (StreamHalfAsFp8Rows<VTag, CTag>(t, in, t.v_head_stride, out, vs, t.prefetch)) return;
  for (std::int64_t h = 0; h < t.heads; ++h) {
    const auto* hin = in + h * t.v_head_stride;
    if (t.prefetch) prefetch_ahead(hin, t.head_dim);
    if (StreamAsIs<VTag, CTag>(t, hin, out + h * t.cache_head_stride)) continue;
    if (StreamHalfAsFp8Row<VTag, CTag>(t, hin, out + h * t.cache_head_stride, vs)) continue;
    CacheRow<typename CTag::Storage> row(t, out + h * t.cache_head_stride);
    ConvertCopy(vtag, ctag, hin, row.target(), t.head_dim, vs);
    row.Flush(t.head_dim);
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

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_KV_CACHE_INL_H_
