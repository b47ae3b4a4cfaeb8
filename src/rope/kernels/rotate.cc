// The RoPE rotation kernel, written once with Google Highway and compiled for every SIMD target
// (foreach_target.h), dispatched at run time to the best one the CPU has.
//
// Per pair the work is 2 loads, 4 multiplies (2 fused where the target has FMA), 2 stores: the
// kernel is bound by memory bandwidth, not arithmetic, so it streams each head once and keeps
// cos/sin rows in L1 (one row of n floats serves every head of the token).
// foreach_target.h re-includes this file once per target, so the order of these lines is
// Highway's, not alphabetical.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rope/kernels/rotate.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>
#include <type_traits>

#include "rope/kernels/avx512_bf16.h"
#include "rope/kernels/half-inl.h"
#include "rope/kernels/rotate-inl.h"
#include "rope/kernels/rotate.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Each layout's rotation is one function of the tag `d`: the loop runs it on full vectors and
// the tail on one lane (Highway's skeleton: HWY_CAPPED(float, 1)), so a tail pair gets exactly
// the operations, and so the bits, of a body pair on every target. EMU128 and HWY_SCALAR run
// every pair as a tail (POSENC_FULL_VECTORS, rotate-inl.h: their build cost under ASan).

// Half-split: a = x[i], b = x[i + n]; y_a = a c - b s, y_b = b c + a s.
template <class Tag, class D>
HWY_INLINE void HalfSplitLanes(Tag tag, D d, const typename Tag::Storage* in,
                               typename Tag::Storage* out, std::int64_t n, const float* c,
                               const float* s) {
  const auto a = LoadF32(tag, d, in);
  const auto b = LoadF32(tag, d, in + n);
  hn::Vec<D> ya, yb;
  HalfSplitMath(d, a, b, hn::LoadU(d, c), hn::LoadU(d, s), ya, yb);
  StoreF32(tag, d, ya, out);
  StoreF32(tag, d, yb, out + n);
}

template <class Tag>
HWY_INLINE void RotateHalfSplit(Tag tag, const typename Tag::Storage* in,
                                typename Tag::Storage* out, std::int64_t n, const float* c,
                                const float* s) {
  std::int64_t i = 0;
#if POSENC_FULL_VECTORS
  const hn::ScalableTag<float> d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  // Two vectors per step, so a bf16 store packs 2 * lanes elements at once (half-inl.h).
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const auto a0 = LoadF32(tag, d, in + i);
    const auto a1 = LoadF32(tag, d, in + i + lanes);
    const auto b0 = LoadF32(tag, d, in + i + n);
    const auto b1 = LoadF32(tag, d, in + i + n + lanes);
    hn::Vec<decltype(d)> ya0, yb0, ya1, yb1;
    HalfSplitMath(d, a0, b0, hn::LoadU(d, c + i), hn::LoadU(d, s + i), ya0, yb0);
    HalfSplitMath(d, a1, b1, hn::LoadU(d, c + i + lanes), hn::LoadU(d, s + i + lanes), ya1, yb1);
    StoreResultsF32x2(tag, d, ya0, ya1, out + i);
    StoreResultsF32x2(tag, d, yb0, yb1, out + i + n);
  }
  for (; i + lanes <= n; i += lanes) HalfSplitLanes(tag, d, in + i, out + i, n, c + i, s + i);
  NarrowerVectors(i, n, [&](auto dd, std::int64_t i0) {
    HalfSplitLanes(tag, dd, in + i0, out + i0, n, c + i0, s + i0);
  });
#endif
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) HalfSplitLanes(tag, d1, in + i, out + i, n, c + i, s + i);
}

#if POSENC_FULL_VECTORS
// bf16 half-split over whole blocks of 2 * lanes pairs in even/odd form (half-inl.h): the rows
// ce / cs hold each block's even-indexed entries of c (s), then its odd ones (DeinterleaveRow),
// so every element meets its own c_i, s_i in the same HalfSplitMath: the bits of RotateHalfSplit.
template <class D>
HWY_INLINE std::int64_t RotateHalfSplitBf16EvenOdd(D d, const std::uint16_t* in, std::uint16_t* out,
                                                   std::int64_t n, const float* ce,
                                                   const float* se) {
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    hn::Vec<D> ae, ao, be, bo, yae, yao, ybe, ybo;
    LoadBf16EvenOdd(d, in + i, ae, ao);
    LoadBf16EvenOdd(d, in + i + n, be, bo);
    HalfSplitMath(d, ae, be, hn::Load(d, ce + i), hn::Load(d, se + i), yae, ybe);
    HalfSplitMath(d, ao, bo, hn::Load(d, ce + i + lanes), hn::Load(d, se + i + lanes), yao, ybo);
    StoreBf16EvenOddResults(d, yae, yao, out + i);
    StoreBf16EvenOddResults(d, ybe, ybo, out + i + n);
  }
  return i;
}

