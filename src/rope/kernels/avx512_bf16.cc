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

// 32 consecutive bf16 -> float32 in even/odd form, exact: `even` holds elements 0, 2, ..., 30
// (each low half shifted up), `odd` elements 1, 3, ..., 31 (each high half masked in place). Two
// single-cycle ops for 32 elements, no widening shuffle (vpmovzxwd runs on port 5 only, which
// the stores below need).
POSENC_AVX512_BF16_ATTR inline void Load32EvenOdd(const std::uint16_t* p, __m512& even,
                                                  __m512& odd) {
  const __m512i x = _mm512_loadu_si512(p);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(-65536)));  // 0xFFFF0000
}

// Word j of the interleaved result takes word kInterleave[j] of VCVTNE2PS2BF16(odd, even), whose
// words 0..15 are the even elements and 16..31 the odd ones.
alignas(64) constexpr std::uint16_t kInterleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                       21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                       11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

// The stores' fallback where a lane is subnormal: even[l] and odd[l] rounded to bf16 in software
// into p[2 l] and p[2 l + 1].
inline void InterleaveInSoftware(const float* even, const float* odd, int lanes, std::uint16_t* p) {
  for (int l = 0; l < lanes; ++l) {
    p[2 * l] = bf16_from_f32(even[l]);
    p[2 * l + 1] = bf16_from_f32(odd[l]);
  }
}

// The even and odd results back to 32 consecutive bf16, rounded to nearest even. VCVTNE2PS2BF16
// flushes subnormal inputs to zero and rounds everything else as the software does
// (avx512_bf16.h). A normal float never rounds to a bf16 zero, so a vector whose output has no
// zero word holds no subnormal: one VPTESTNMW instead of a class test of both inputs. Where a
// word is zero (a zero result, or a flushed subnormal) the inputs are classified, and a pair of
// vectors holding a subnormal is rounded in software, element by element.
POSENC_AVX512_BF16_ATTR inline void Store32EvenOdd(__m512 even, __m512 odd, std::uint16_t* p) {
  const __m512bh r = _mm512_cvtne2ps_pbh(odd, even);
  __m512i words;
  std::memcpy(&words, &r, sizeof(words));
  words = _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), words);
  if (_mm512_testn_epi16_mask(words, _mm512_set1_epi16(0x7FFF)) != 0 &&
      (_mm512_fpclass_ps_mask(even, 0x20) | _mm512_fpclass_ps_mask(odd, 0x20)) != 0) {
    alignas(64) float e[16], o[16];
    _mm512_store_ps(e, even);
    _mm512_store_ps(o, odd);
    InterleaveInSoftware(e, o, 16, p);
    return;
  }
  _mm512_storeu_si512(p, words);
}

// The same three for 16 elements in 256-bit vectors (AVX-512 VL), for a half-split row's last 16
// pairs where the row is not a whole number of 32-pair blocks (head_dim 96: 48 pairs).
POSENC_AVX512_BF16_ATTR inline void Load16EvenOdd(const std::uint16_t* p, __m256& even,
                                                  __m256& odd) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  even = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  odd = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(-65536)));
}

alignas(32) constexpr std::uint16_t kInterleave16[16] = {0, 8,  1, 9,  2, 10, 3, 11,
                                                         4, 12, 5, 13, 6, 14, 7, 15};

POSENC_AVX512_BF16_ATTR inline void Store16EvenOdd(__m256 even, __m256 odd, std::uint16_t* p) {
  const __m256bh r = _mm256_cvtne2ps_pbh(odd, even);
  __m256i words;
  std::memcpy(&words, &r, sizeof(words));
  words = _mm256_permutexvar_epi16(
      _mm256_load_si256(reinterpret_cast<const __m256i*>(kInterleave16)), words);
  if (_mm256_testn_epi16_mask(words, _mm256_set1_epi16(0x7FFF)) != 0 &&
      (_mm256_fpclass_ps_mask(even, 0x20) | _mm256_fpclass_ps_mask(odd, 0x20)) != 0) {
    alignas(32) float e[8], o[8];
    _mm256_store_ps(e, even);
    _mm256_store_ps(o, odd);
    InterleaveInSoftware(e, o, 8, p);
    return;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), words);
}

