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
#include <type_traits>

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