// row[0, blocks * 2 lanes) -> per block: its even entries, then its odd ones.
template <class D>
HWY_INLINE void DeinterleaveRow(D d, const float* row, std::int64_t count, float* out) {
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t i = 0; i < count; i += 2 * lanes) {
    const auto lo = hn::LoadU(d, row + i), hi = hn::LoadU(d, row + i + lanes);
    hn::Store(hn::ConcatEven(d, hi, lo), d, out + i);
    hn::Store(hn::ConcatOdd(d, hi, lo), d, out + i + lanes);
  }
}
#endif

// Interleaved: y = x c2 + partner(x) s2 lane by lane, where partner swaps the two dims of each
// pair (c2, s2 expanded by the caller).
template <class Tag, class D>
HWY_INLINE void InterleavedLanes(Tag tag, D d, hn::Vec<D> x, hn::Vec<D> partner,
                                 typename Tag::Storage* out, const float* c2, const float* s2) {
  StoreF32(tag, d, InterleavedMath(d, x, partner, hn::LoadU(d, c2), hn::LoadU(d, s2)), out);
}

template <class Tag>
HWY_INLINE void RotateInterleaved(Tag tag, const typename Tag::Storage* in,
                                  typename Tag::Storage* out, std::int64_t n, const float* c2,
                                  const float* s2) {
  const std::int64_t dims = 2 * n;
  std::int64_t j = 0;
#if POSENC_FULL_VECTORS  // (HWY_SCALAR's one lane holds no pair to swap: the tail loop does it)
  const hn::ScalableTag<float> d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (; j + 2 * lanes <= dims; j += 2 * lanes) {
    const auto x0 = LoadF32(tag, d, in + j);
    const auto x1 = LoadF32(tag, d, in + j + lanes);
    const auto y0 =
        InterleavedMath(d, x0, hn::Shuffle2301(x0), hn::LoadU(d, c2 + j), hn::LoadU(d, s2 + j));
    const auto y1 = InterleavedMath(d, x1, hn::Shuffle2301(x1), hn::LoadU(d, c2 + j + lanes),
                                    hn::LoadU(d, s2 + j + lanes));
    StoreResultsF32x2(tag, d, y0, y1, out + j);
  }
  for (; j + lanes <= dims; j += lanes) {
    const auto x = LoadF32(tag, d, in + j);
    InterleavedLanes(tag, d, x, hn::Shuffle2301(x), out + j, c2 + j, s2 + j);
  }
  NarrowerVectors(j, dims, [&](auto dd, std::int64_t j0) {
    const auto x = LoadF32(tag, dd, in + j0);
    InterleavedLanes(tag, dd, x, hn::Shuffle2301(x), out + j0, c2 + j0, s2 + j0);
  });
#endif
  // The tail pair by pair, each dim in its own one-lane vector: the partner is the other load.
  const hn::CappedTag<float, 1> d1;
  for (; j < dims; j += 2) {
    const auto a = LoadF32(tag, d1, in + j);
    const auto b = LoadF32(tag, d1, in + j + 1);
    InterleavedLanes(tag, d1, a, b, out + j, c2 + j, s2 + j);
    InterleavedLanes(tag, d1, b, a, out + j + 1, c2 + j + 1, s2 + j + 1);
  }
}

// Out of place (copy_rest): the head's dims outside [offset, offset + 2 pairs) are copied as
// they are.
template <class T>
HWY_INLINE void CopyUnrotated(const TokenHeads& t, const T* hin, T* hout) {
  if (!t.copy_rest) return;
  const std::int64_t end = t.offset + 2 * t.pairs;
  std::memcpy(hout, hin, static_cast<std::size_t>(t.offset) * sizeof(T));
  std::memcpy(hout + end, hin + end, static_cast<std::size_t>(t.head_dim - end) * sizeof(T));
}

