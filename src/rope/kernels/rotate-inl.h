// src/rope/kernels/rotate-inl.h: the rotation arithmetic of one vector of pairs, shared by
// apply_rope's kernel (rotate.cc) and the fused KV-cache kernel (kv_cache_kernel.cc) so that both
// produce the same bits (internal). Included once per target after foreach_target.h.

// Per-target include guard: re-entered once for each HWY_TARGET_TOGGLE.
#if defined(POSENC_KERNELS_ROTATE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_ROTATE_INL_H_
#undef POSENC_KERNELS_ROTATE_INL_H_
#else
#define POSENC_KERNELS_ROTATE_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "posenc/core/spec.h"

// Full vectors on the SIMD targets; on EMU128 (x86 CPUs without SSSE3, Arm without NEON) and
// HWY_SCALAR every element takes the one-lane path that tails take everywhere, which gives the
// same bits (the lane functions are the same; the tests compare every target with the
// reference and with each other). Why: Highway emulates EMU128's vectors as lane arrays, and
// under ASan + UBSan clang spends about 20 times longer on that target's code than on AVX2's
// (the fp8 half of kv_cache-inl.h: 110 s against 5 s of CPU; rotate.cc: 169 of its 189 s), so
// the full-vector forms made this one target most of the sanitized build. Used by rotate.cc and
// kv_cache-inl.h.
#undef POSENC_FULL_VECTORS
#define POSENC_FULL_VECTORS (HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128)

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Half-split: y_a = a c - b s, y_b = b c + a s.
template <class D>
HWY_INLINE void HalfSplitMath(D, hn::Vec<D> a, hn::Vec<D> b, hn::Vec<D> vc, hn::Vec<D> vs,
                              hn::Vec<D>& ya, hn::Vec<D>& yb) {
  ya = hn::MulSub(a, vc, hn::Mul(b, vs));
  yb = hn::MulAdd(b, vc, hn::Mul(a, vs));
}

// Interleaved, lane by lane: y = x c2 + partner(x) s2 (partner: the other dim of the pair).
template <class D>
HWY_INLINE hn::Vec<D> InterleavedMath(D, hn::Vec<D> x, hn::Vec<D> partner, hn::Vec<D> c2,
                                      hn::Vec<D> s2) {
  return hn::MulAdd(x, c2, hn::Mul(partner, s2));
}

#if POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE
// Lanes [j, j + Lanes(d)) of an interleaved row in the kernels' expanded form (rotate.h), c2 = [c0
// c0 c1 c1 ...] and s2 = [-s0 s0 -s1 s1 ...], from the n-value rows c and s (j a multiple of
// Lanes(d)): one permute each from half a vector, s2's signs by a multiply with +-1 (exact).
template <class D>
HWY_INLINE void InterleavedRowLanes(D d, const float* c, const float* s, std::int64_t j,
                                    hn::Vec<D>& c2, hn::Vec<D>& s2) {
  static_assert(hn::MaxLanes(D()) >= 4 && hn::MaxLanes(D()) <= 16, "4 to 16 lanes");
  alignas(64) static constexpr std::int32_t kPairOfLane[16] = {0, 0, 1, 1, 2, 2, 3, 3,
                                                               4, 4, 5, 5, 6, 6, 7, 7};
  alignas(64) static constexpr float kAlternateSign[16] = {-1, 1, -1, 1, -1, 1, -1, 1,
                                                           -1, 1, -1, 1, -1, 1, -1, 1};
  const hn::Half<D> dh;
  const auto idx = hn::SetTableIndices(d, kPairOfLane);
  c2 = hn::TableLookupLanes(hn::ZeroExtendVector(d, hn::LoadU(dh, c + j / 2)), idx);
  s2 = hn::Mul(hn::TableLookupLanes(hn::ZeroExtendVector(d, hn::LoadU(dh, s + j / 2)), idx),
               hn::Load(d, kAlternateSign));
}
#endif

#if POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE
// A row in registers for the rows-in-registers kernels (rotate.cc's RotateHeadsInRegisters,
// kv_cache-inl.h's AppendKRowInRegisters): kRowVecs vectors of c and of s, interleaved rows
// expanded here from the row itself (InterleavedRowLanes). Expanded into a buffer first, a table
// row's misses fell on that copy: at 4096 tokens it took 14% of the time against the rotation's
// 37% (Zen 4, f32, 8 heads of 128).
template <bool kInterleaved, std::size_t kRowVecs, class D>
HWY_INLINE void LoadRowVecs(D d, const float* c, const float* s, hn::Vec<D> (&vc)[kRowVecs],
                            hn::Vec<D> (&vs)[kRowVecs]) {
  constexpr std::size_t kLanes = hn::MaxLanes(D());
  for (std::size_t k = 0; k < kRowVecs; ++k) {
    if constexpr (kInterleaved) {
      InterleavedRowLanes(d, c, s, static_cast<std::int64_t>(k * kLanes), vc[k], vs[k]);
    } else {
      vc[k] = hn::LoadU(d, c + k * kLanes);
      vs[k] = hn::LoadU(d, s + k * kLanes);
    }
  }
}
#endif

