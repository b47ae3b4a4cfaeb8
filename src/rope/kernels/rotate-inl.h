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

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>

#include "rope/kernels/rotate.h"

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

// Software prefetch of the cache lines kPrefetchAhead (rotate.h) bytes past [p, p + count): the rows a
// kernel walks next, when they continue in memory after this one (token-major tensors, packed
// qkv rows). The rotation touches a head's lines out of order (a pair's two dims are n apart, so
// a head of 8 lines is read 0 1 4 5 2 3 6 7), which the hardware's stream prefetchers follow late
// on a tensor that lives in DRAM: measured on a Sapphire-Rapids-class Xeon with a standalone loop
// over 64 MiB f32 in place, the rotation ran at 0.67-0.83 of the in-place stream without it and
// at 1.0-1.06 with it, for any distance from 2 to 8 KiB. 8 KiB because the fused kernel's token
// rows are long (Llama 2 7B f16: 24 KiB of q, k and v), where it measured about 5% above 4 KiB;
// the plain rotation did not move. A prefetch never faults, so an address past the end of the
// tensor costs a wasted line at most; the address is formed as an integer for that reason (no
// pointer arithmetic beyond the object).
template <class T>
HWY_INLINE void PrefetchAhead(const T* p, std::int64_t count) {
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(p) + kPrefetchAhead;
  const std::uintptr_t end = begin + static_cast<std::size_t>(count) * sizeof(T);
  for (std::uintptr_t line = begin & ~std::uintptr_t{63}; line < end; line += 64)
    hwy::Prefetch(reinterpret_cast<const char*>(line));
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_ROTATE_INL_H_