#if POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE
// Rows of n = kVecs * lanes pairs, the heads of one token, with the row loaded once into registers
// for every head, so a head costs only its own loads and stores, with no loop over its vectors
// (the per-head loops of RotateHalfSplit and RotateInterleaved run a few iterations at head_dim
// 128, spent half their loads on the row, and RotateInterleaved loaded its input twice). Each
// element meets the same math as in those loops: the same bits.
//  - Half-split (the counts RotateRowInRegisters lists): kVecs vectors of c and of s,
//    HalfSplitMath. bf16 keeps the row deinterleaved (even / odd form, as
//    RotateHalfSplitBf16EvenOdd) so that a pair of vectors packs into one store.
//  - Interleaved (kInterleaved; 2n = 2 kVecs lanes dims): the row expanded into 2 kVecs vectors
//    of c2 and of s2, InterleavedMath with the partner from Shuffle2301 of the register. Before it,
//    8 heads of 128 (f32, f16, bf16 without AVX-512 BF16) ran at 0.39-0.51 of the in-place
//    stream (Zen 4), against 0.74-0.89 for half-split.
template <bool kInterleaved, std::size_t kVecs, class Tag>
HWY_INLINE void RotateHeadsInRegisters(Tag tag, const TokenHeads& t) {
  using T = typename Tag::Storage;
  const hn::ScalableTag<float> d;
  constexpr std::size_t kLanes = hn::MaxLanes(d);
  constexpr std::int64_t n = static_cast<std::int64_t>(kVecs * kLanes);
  constexpr std::size_t kRowVecs = kInterleaved ? 2 * kVecs : kVecs;  // vectors of c (and of s)
  const T* in = static_cast<const T*>(t.in);
  T* out = static_cast<T*>(t.out);
  constexpr bool kBf16EvenOdd = std::is_same_v<Tag, BF16Tag> && !kInterleaved;
  // Vectors taken two at a time; an odd last one of a half-split row alone (kVecs 1, 3, 5:
  // head_dim 32, 96, 160 on AVX-512), with bf16's in natural order (the even / odd form needs two).
  constexpr std::size_t kPaired = kRowVecs / 2 * 2;
  hn::Vec<decltype(d)> vc[kRowVecs], vs[kRowVecs];
  LoadRowVecs<kInterleaved>(d, t.c, t.s, vc, vs);
  if constexpr (kBf16EvenOdd && kPaired > 0) {
    alignas(64) float ce[kPaired * kLanes], se[kPaired * kLanes];
    DeinterleaveRow(d, t.c, kPaired * kLanes, ce);
    DeinterleaveRow(d, t.s, kPaired * kLanes, se);
    for (std::size_t k = 0; k < kPaired; ++k) {
      vc[k] = hn::Load(d, ce + k * kLanes);
      vs[k] = hn::Load(d, se + k * kLanes);
    }
  }
  // The fields the head loop reads, in registers: the stores below may alias memory (Highway's
  // vector stores are may_alias), so t's fields would be reloaded after every head's stores. A
  // standalone copy of this loop over a decode step's 32 heads (f32, in L1) took 174-185 ns
  // reading them through the reference and 160-166 ns from locals (two rounds, in turn).
  const std::int64_t heads = t.heads, head_stride = t.head_stride, offset = t.offset;
  const std::int64_t head_dim = t.head_dim;
  const bool prefetch = t.prefetch;
  // Out of place, every head's unrotated dims first: no call inside the loop below, across which
  // the row's registers would have to be saved (avx512_bf16.cc measured what that costs).
  if (t.copy_rest) {
    for (std::int64_t h = 0; h < heads; ++h)
      CopyUnrotated(t, in + h * head_stride, out + h * head_stride);
  }
  for (std::int64_t h = 0; h < heads; ++h) {
    const T* hin = in + h * head_stride;
    T* hout = out + h * head_stride;
    if (prefetch) prefetch_ahead(hin, head_dim);
    const T* a = hin + offset;
    T* y = hout + offset;
#pragma GCC unroll 8
    for (std::size_t k = 0; k < kPaired; k += 2) {
      if constexpr (kInterleaved) {
        const auto x0 = LoadF32(tag, d, a + k * kLanes);
        const auto x1 = LoadF32(tag, d, a + (k + 1) * kLanes);
        StoreResultsF32x2(tag, d, InterleavedMath(d, x0, hn::Shuffle2301(x0), vc[k], vs[k]),
                          InterleavedMath(d, x1, hn::Shuffle2301(x1), vc[k + 1], vs[k + 1]),
                          y + k * kLanes);
      } else if constexpr (kBf16EvenOdd) {
        hn::Vec<decltype(d)> ae, ao, be, bo, ya0, yb0, ya1, yb1;
        LoadBf16EvenOdd(d, a + k * kLanes, ae, ao);
        LoadBf16EvenOdd(d, a + n + k * kLanes, be, bo);
        HalfSplitMath(d, ae, be, vc[k], vs[k], ya0, yb0);
        HalfSplitMath(d, ao, bo, vc[k + 1], vs[k + 1], ya1, yb1);
        StoreBf16EvenOddResults(d, ya0, ya1, y + k * kLanes);
        StoreBf16EvenOddResults(d, yb0, yb1, y + n + k * kLanes);
      } else {
        hn::Vec<decltype(d)> ya0, yb0, ya1, yb1;
        HalfSplitMath(d, LoadF32(tag, d, a + k * kLanes), LoadF32(tag, d, a + n + k * kLanes),
                      vc[k], vs[k], ya0, yb0);
        HalfSplitMath(d, LoadF32(tag, d, a + (k + 1) * kLanes),
                      LoadF32(tag, d, a + n + (k + 1) * kLanes), vc[k + 1], vs[k + 1], ya1, yb1);
        StoreResultsF32x2(tag, d, ya0, ya1, y + k * kLanes);
        StoreResultsF32x2(tag, d, yb0, yb1, y + n + k * kLanes);
      }
    }
    if constexpr (kPaired < kRowVecs) {  // half-split only: interleaved rows are 2 kVecs vectors
      constexpr std::size_t k = kPaired;
      hn::Vec<decltype(d)> ya, yb;
      HalfSplitMath(d, LoadF32(tag, d, a + k * kLanes), LoadF32(tag, d, a + n + k * kLanes), vc[k],
                    vs[k], ya, yb);
      StoreF32(tag, d, ya, y + k * kLanes);
      StoreF32(tag, d, yb, y + n + k * kLanes);
    }
  }
}