// An interleaved row of n pairs expanded into c2 and s2, 2n values each (InterleavedRowLanes),
// for the loops that read the row from memory. As a scalar loop it took a third as long as
// rotating 8 heads of 64 with the row in registers (Zen 4, f32).
HWY_INLINE void ExpandInterleavedRow(const float* c, const float* s, std::int64_t n, float* c2,
                                     float* s2) {
  std::int64_t j = 0;
#if POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE
  const hn::ScalableTag<float> d;
  if constexpr (hn::MaxLanes(d) >= 4 && hn::MaxLanes(d) <= 16) {
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
    for (; j + lanes <= 2 * n; j += lanes) {
      hn::Vec<decltype(d)> vc, vs;
      InterleavedRowLanes(d, c, s, j, vc, vs);
      hn::StoreU(vc, d, c2 + j);
      hn::StoreU(vs, d, s2 + j);
    }
  }
#endif
  for (; j < 2 * n; j += 2) {
    c2[j] = c2[j + 1] = c[j / 2];
    s2[j] = -s[j / 2];
    s2[j + 1] = s[j / 2];
  }
}

// A row's expanded form (ExpandInterleavedRow) for the loops that read it from memory, where the
// layout is interleaved: on the stack up to 256 pairs (head_dim 512), on the heap beyond; c2 and
// s2 are null for half-split rows.
struct InterleavedRowBuffer {
  InterleavedRowBuffer(Layout layout, const float* c, const float* s, std::int64_t pairs) {
    if (layout != Layout::kInterleaved || pairs == 0) return;
    const auto n = static_cast<std::size_t>(pairs);
    float* buffer = stack;
    if (4 * n > kStackFloats) {
      heap = std::make_unique<float[]>(4 * n);
      buffer = heap.get();
    }
    c2 = buffer;
    s2 = buffer + 2 * n;
    ExpandInterleavedRow(c, s, pairs, c2, s2);
  }
  static constexpr std::size_t kStackFloats = 1024;
  alignas(64) float stack[kStackFloats];
  std::unique_ptr<float[]> heap;
  float* c2 = nullptr;
  float* s2 = nullptr;
};

#if POSENC_FULL_VECTORS
// The rest of a loop over [i, end) that took full vectors: vectors of 8, 4 and 2 lanes (as far as
// they are narrower than the full ones), body(d, i) handling Lanes(d) units at i. A row shorter
// than a vector, or the end of one (partial rotary: GPT-NeoX-20B's 12 pairs go as 8 + 4 on
// AVX-512, StableLM's 10 as 8 + 2), then takes a few vector steps instead of a one-lane step per
// pair: with those, bf16 and f16 heads of 96 with 24 rotary dims ran at 0.16 and 0.27 of the
// in-place stream (Zen 4). Every width runs the same operations per lane: the same bits.
template <class Body>
HWY_INLINE void NarrowerVectors(std::int64_t& i, std::int64_t end, const Body& body) {
  constexpr std::size_t kFull = hn::MaxLanes(hn::ScalableTag<float>());
  auto run = [&](auto dn) {
    const auto step = static_cast<std::int64_t>(hn::Lanes(dn));
    for (; i + step <= end; i += step) body(dn, i);
  };
  if constexpr (kFull > 8) run(hn::CappedTag<float, 8>());
  if constexpr (kFull > 4) run(hn::CappedTag<float, 4>());
  if constexpr (kFull > 2) run(hn::CappedTag<float, 2>());
}
#endif

#if POSENC_FULL_VECTORS && !HWY_HAVE_SCALABLE
// Calls f(std::integral_constant<std::size_t, k>{}) where pairs = k * lanes with k one of kCounts:
// the rows the kernels keep in registers across a token's heads. Returns false, calling nothing,
// for other pair counts.
template <std::size_t... kCounts, class F>
HWY_INLINE bool WithRowVecs(std::int64_t pairs, F&& f) {
  constexpr auto kLanes = static_cast<std::int64_t>(hn::MaxLanes(hn::ScalableTag<float>()));
  if (pairs % kLanes != 0) return false;
  const std::int64_t k = pairs / kLanes;
  return ((k == static_cast<std::int64_t>(kCounts)
               ? (f(std::integral_constant<std::size_t, kCounts>{}), true)
               : false) ||
          ...);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_ROTATE_INL_H_
