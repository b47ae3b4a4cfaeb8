// The AVX-512 BF16 extension of the AVX3 target (avx512_bf16.h): plain intrinsics in functions
// compiled for AVX-512 F/BW/VL/DQ + BF16 by attribute, called (never inlined) from the AVX3
// kernels only after avx512_bf16_supported() said the CPU has them.
#include "rope/kernels/avx512_bf16.h"

#include <atomic>
#include <cstddef>
#include <cstring>

#include "rope/kernels/half.h"

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 flags the deliberately undefined pass-through operand of its own AVX-512 intrinsics
// (_mm512_undefined_epi32 in avx512fintrin.h) as maybe-uninitialized: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define POSENC_AVX512_BF16_BUILT 1
#define POSENC_AVX512_BF16_ATTR \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#else
#define POSENC_AVX512_BF16_BUILT 0
#endif

namespace posenc::detail {
namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> on{avx512_bf16_supported()};
  return on;
}

#if POSENC_AVX512_BF16_BUILT

// 16 bf16 -> float32, exact: each value's bits in the top half of a 32-bit lane.
POSENC_AVX512_BF16_ATTR inline __m512 Load16(const std::uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// half-inl.h's rounding in 32-bit lanes (the fallback for vectors holding a subnormal).
POSENC_AVX512_BF16_ATTR inline void Store16Software(__m512 y, std::uint16_t* p) {
  const __m512i bits = _mm512_castps_si512(y);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7FFF)), lsb);
  const __mmask16 nan = _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(bits, _mm512_set1_epi32(0x400000)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                      _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
}

// y0 -> p[0, 16), y1 -> p[16, 32), rounded to nearest even. VCVTNE2PS2BF16 flushes subnormal
// inputs to zero; everything else it rounds as the software does (avx512_bf16.h), so a vector
// with a subnormal lane (VFPCLASSPS class 0x20) takes the software rounding.
POSENC_AVX512_BF16_ATTR inline void Store32(__m512 y0, __m512 y1, std::uint16_t* p) {
  if ((_mm512_fpclass_ps_mask(y0, 0x20) | _mm512_fpclass_ps_mask(y1, 0x20)) == 0) {
    const __m512bh r = _mm512_cvtne2ps_pbh(y1, y0);
    __m512i bits;
    std::memcpy(&bits, &r, sizeof(bits));
    _mm512_storeu_si512(p, bits);
    return;
  }
  Store16Software(y0, p);
  Store16Software(y1, p + 16);
}

// rotate.cc's RotateHalfSplitHeadsInRegisters with this store: the row's kVecs vectors of c and
// s in registers for every head; per pair y_a = fmsub(a, c, b s), y_b = fmadd(b, c, a s), the
// operations of HalfSplitMath on AVX3 (Highway's MulSub and MulAdd are these FMAs).
template <int kVecs>
POSENC_AVX512_BF16_ATTR void RotateHeads(const TokenHeads& t) {
  constexpr std::int64_t n = 16 * kVecs;
  const auto* in = static_cast<const std::uint16_t*>(t.in);
  auto* out = static_cast<std::uint16_t*>(t.out);
  __m512 c[kVecs], s[kVecs];
  for (int k = 0; k < kVecs; ++k) {
    c[k] = _mm512_loadu_ps(t.c + 16 * k);
    s[k] = _mm512_loadu_ps(t.s + 16 * k);
  }
  const std::int64_t end = t.offset + 2 * n;
  for (std::int64_t h = 0; h < t.heads; ++h) {
    const std::uint16_t* hin = in + h * t.head_stride;
    std::uint16_t* hout = out + h * t.head_stride;
    prefetch_ahead(hin, t.head_dim);
    if (t.copy_rest) {  // out of place: the dims outside the rotated range as they are
      std::memcpy(hout, hin, static_cast<std::size_t>(t.offset) * sizeof(*hin));
      std::memcpy(hout + end, hin + end, static_cast<std::size_t>(t.head_dim - end) * sizeof(*hin));
    }
    const std::uint16_t* a = hin + t.offset;
    std::uint16_t* y = hout + t.offset;
#pragma GCC unroll 8
    for (int k = 0; k < kVecs; k += 2) {
      const __m512 a0 = Load16(a + 16 * k), a1 = Load16(a + 16 * (k + 1));
      const __m512 b0 = Load16(a + n + 16 * k), b1 = Load16(a + n + 16 * (k + 1));
      const __m512 ya0 = _mm512_fmsub_ps(a0, c[k], _mm512_mul_ps(b0, s[k]));
      const __m512 ya1 = _mm512_fmsub_ps(a1, c[k + 1], _mm512_mul_ps(b1, s[k + 1]));
      const __m512 yb0 = _mm512_fmadd_ps(b0, c[k], _mm512_mul_ps(a0, s[k]));
      const __m512 yb1 = _mm512_fmadd_ps(b1, c[k + 1], _mm512_mul_ps(a1, s[k + 1]));
      Store32(ya0, ya1, y + 16 * k);
      Store32(yb0, yb1, y + n + 16 * k);
    }
  }
}

POSENC_AVX512_BF16_ATTR void Scale(std::uint16_t* x, std::int64_t count, float scale) {
  const __m512 vs = _mm512_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    prefetch_ahead(x + i, 32);
    Store32(_mm512_mul_ps(Load16(x + i), vs), _mm512_mul_ps(Load16(x + i + 16), vs), x + i);
  }
  for (; i < count; ++i) x[i] = bf16_from_f32(f32_from_bf16(x[i]) * scale);
}

#endif  // POSENC_AVX512_BF16_BUILT

}  // namespace

bool avx512_bf16_supported() {
#if POSENC_AVX512_BF16_BUILT
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bf16");
  return yes;
#else
  return false;
#endif
}

bool avx512_bf16_enabled() { return enabled_flag().load(std::memory_order_relaxed); }

void set_avx512_bf16_enabled(bool on) {
  enabled_flag().store(on && avx512_bf16_supported(), std::memory_order_relaxed);
}

bool rotate_bf16_heads_avx512_bf16([[maybe_unused]] const TokenHeads& t) {
#if POSENC_AVX512_BF16_BUILT
  if (!avx512_bf16_enabled() || t.dtype != DType::kBF16 || t.layout != Layout::kHalfSplit)
    return false;
  switch (t.pairs) {
    case 32:
      RotateHeads<2>(t);
      return true;
    case 64:
      RotateHeads<4>(t);
      return true;
    case 128:
      RotateHeads<8>(t);
      return true;
    default:
      return false;
  }
#else
  return false;
#endif
}

bool scale_bf16_avx512_bf16([[maybe_unused]] std::uint16_t* x, [[maybe_unused]] std::int64_t count,
                            [[maybe_unused]] float scale) {
#if POSENC_AVX512_BF16_BUILT
  if (!avx512_bf16_enabled()) return false;
  Scale(x, count, scale);
  return true;
#else
  return false;
#endif
}

}  // namespace posenc::detail