// Dispatches to RotateHeadsInRegisters where the row fits: whole vectors of pairs, k of them;
// returns false otherwise. Half-split rows take 2 k vectors (c and s): k up to 8 (not 7: head_dim
// 224 is not worth its code), on AVX2 1-4 and 8 (head_dim 128 there, as before odd counts were
// added). Interleaved rows take twice that (c2 and s2 are 2n wide): at most half of the
// target's vector registers, 16 of AVX-512's 32 (k <= 4), 8 of AVX2's 16 (k <= 2).
template <class Tag>
HWY_INLINE bool RotateRowInRegisters(Tag tag, const TokenHeads& t) {
  constexpr bool kWide = HWY_MAX_BYTES >= 64;
  if (t.layout == Layout::kHalfSplit) {
    auto half_split = [&](auto vecs) {
      RotateHeadsInRegisters<false, decltype(vecs)::value>(tag, t);
    };
    return kWide ? WithRowVecs<1, 2, 3, 4, 5, 6, 8>(t.pairs, half_split)
                 : WithRowVecs<1, 2, 3, 4, 8>(t.pairs, half_split);
  }
  auto interleaved = [&](auto vecs) {
    RotateHeadsInRegisters<true, decltype(vecs)::value>(tag, t);
  };
  return kWide ? WithRowVecs<1, 2, 3, 4>(t.pairs, interleaved)
               : WithRowVecs<1, 2>(t.pairs, interleaved);
}
#endif