// The even or odd elements of 16 consecutive floats.
POSENC_AVX512_BF16_ATTR inline __m256 Deinterleave8(const float* p, int parity) {
  alignas(32) static constexpr std::int32_t kEven[8] = {0, 2, 4, 6, 8, 10, 12, 14};
  const __m256i idx = _mm256_add_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(kEven)),
                                       _mm256_set1_epi32(parity));
  return _mm256_permutex2var_ps(_mm256_loadu_ps(p), idx, _mm256_loadu_ps(p + 8));
}

// The even or odd elements of 32 consecutive floats (a cos/sin row in the loads' order).
POSENC_AVX512_BF16_ATTR inline __m512 Deinterleave(const float* p, int parity) {
  alignas(64) static constexpr std::int32_t kEven[16] = {0,  2,  4,  6,  8,  10, 12, 14,
                                                         16, 18, 20, 22, 24, 26, 28, 30};
  const __m512i idx = _mm512_add_epi32(_mm512_load_si512(kEven), _mm512_set1_epi32(parity));
  return _mm512_permutex2var_ps(_mm512_loadu_ps(p), idx, _mm512_loadu_ps(p + 16));
}

// rotate.cc's rows-in-registers kernels with these loads and stores; per pair y_a = fmsub(a, c,
// b s), y_b = fmadd(b, c, a s), each element meeting its own c_i and s_i:
//  - half-split (kInterleaved false): the row, deinterleaved into even and odd pairs once per
//    token, stays in registers (kBlocks blocks of 32 pairs, four vectors each) for every head:
//    the operations of HalfSplitMath on AVX3 (Highway's MulSub and MulAdd are these FMAs);
//  - interleaved pairs (x[2i], x[2i + 1]): Load32EvenOdd's even and odd elements are the pairs' a
//    and b, so the row's c_i and s_i serve as they are; kBlocks blocks of 16 pairs, two vectors
//    each. rotate.cc's InterleavedMath is fma(a, c, b (-s)) and fma(b, c, a s): the same
//    products (negation is exact) and the same single rounding of each sum. Before this path,
//    bf16 heads of 128 went through Highway's interleaved code with bf16 rounded in software, at
//    0.41-0.45 of the in-place stream (Zen 4).
// So the same bits as rotate.cc in both layouts.
// kHalf (half-split only): 16 more pairs after the blocks, in 256-bit vectors (Load16EvenOdd).
//
// A run of tokens (rotate.h's TokenBlock: token k's heads at t.in + k in_stride and t.out + k
// out_stride, its row c[k], s[k]; one token: rotate_bf16_heads_avx512_bf16) in one call, the
// head loop's fields in registers. One call per token (its checks, the pair-count dispatch, this
// function's prologue, the fields reloaded after every store) cost 14-23% of the time at 8 or 16
// heads a token (5-8% at 8 of 256): `posenc bench`, 8 MiB tensors with a table, the two binaries in turn, three
// rounds (Zen 4): 8 heads of 128 381-393 -> 300-304 us (0.46-0.49 -> 0.61-0.63 of the in-place
// stream), interleaved 330-332 -> 282-290 us, 16 heads of 64 332-341 -> 284-286 us, 8 heads of
// 256 300-301 -> 277-285 us.
template <bool kInterleaved, int kBlocks, bool kHalf = false>
POSENC_AVX512_BF16_ATTR void RotateHeads(const TokenHeads& t, std::int64_t tokens,
                                         std::int64_t in_stride, std::int64_t out_stride,
                                         const float* const* cs, const float* const* ss) {
  static_assert(!(kInterleaved && kHalf), "interleaved rows are whole blocks");
  constexpr std::int64_t kDims =
      kInterleaved ? 32 * kBlocks : 64 * kBlocks + (kHalf ? 32 : 0);  // rotated dims
  constexpr std::int64_t n = kDims / 2;
  const auto* const in0 = static_cast<const std::uint16_t*>(t.in);
  auto* const out0 = static_cast<std::uint16_t*>(t.out);
  const std::int64_t heads = t.heads, head_stride = t.head_stride, head_dim = t.head_dim;
  const std::int64_t offset = t.offset, end = offset + kDims;
  const bool copy_rest = t.copy_rest, prefetch = t.prefetch;
  for (std::int64_t token = 0; token < tokens; ++token) {
    const std::uint16_t* const in = in0 + token * in_stride;
    std::uint16_t* const out = out0 + token * out_stride;
    const float* const c = cs[token];
    const float* const s = ss[token];
    // Half-split: ce, co, se, so (c and s, even and odd pairs); interleaved: ce, so (c_i, s_i).
    // The arrays have one more entry than used when kBlocks is 0 (a zero-length array is not
    // C++).
    __m512 ce[kBlocks + 1], co[kBlocks + 1], se[kBlocks + 1], so[kBlocks + 1];
    __m256 hce, hco, hse, hso;  // the half block's, kHalf only
    if constexpr (kHalf) {
      hce = Deinterleave8(c + 32 * kBlocks, 0);
      hco = Deinterleave8(c + 32 * kBlocks, 1);
      hse = Deinterleave8(s + 32 * kBlocks, 0);
      hso = Deinterleave8(s + 32 * kBlocks, 1);
    }
    for (int k = 0; k < kBlocks; ++k) {
      if constexpr (kInterleaved) {
        ce[k] = _mm512_loadu_ps(c + 16 * k);
        so[k] = _mm512_loadu_ps(s + 16 * k);
      } else {
        ce[k] = Deinterleave(c + 32 * k, 0);
        co[k] = Deinterleave(c + 32 * k, 1);
        se[k] = Deinterleave(s + 32 * k, 0);
        so[k] = Deinterleave(s + 32 * k, 1);
      }
    }
    // Out of place, the dims outside the rotated range as they are, every head's before the
    // rotation: a memcpy call inside the loop below made GCC keep the row in stack slots across
    // it and reload it for every multiply (interleaved 64-token decode, 8 kv heads: 42-54 us
    // against 34-46).
    if (copy_rest) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::uint16_t* hin = in + h * head_stride;
        std::uint16_t* hout = out + h * head_stride;
        std::memcpy(hout, hin, static_cast<std::size_t>(offset) * sizeof(*hin));
        std::memcpy(hout + end, hin + end, static_cast<std::size_t>(head_dim - end) * sizeof(*hin));
      }
    }
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::uint16_t* hin = in + h * head_stride;
      std::uint16_t* hout = out + h * head_stride;
      if (prefetch) prefetch_ahead(hin, head_dim);
      const std::uint16_t* a = hin + offset;
      std::uint16_t* y = hout + offset;
      if constexpr (kInterleaved) {
#pragma GCC unroll 8
        for (int k = 0; k < kBlocks; ++k) {
          __m512 xa, xb;
          Load32EvenOdd(a + 32 * k, xa, xb);
          const __m512 ya = _mm512_fmsub_ps(xa, ce[k], _mm512_mul_ps(xb, so[k]));
          const __m512 yb = _mm512_fmadd_ps(xb, ce[k], _mm512_mul_ps(xa, so[k]));
          Store32EvenOdd(ya, yb, y + 32 * k);
        }
      } else {
#pragma GCC unroll 4
        for (int k = 0; k < kBlocks; ++k) {
          __m512 ae, ao, be, bo;
          Load32EvenOdd(a + 32 * k, ae, ao);
          Load32EvenOdd(a + n + 32 * k, be, bo);
          const __m512 yae = _mm512_fmsub_ps(ae, ce[k], _mm512_mul_ps(be, se[k]));
          const __m512 yao = _mm512_fmsub_ps(ao, co[k], _mm512_mul_ps(bo, so[k]));
          const __m512 ybe = _mm512_fmadd_ps(be, ce[k], _mm512_mul_ps(ae, se[k]));
          const __m512 ybo = _mm512_fmadd_ps(bo, co[k], _mm512_mul_ps(ao, so[k]));
          Store32EvenOdd(yae, yao, y + 32 * k);
          Store32EvenOdd(ybe, ybo, y + n + 32 * k);
        }
        if constexpr (kHalf) {
          constexpr std::int64_t h0 = 32 * kBlocks;
          __m256 ae, ao, be, bo;
          Load16EvenOdd(a + h0, ae, ao);
          Load16EvenOdd(a + n + h0, be, bo);
          Store16EvenOdd(_mm256_fmsub_ps(ae, hce, _mm256_mul_ps(be, hse)),
                         _mm256_fmsub_ps(ao, hco, _mm256_mul_ps(bo, hso)), y + h0);
          Store16EvenOdd(_mm256_fmadd_ps(be, hce, _mm256_mul_ps(ae, hse)),
                         _mm256_fmadd_ps(bo, hco, _mm256_mul_ps(ao, hso)), y + n + h0);
        }
      }
    }
  }
}