template <class Tag>
HWY_INLINE void RotateTyped(Tag tag, const TokenHeads& t) {
  using T = typename Tag::Storage;
  const T* in = static_cast<const T*>(t.in);
  T* out = static_cast<T*>(t.out);
#if HWY_TARGET == HWY_AVX3
  // bf16 rows in registers with AVX-512 BF16's rounding, where the CPU has it (avx512_bf16.h).
  if constexpr (std::is_same_v<Tag, BF16Tag>) {
    if (rotate_bf16_heads_avx512_bf16(t)) return;
  }
#endif
#if POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE
  if (RotateRowInRegisters(tag, t)) return;
#endif
#if POSENC_FULL_VECTORS
  if constexpr (std::is_same_v<Tag, BF16Tag>) {
    // bf16 half-split, several heads: deinterleave the row once per token (amortised over the
    // heads), then rotate the whole blocks in even/odd form and the rest as usual.
    const hn::ScalableTag<float> d;
    const std::int64_t block = 2 * static_cast<std::int64_t>(hn::Lanes(d));
    const std::int64_t whole = t.pairs / block * block;
    constexpr std::int64_t kMaxRow = 1024;
    if (t.layout == Layout::kHalfSplit && t.heads >= 2 && whole > 0 && whole <= kMaxRow) {
      alignas(64) float ce[kMaxRow], se[kMaxRow];
      DeinterleaveRow(d, t.c, whole, ce);
      DeinterleaveRow(d, t.s, whole, se);
      for (std::int64_t h = 0; h < t.heads; ++h) {
        const T* hin = in + h * t.head_stride;
        T* hout = out + h * t.head_stride;
        if (t.prefetch) prefetch_ahead(hin, t.head_dim);
        CopyUnrotated(t, hin, hout);
        const std::int64_t n = t.pairs;
        const T* a = hin + t.offset;
        T* y = hout + t.offset;
        const std::int64_t done = RotateHalfSplitBf16EvenOdd(d, a, y, n, ce, se);
        const std::int64_t lanes = block / 2;
        std::int64_t i = done;
        for (; i + lanes <= n; i += lanes)
          HalfSplitLanes(tag, d, a + i, y + i, n, t.c + i, t.s + i);
        NarrowerVectors(i, n, [&](auto dd, std::int64_t i0) {
          HalfSplitLanes(tag, dd, a + i0, y + i0, n, t.c + i0, t.s + i0);
        });
        const hn::CappedTag<float, 1> d1;
        for (; i < n; ++i) HalfSplitLanes(tag, d1, a + i, y + i, n, t.c + i, t.s + i);
      }
      return;
    }
  }
#endif
  // Interleaved rows expanded once for all the heads (ExpandInterleavedRow).
  const InterleavedRowBuffer row2(t.layout, t.c, t.s, t.pairs);
  for (std::int64_t h = 0; h < t.heads; ++h) {
    const T* hin = in + h * t.head_stride;
    T* hout = out + h * t.head_stride;
    if (t.prefetch) prefetch_ahead(hin, t.head_dim);
    CopyUnrotated(t, hin, hout);
    if (t.layout == Layout::kHalfSplit) {
      RotateHalfSplit(tag, hin + t.offset, hout + t.offset, t.pairs, t.c, t.s);
    } else {
      RotateInterleaved(tag, hin + t.offset, hout + t.offset, t.pairs, row2.c2, row2.s2);
    }
  }
}

// f(tag) with the storage tag of `dtype`: the one branch on the runtime dtype, so the functions
// above are compiled once per storage type.
template <class F>
HWY_INLINE void WithStorageTag(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f(F32Tag());
    case DType::kF16:
      return f(F16Tag());
    case DType::kBF16:
      return f(BF16Tag());
  }
}

void RotateTokenHeads(const TokenHeads& t) {
  WithStorageTag(t.dtype, [&](auto tag) { RotateTyped(tag, t); });
}

// The token loop inside the target's code: one dispatch and one dtype branch per block, and
// RotateTyped inlined into the loop.
template <class Tag>
HWY_NOINLINE void RotateBlockTyped(Tag tag, const TokenBlock& b) {
  using T = typename Tag::Storage;
#if HWY_TARGET == HWY_AVX3
  // bf16 with AVX-512 BF16: the whole run in one call (avx512_bf16.h).
  if constexpr (std::is_same_v<Tag, BF16Tag>) {
    if (rotate_bf16_block_avx512_bf16(b)) return;
  }
#endif
  TokenHeads t = b.heads;
  const T* in = static_cast<const T*>(b.heads.in);
  T* out = static_cast<T*>(b.heads.out);
  for (std::int64_t k = 0; k < b.tokens; ++k) {
    t.in = in + k * b.in_token_stride;
    t.out = out + k * b.out_token_stride;
    t.c = b.c[k];
    t.s = b.s[k];
    RotateTyped(tag, t);
  }
}

void RotateTokenBlock(const TokenBlock& b) {
  WithStorageTag(b.heads.dtype, [&](auto tag) { RotateBlockTyped(tag, b); });
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::detail {

HWY_EXPORT(RotateTokenHeads);
HWY_EXPORT(RotateTokenBlock);
HWY_EXPORT(TargetName);

void rotate_token_heads(const TokenHeads& args) { HWY_DYNAMIC_DISPATCH(RotateTokenHeads)(args); }

void rotate_token_block(const TokenBlock& block) { HWY_DYNAMIC_DISPATCH(RotateTokenBlock)(block); }

const char* active_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace posenc::detail
#endif  // HWY_ONCE