// RotateHeads for the pair counts it has, in units of 16 pairs (k): interleaved, 1 to 6 or 8
// blocks of 16 pairs (head_dim 32 to 192, 256); half-split, k / 2 blocks of 32 pairs and a half
// block where k is odd, 16 to 128 pairs (head_dim 32 to 256: 96, Phi-3's, is a block and a
// half). False for other counts.
template <bool kInterleaved, int kUnits, class... Run>
POSENC_AVX512_BF16_ATTR void RotateHeadsOfUnits(const TokenHeads& t, const Run&... run) {
  if constexpr (kInterleaved) {
    RotateHeads<true, kUnits>(t, run...);
  } else {
    RotateHeads<false, kUnits / 2, kUnits % 2 == 1>(t, run...);
  }
}

template <bool kInterleaved, int... kUnits, class... Run>
POSENC_AVX512_BF16_ATTR bool RotateHeadsOf(const TokenHeads& t, const Run&... run) {
  if (t.pairs % 16 != 0) return false;
  const std::int64_t units = t.pairs / 16;
  return ((units == kUnits ? (RotateHeadsOfUnits<kInterleaved, kUnits>(t, run...), true) : false) ||
          ...);
}

// RotateHeadsOf for the layout's counts (rotate_bf16_heads_avx512_bf16 says which).
POSENC_AVX512_BF16_ATTR bool RotateTokens(const TokenHeads& t, std::int64_t tokens,
                                          std::int64_t in_stride, std::int64_t out_stride,
                                          const float* const* cs, const float* const* ss) {
  return t.layout == Layout::kInterleaved
             ? RotateHeadsOf<true, 1, 2, 3, 4, 5, 6, 8>(t, tokens, in_stride, out_stride, cs, ss)
             : RotateHeadsOf<false, 1, 2, 3, 4, 5, 6, 7, 8>(t, tokens, in_stride, out_stride, cs,
                                                            ss);
}

POSENC_AVX512_BF16_ATTR void Scale(std::uint16_t* x, std::int64_t count, float scale,
                                   bool prefetch) {
  const __m512 vs = _mm512_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    if (prefetch) prefetch_ahead(x + i, 32);
    __m512 even, odd;
    Load32EvenOdd(x + i, even, odd);
    Store32EvenOdd(_mm512_mul_ps(even, vs), _mm512_mul_ps(odd, vs), x + i);
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

bool avx512_vbmi_enabled() {
#if POSENC_AVX512_BF16_BUILT
  static const bool vbmi = __builtin_cpu_supports("avx512vbmi");
  return vbmi && avx512_bf16_enabled();
#else
  return false;
#endif
}

void set_avx512_bf16_enabled(bool on) {
  enabled_flag().store(on && avx512_bf16_supported(), std::memory_order_relaxed);
}

bool rotate_bf16_heads_avx512_bf16([[maybe_unused]] const TokenHeads& t) {
#if POSENC_AVX512_BF16_BUILT
  if (!avx512_bf16_enabled() || t.dtype != DType::kBF16) return false;
  return RotateTokens(t, 1, 0, 0, &t.c, &t.s);
#else
  return false;
#endif
}

bool rotate_bf16_block_avx512_bf16([[maybe_unused]] const TokenBlock& b) {
#if POSENC_AVX512_BF16_BUILT
  if (!avx512_bf16_enabled() || b.heads.dtype != DType::kBF16) return false;
  return RotateTokens(b.heads, b.tokens, b.in_token_stride, b.out_token_stride, b.c, b.s);
#else
  return false;
#endif
}

bool scale_bf16_avx512_bf16([[maybe_unused]] std::uint16_t* x, [[maybe_unused]] std::int64_t count,
                            [[maybe_unused]] float scale, [[maybe_unused]] bool prefetch) {
#if POSENC_AVX512_BF16_BUILT
  if (!avx512_bf16_enabled()) return false;
  Scale(x, count, scale, prefetch);
  return true;
#else
  return false;
#endif
}

}  // namespace posenc::detail
