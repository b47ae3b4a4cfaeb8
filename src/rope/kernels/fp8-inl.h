// src/rope/kernels/fp8-inl.h: float32, bf16 and f16 lanes rounded to OCP E4M3 (torch's
// float8_e4m3fn bits) for the fused KV-cache append's fp8 caches (internal). Included once per
// target after foreach_target.h, like half-inl.h: round to nearest even, saturate to +-448
// (infinities too), NaN kept NaN. The reference these are tested against, bit for bit over every
// bf16 and f16 pattern and every E4M3 midpoint: tests/reference/fp8_reference.h.

// Per-target include guard: re-entered once for each HWY_TARGET_TOGGLE.
#if defined(POSENC_KERNELS_FP8_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_FP8_INL_H_
#undef POSENC_KERNELS_FP8_INL_H_
#else
#define POSENC_KERNELS_FP8_INL_H_
#endif

#include <hwy/highway.h>

#include <bit>
#include <cstdint>
#include <type_traits>

#include "rope/kernels/avx512_bf16.h"
#include "rope/kernels/half-inl.h"
#include "rope/kernels/half.h"
#include "rope/kernels/kv_cache_kernel.h"
#include "rope/kernels/rotate.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// float32 -> E4M3: saturate |x| to 448 (infinities too), keep NaN (0x7F), round to nearest even:
// below 2^-6 by adding 2^14 (its float32 ulp is 2^-9, the E4M3 subnormal step) and letting the FPU
// round; above by torch's fp8e4m3fn_from_fp32_value (re-bias by (7 - 127) << 23, round on the
// 20 dropped bits).
template <class D>
HWY_INLINE void StoreFp8(D d, hn::Vec<D> v, std::uint8_t* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<std::uint8_t, D> du8;
  const auto bits = hn::BitCast(du, v);
  const auto sign = hn::ShiftRight<24>(hn::And(bits, hn::Set(du, 0x80000000u)));
  const auto abs_bits = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
  const auto ai = hn::BitCast(di, abs_bits);  // non-negative: signed compares are safe
  const auto is_nan = hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x7F800000)));
  // Saturate with one float min (NaN lanes get 448 on x86, anything elsewhere: replaced below).
  const auto a = hn::BitCast(du, hn::Min(hn::BitCast(d, abs_bits), hn::Set(d, 448.0f)));
  const auto small = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, a), hn::Set(d, 16384.0f))),
                             hn::Set(du, 141u << 23));
  const auto odd = hn::And(hn::ShiftRight<20>(a), hn::Set(du, 1u));
  const auto normal = hn::ShiftRight<20>(hn::Add(hn::Add(a, hn::Set(du, 0xC407FFFFu)), odd));
  auto mag = hn::IfThenElse(hn::RebindMask(du, hn::Lt(hn::BitCast(di, a), hn::Set(di, 121 << 23))),
                            small, normal);
  mag = hn::IfThenElse(is_nan, hn::Set(du, 0x7Fu), mag);
  hn::StoreU(hn::DemoteTo(du8, hn::BitCast(di, hn::Or(mag, sign))), du8, p);
}

// v / scale as E4M3 at p: with a power-of-two scale multiplied by its exact reciprocal inv
// (kv_cache_kernel.h's exact_inverse: the same correctly rounded quotient as the division, at a
// fraction of vdivps' throughput cost), else divided (inv 0). The float path of every fp8 store.
template <class D>
HWY_INLINE void StoreFp8Scaled(D d, hn::Vec<D> v, float scale, float inv, std::uint8_t* p) {
  StoreFp8(d, inv != 0.0f ? hn::Mul(v, hn::Set(d, inv)) : hn::Div(v, hn::Set(d, scale)), p);
}

// 32 bf16 words -> 32 E4M3 bytes by the float path: each word widened to float32 (exact), then
// kv_cache-inl.h's StoreCache operations (multiplied by an exact inverse, else divided; StoreFp8).
// On every target: make_bf16_fp8_map makes its tables with it.
inline HWY_NOINLINE void Bf16ToFp8ByFloat(const std::uint16_t* words, float scale, float inv,
                                          std::uint8_t* out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du32;
  const hn::Rebind<std::uint16_t, decltype(d)> du16;
  const auto lanes = hn::Lanes(d);
  for (std::size_t i = 0; i < 32; i += lanes) {
    const auto v =
        hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, words + i))));
    StoreFp8Scaled(d, v, scale, inv, out + i);
  }
}

// `count` floats (a multiple of 16) -> E4M3 bytes by StoreCache's operations: make_f16_fp8_map's
// codes at its anchor.
inline HWY_NOINLINE void FloatsToFp8ByFloat(const float* v, std::int64_t count, float scale,
                                            float inv, std::uint8_t* out) {
  const hn::CappedTag<float, 16> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t i = 0; i < count; i += lanes) {
    const auto x = hn::LoadU(d, v + i);
    StoreFp8Scaled(d, x, scale, inv, out + i);
  }
}

// 32 f16 words -> 32 E4M3 bytes by the float path: each word widened to float32 (exact,
// half-inl.h's LoadF32), then StoreCache's operations.
inline HWY_NOINLINE void F16ToFp8ByFloat(const std::uint16_t* words, float scale, float inv,
                                         std::uint8_t* out) {
  const hn::CappedTag<float, 16> d;
  const auto lanes = hn::Lanes(d);
  for (std::size_t i = 0; i < 32; i += lanes) {
    const auto v = LoadF32(F16Tag(), d, words + i);
    StoreFp8Scaled(d, v, scale, inv, out + i);
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// bf16 into an fp8 cache on AVX-512, 32 values at a time in 16-bit lanes without widening to
// float32, in one of two ways: a power-of-two scale by rounding the bits (StoreBf16AsFp8Shifted),
// any other scale in [2^-119, 2^127) by the scale's table (StoreBf16AsFp8ByTable); elsewhere the
// float path. StoreBf16AsFp8 picks the one its Bf16Fp8Tables were made for.
//
// bf16 into an fp8 cache whose scale is a power of two, 2^-s with |s| <= kMaxBf16Fp8Shift, on
// AVX-512 (variable 16-bit shifts): the value v * 2^s of each bf16 rounded to E4M3 in 16-bit
// lanes, 32 at a time, without widening to float32 (StoreFp8 takes about 15 operations per 16
// lanes; this about 10 per 32 where every lane is normal in E4M3 and below its saturation, about
// 30 where one is not).
// The same bits as StoreFp8 of the float32 product v * 2^s: where that product is inexact it
// under- or overflows float32, and both then round to 0 or saturate to 448; elsewhere both
// round the same real number to nearest even:
//   a = |x| bits (exponent E, 7 mantissa bits); the E4M3 exponent is E - 120 + s.
//   normal (E - 120 + s >= 1): round a to 3 mantissa bits (+7 + the kept lsb, >> 4; a carry
//     bumps the exponent), re-bias by (120 - s) << 3, saturate at 0x7E (448; infinities too);
//   subnormal: the significand M = 1.m in 8 bits shifted right by k = 125 - s - E >= 5 with
//     round to nearest even (k clamped to 15: M < 2^8 shifted by 15 or more rounds to 0, as does
//     a bf16 zero or subnormal, whose wrong implicit bit cannot matter for s <= 109);
//   NaN: 0x7F; the sign bit on top of all of it.
inline constexpr int kMaxBf16Fp8Shift = 100;

// s where inv = 2^s exactly and |s| <= kMaxBf16Fp8Shift; false otherwise (the float path).
// From the bits (a libm frexp per head was 2% of a 64-token decode): a positive normal power
// of two has no mantissa bits; subnormal ones are below 2^-126, outside the range anyway.
inline bool Bf16Fp8Shift(float inv, int& s) {
  const auto bits = std::bit_cast<std::uint32_t>(inv);
  const auto exponent = static_cast<int>(bits >> 23);  // the sign bit makes it > 255
  if ((bits & 0x7FFFFFu) != 0 || exponent < 1 || exponent > 254) return false;
  s = exponent - 127;
  return s >= -kMaxBf16Fp8Shift && s <= kMaxBf16Fp8Shift;
}

// The low byte of each of 32 words: one VPMOVWB. Highway's TruncateTo compiles to a VPSHUFB and a
// VPERMD, and GCC re-broadcast the VPSHUFB's control vector on every iteration as well.
HWY_INLINE hn::Vec<hn::Rebind<std::uint8_t, hn::ScalableTag<std::uint16_t>>> LowBytes(
    hn::Vec<hn::ScalableTag<std::uint16_t>> w) {
  static_assert(hn::MaxLanes(hn::ScalableTag<std::uint16_t>()) == 32, "512-bit vectors");
  return hn::Vec<hn::Rebind<std::uint8_t, hn::ScalableTag<std::uint16_t>>>{
      _mm512_cvtepi16_epi8(w.raw)};
}

using Fp8Codes = hn::Vec<hn::Rebind<std::uint8_t, hn::ScalableTag<std::uint16_t>>>;

// 32 E4M3 codes with the signs of the 32 words of x: bit 15 of each word into bit 7 of its byte
// by a bitwise select (VPTERNLOG, sign_byte 0x80 in each word) over `mag` (at most 0x7F).
HWY_INLINE Fp8Codes SignedCodes(hn::Vec<hn::ScalableTag<std::uint16_t>> x,
                                hn::Vec<hn::ScalableTag<std::uint16_t>> mag,
                                hn::Vec<hn::ScalableTag<std::uint16_t>> sign_byte) {
  return LowBytes(hn::IfVecThenElse(sign_byte, hn::ShiftRight<8>(x), mag));
}

// The 32 codes of x's words by a float path (Bf16ToFp8ByFloat or F16ToFp8ByFloat), for vectors
// the 16-bit lanes do not cover.
HWY_INLINE Fp8Codes CodesByFloat(hn::Vec<hn::ScalableTag<std::uint16_t>> x, float scale, float inv,
                                 void (*by_float)(const std::uint16_t*, float, float,
                                                  std::uint8_t*)) {
  alignas(64) std::uint16_t words[32];
  alignas(32) std::uint8_t out[32];
  hn::Store(x, hn::ScalableTag<std::uint16_t>(), words);
  by_float(words, scale, inv, out);
  return hn::Load(hn::Rebind<std::uint8_t, hn::ScalableTag<std::uint16_t>>(), out);
}

// 32 codes to p: with kStream a streaming store (p aligned to 32 bytes), else a plain one.
template <bool kStream>
HWY_INLINE void StoreFp8Codes(Fp8Codes bytes, std::uint8_t* p) {
  const hn::Rebind<std::uint8_t, hn::ScalableTag<std::uint16_t>> d8;
  if constexpr (kStream) {
    hn::Stream(bytes, d8, p);
  } else {
    hn::StoreU(bytes, d8, p);
  }
}

// Bf16Fp8Tables::shift where the scale is not a power of two in range.
inline constexpr int kNoBf16Fp8Shift = 1 << 20;

// Whether StoreBf16AsFp8 can take this scale: a power of two in range, or a table.
inline bool Bf16Fp8In16Bits(const CacheScale& cs) {
  int s = 0;
  return Bf16Fp8Shift(cs.inv, s) || cs.bf16 != nullptr;
}

// What StoreBf16AsFp8 needs of a scale, made once per loop: the power of two's shift, or else
// the scale's Bf16Fp8Map in registers (words 0-31, 32-63, 64-95, 96-127), both paths'
// constants, and the scale for the float path. Once per loop because the stores go through
// uint8_t pointers, which may alias the map, so a table read inside the loop would be reloaded on
// every iteration; and constants made inside the functions GCC broadcast again on every one (the
// constructor keeps them out of its sight).
struct Bf16Fp8Tables {
  explicit Bf16Fp8Tables(const CacheScale& cs) : scale(cs.scale), inv(cs.inv) {
    // Opaque to the optimiser: seeing constants, GCC 12 re-made some of them inside the loops
    // from general registers (a MOV and a VPBROADCASTW or VPBROADCASTQ each, every 32 values:
    // the shifted path's two, the table path's max_code and sign_byte) rather than keep them.
    asm(""
        : "+v"(bit6), "+v"(exponent8), "+v"(seven), "+v"(max_code), "+v"(sign_byte), "+v"(bit4),
          "+v"(one));
    if (Bf16Fp8Shift(cs.inv, shift)) return;
    shift = kNoBf16Fp8Shift;
    w0 = _mm512_load_si512(cs.bf16->words);
    w1 = _mm512_load_si512(cs.bf16->words + 32);
    w2 = _mm512_load_si512(cs.bf16->words + 64);
    w3 = _mm512_load_si512(cs.bf16->words + 96);
  }
  int shift = kNoBf16Fp8Shift;
  __m512i w0 = _mm512_setzero_si512(), w1 = w0, w2 = w0, w3 = w0;
  __m512i bit6 = _mm512_set1_epi16(0x40);
  __m512i exponent8 = _mm512_set1_epi16(0x7F8);
  __m512i seven = _mm512_set1_epi16(7);
  __m512i max_code = _mm512_set1_epi16(0x7E);
  __m512i sign_byte = _mm512_set1_epi16(0x80);
  __m512i bit4 = _mm512_set1_epi16(0x10);  // the shifted path's rounding (lsb) bit
  __m512i one = _mm512_set1_epi16(1);
  float scale, inv;
};

// The scale's table (Bf16Fp8Map, kv_cache_kernel.h, which derives it): the code of a bf16 magnitude
// a is t = 8 E + words[a & 0x7F], E = a >> 7, looked up by two two-table word permutes (VPERMI2W,
// whose index is a's low 6 bits; bit 6 picks the pair) and saturated by a min; the sign bit on
// top. A vector with a lane the table does not cover (t < 8, or an infinity or NaN) goes through
// the float path (Bf16ToFp8ByFloat). About 14 operations per 32 values where the table covers
// every lane, three of them shuffles (the power-of-two path has one); the float path's division
// alone takes about as long as all of them. A fused append of bf16 into fp8 with the scale 0.0123
// took 1.9 to 3.2 times as long as with 1/64 before this path, and 1.02 to 1.13 times with it
// (Zen 4, the two binaries in turn; docs/kernel-log.md, session 24).
//
// 32 bf16 words (one AVX-512 vector) -> 32 E4M3 bytes at p, the same bits as the float path; with
// kStream a streaming store, p aligned to 32 bytes.
template <bool kStream = false>
HWY_INLINE void StoreBf16AsFp8ByTable(hn::Vec<hn::ScalableTag<std::uint16_t>> x,
                                      const Bf16Fp8Tables& tab, std::uint8_t* p) {
  const hn::ScalableTag<std::uint16_t> du;
  const __m512i xi = x.raw;
  // words[m]: the permutes read bits 0-5 of each index word, bit 6 chooses between them.
  const __m512i look = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(xi, tab.bit6),
                                               _mm512_permutex2var_epi16(tab.w0, xi, tab.w1),
                                               _mm512_permutex2var_epi16(tab.w2, xi, tab.w3));
  // 8 E: (x >> 4) & 0x7F8 (the sign bit lands in bit 11, outside the mask); E < 255, no infinity
  // or NaN, where it is below 0x7F8.
  const __m512i e8 = _mm512_and_si512(_mm512_srli_epi16(xi, 4), tab.exponent8);
  const __m512i t = _mm512_add_epi16(e8, look);
  const __mmask32 covered =
      _mm512_mask_cmplt_epi16_mask(_mm512_cmpgt_epi16_mask(t, tab.seven), e8, tab.exponent8);
  // Else zeros, bf16 subnormals, E4M3 subnormal results, infinities and NaNs: for uniform values
  // in [-1, 1) at scale 1/64, one vector of 32 in about 130; zeros take that way.
  StoreFp8Codes<kStream>(
      HWY_LIKELY(covered == 0xFFFFFFFFu)
          ? SignedCodes(x, hn::Vec<decltype(du)>{_mm512_min_epi16(t, tab.max_code)},
                        hn::Vec<decltype(du)>{tab.sign_byte})
          : CodesByFloat(x, tab.scale, tab.inv, Bf16ToFp8ByFloat),
      p);
}

// 32 bf16 words (one AVX-512 vector) -> 32 E4M3 bytes at p for the scale 2^-s (tab.shift); with
// kStream a streaming store, p aligned to 32 bytes.
template <bool kStream = false>
HWY_INLINE void StoreBf16AsFp8Shifted(hn::Vec<hn::ScalableTag<std::uint16_t>> x,
                                      const Bf16Fp8Tables& tab, std::uint8_t* p) {
  const int s = tab.shift;
  const hn::ScalableTag<std::uint16_t> du;
  const hn::ScalableTag<std::int16_t> di;
  const auto a = hn::And(x, hn::Set(du, 0x7FFF));
  // Normal in E4M3: E > 120 - s, i.e. a >= (121 - s) << 7 (a is non-negative, signed compares
  // are safe; |s| <= 100 keeps every constant in int16).
  const auto is_normal =
      hn::Gt(hn::BitCast(di, a), hn::Set(di, static_cast<std::int16_t>((121 - s) * 128 - 1)));
  // Rounded to 3 mantissa bits and re-biased in one sum: (a + 7 + lsb - ((120 - s) << 7)) >> 4
  // is ((a + 7 + lsb) >> 4) - (120 - s) * 8, the subtrahend a multiple of 16. Where the lane is
  // normal the sum is in [128, 2^15 + 8), so the 16-bit wrap-around of the constant cancels;
  // elsewhere the result is not used.
  const auto bias = hn::Set(du, static_cast<std::uint16_t>(7 - (120 - s) * 128));
  const auto sign_mask = hn::Set(du, 0x80);  // SignedCodes' select
  // Below E4M3's saturation: a < 16 (0x7E + (120 - s) 8) + 8 gives (a + 7 + lsb) >> 4 at most
  // 0x7E + (120 - s) 8, so no min is needed (at most 16 * 1886 + 8, in int16 for |s| <= 100).
  const auto unsaturated = hn::Lt(
      hn::BitCast(di, a), hn::Set(di, static_cast<std::int16_t>(16 * (0x7E + (120 - s) * 8) + 8)));
  if (hn::AllTrue(di, hn::And(is_normal, unsaturated))) {
    // Every lane normal in E4M3 and below its saturation: the subnormal rounding below, most of the
    // operations, is skipped; the bits are the same either way. Values a cache holds are seldom
    // that small (below 2^-6 times the scale: for uniform values in [-1, 1) at scale 1/64, one
    // vector of 32 in about 130; zeros take the long way) or large (448 times the scale; the
    // scale is chosen so). In one process on Zen 5, medians of 21, this path on and off: Llama 2
    // 7B prefill into fp8 7.72 -> 7.04 ms, Llama 3 8B 2.63 -> 2.46 ms, the 64-token decodes about
    // 10% faster. The lsb is added by a masked add on a test of bit 4 (two operations, not three),
    // and saturated, infinite and NaN lanes take the long way rather than a min and a blend here:
    // 8.4 -> 7.0 cycles per 32 values in a standalone loop without the blend (Zen 4; on AVX-512 a
    // 16-bit operation on a 512-bit vector takes two of its four vector pipes' slots).
    const __m512i sum = _mm512_add_epi16(a.raw, bias.raw);
    const hn::Vec<decltype(du)> rounded{
        _mm512_mask_add_epi16(sum, _mm512_test_epi16_mask(a.raw, tab.bit4), sum, tab.one)};
    StoreFp8Codes<kStream>(SignedCodes(x, hn::ShiftRight<4>(rounded), sign_mask), p);
    return;
  }
  const auto nan = hn::Gt(hn::BitCast(di, a), hn::Set(di, 0x7F80));
  const auto lsb = hn::And(hn::ShiftRight<4>(a), hn::Set(du, 1));
  const auto normal = hn::Min(hn::BitCast(di, hn::ShiftRight<4>(hn::Add(hn::Add(a, bias), lsb))),
                              hn::Set(di, 0x7E));
  const auto m = hn::Or(hn::And(a, hn::Set(du, 0x7F)), hn::Set(du, 0x80));
  const auto exponent = hn::BitCast(di, hn::ShiftRight<7>(a));
  const auto k = hn::BitCast(
      du, hn::Min(hn::Max(hn::Sub(hn::Set(di, static_cast<std::int16_t>(125 - s)), exponent),
                          hn::Set(di, 1)),
                  hn::Set(di, 15)));
  const auto half = hn::Sub(hn::Shl(hn::Set(du, 1), hn::Sub(k, hn::Set(du, 1))), hn::Set(du, 1));
  const auto sub = hn::Shr(hn::Add(hn::Add(m, half), hn::And(hn::Shr(m, k), hn::Set(du, 1))), k);
  auto mag = hn::IfThenElse(hn::RebindMask(du, is_normal), hn::BitCast(du, normal), sub);
  mag = hn::IfThenElse(hn::RebindMask(du, nan), hn::Set(du, 0x7F), mag);
  StoreFp8Codes<kStream>(SignedCodes(x, mag, sign_mask), p);
}

// f(store) with the store StoreBf16AsFp8 picks for `tab` (a callable of a vector of 32 words and
// p), for loops that choose once: a choice per vector made a 64-token decode of 32 kv heads into
// fp8 with a power-of-two scale 5% slower (Zen 4).
template <bool kStream = false, class F>
HWY_INLINE void WithBf16Fp8Store(const Bf16Fp8Tables& tab, const F& f) {
  if (tab.shift != kNoBf16Fp8Shift) {
    f([&tab](hn::Vec<hn::ScalableTag<std::uint16_t>> x, std::uint8_t* p) {
      StoreBf16AsFp8Shifted<kStream>(x, tab, p);
    });
  } else {
    f([&tab](hn::Vec<hn::ScalableTag<std::uint16_t>> x, std::uint8_t* p) {
      StoreBf16AsFp8ByTable<kStream>(x, tab, p);
    });
  }
}

// 32 bf16 words -> 32 E4M3 bytes at p by the way `tab` was made for.
template <bool kStream = false>
HWY_INLINE void StoreBf16AsFp8(hn::Vec<hn::ScalableTag<std::uint16_t>> x, const Bf16Fp8Tables& tab,
                               std::uint8_t* p) {
  if (tab.shift != kNoBf16Fp8Shift) {
    StoreBf16AsFp8Shifted<kStream>(x, tab, p);
  } else {
    StoreBf16AsFp8ByTable<kStream>(x, tab, p);
  }
}

// f16 into an fp8 cache on AVX-512 by the scale's F16Fp8Map (kv_cache_kernel.h derives it), 32
// values at a time in 16-bit lanes, for any scale that has one (powers of two too): the code of a
// magnitude a in [lo, hi] is t = 8 E + base[j] + (r >= step[j]), E = a >> 10, j = (a >> 4) & 63,
// r = a & 15, with two two-table word permutes (VPERMT2W, indexed by a >> 4, whose bits 0-5 are j)
// and a compare; the sign goes on top as for bf16. About 16 operations per 32 values; a vector
// with a lane outside [lo, hi] (zeros, f16 subnormals, E4M3 subnormal results, saturation,
// infinities, NaN) goes through the float path (F16ToFp8ByFloat), whose division or
// multiplication and StoreFp8 take about twice as long.
struct F16Fp8Tables {
  explicit F16Fp8Tables(const CacheScale& cs) : scale(cs.scale), inv(cs.inv) {
    base0 = _mm512_load_si512(cs.f16->base);
    base1 = _mm512_load_si512(cs.f16->base + 32);
    step0 = _mm512_load_si512(cs.f16->step);
    step1 = _mm512_load_si512(cs.f16->step + 32);
    twice_lo = _mm512_set1_epi16(static_cast<std::int16_t>(2 * cs.f16->lo));
    twice_range = _mm512_set1_epi16(static_cast<std::int16_t>(2 * (cs.f16->hi - cs.f16->lo)));
    // Opaque to the optimiser, as Bf16Fp8Tables' constants, so that they stay in registers.
    asm(""
        : "+v"(base0), "+v"(base1), "+v"(step0), "+v"(step1), "+v"(twice_lo), "+v"(twice_range),
          "+v"(exponent8), "+v"(low4), "+v"(one), "+v"(sign_byte));
  }
  __m512i base0, base1, step0, step1, twice_lo, twice_range;
  __m512i exponent8 = _mm512_set1_epi16(0xF8);
  __m512i low4 = _mm512_set1_epi16(0xF);
  __m512i one = _mm512_set1_epi16(1);
  __m512i sign_byte = _mm512_set1_epi16(0x80);
  float scale, inv;
};

// 32 f16 words (one AVX-512 vector) -> 32 E4M3 bytes at p, the same bits as the float path; with
// kStream a streaming store, p aligned to 32 bytes.
template <bool kStream = false>
HWY_INLINE void StoreF16AsFp8(hn::Vec<hn::ScalableTag<std::uint16_t>> x, const F16Fp8Tables& tab,
                              std::uint8_t* p) {
  const hn::ScalableTag<std::uint16_t> du;
  const __m512i xi = x.raw;
  // 2 a = x << 1 (the sign shifted out) in [2 lo, 2 hi]: 2 a - 2 lo, wrapped, at most 2 (hi - lo).
  const __mmask32 covered = _mm512_cmple_epu16_mask(
      _mm512_sub_epi16(_mm512_slli_epi16(xi, 1), tab.twice_lo), tab.twice_range);
  if (HWY_LIKELY(covered == 0xFFFFFFFFu)) {
    const __m512i j = _mm512_srli_epi16(xi, 4);  // bits 0-5: m >> 4 (the permutes read those)
    const __m512i base = _mm512_permutex2var_epi16(tab.base0, j, tab.base1);
    const __m512i step = _mm512_permutex2var_epi16(tab.step0, j, tab.step1);
    // 8 E: (x >> 7) & 0xF8 (the sign bit lands in bit 8, outside the mask).
    const __m512i t =
        _mm512_add_epi16(_mm512_and_si512(_mm512_srli_epi16(xi, 7), tab.exponent8), base);
    const __mmask32 up = _mm512_cmpge_epu16_mask(_mm512_and_si512(xi, tab.low4), step);
    const hn::Vec<decltype(du)> code{_mm512_mask_add_epi16(t, up, t, tab.one)};
    StoreFp8Codes<kStream>(SignedCodes(x, code, hn::Vec<decltype(du)>{tab.sign_byte}), p);
  } else {
    StoreFp8Codes<kStream>(CodesByFloat(x, tab.scale, tab.inv, F16ToFp8ByFloat), p);
  }
}

// 32 bf16 or f16 words -> 32 E4M3 bytes at p by the 16-bit lanes the tables are for.
template <bool kStream = false>
HWY_INLINE void StoreHalfAsFp8(hn::Vec<hn::ScalableTag<std::uint16_t>> x, const Bf16Fp8Tables& tab,
                               std::uint8_t* p) {
  StoreBf16AsFp8<kStream>(x, tab, p);
}
template <bool kStream = false>
HWY_INLINE void StoreHalfAsFp8(hn::Vec<hn::ScalableTag<std::uint16_t>> x, const F16Fp8Tables& tab,
                               std::uint8_t* p) {
  StoreF16AsFp8<kStream>(x, tab, p);
}

// The AVX3 target's options and AVX-512 VBMI (avx512_vbmi_enabled). All of them: clang takes a
// function's target attribute in place of the one Highway pushes, GCC in addition to it.
#define POSENC_FP8_VBMI_ATTR __attribute__((target(HWY_TARGET_STR ",avx512vbmi")))

// Byte k of the result: byte 2 k (kLowBytes) or 2 k + 1 (kHighBytes) of two vectors of 32 words.
alignas(64) inline constexpr std::uint8_t kLowBytes[64] = {
    0,  2,  4,   6,   8,   10,  12,  14,  16,  18,  20,  22,  24,  26,  28,  30,
    32, 34, 36,  38,  40,  42,  44,  46,  48,  50,  52,  54,  56,  58,  60,  62,
    64, 66, 68,  70,  72,  74,  76,  78,  80,  82,  84,  86,  88,  90,  92,  94,
    96, 98, 100, 102, 104, 106, 108, 110, 112, 114, 116, 118, 120, 122, 124, 126};
alignas(64) inline constexpr std::uint8_t kHighBytes[64] = {
    1,  3,  5,   7,   9,   11,  13,  15,  17,  19,  21,  23,  25,  27,  29,  31,
    33, 35, 37,  39,  41,  43,  45,  47,  49,  51,  53,  55,  57,  59,  61,  63,
    65, 67, 69,  71,  73,  75,  77,  79,  81,  83,  85,  87,  89,  91,  93,  95,
    97, 99, 101, 103, 105, 107, 109, 111, 113, 115, 117, 119, 121, 123, 125, 127};

// Rows of bf16 or f16 words into E4M3 bytes in byte lanes, 64 values at a time, the loop
// Bf16RowsToFp8Vbmi and F16RowsToFp8Vbmi share: `rows` rows of `len` words (a multiple of 64) at
// in + r in_stride into out + r out_stride, with kStream streaming stores (each row aligned to 32
// bytes), with `prefetch` each input row's prefetch_ahead (rotate.h). A block whose 64 magnitudes
// all lie in [map.lo, map.hi] (the scale's table's range: normal, unsaturated codes) gets its
// codes from Codes (Bf16BlockCodes, F16BlockCodes: the map's byte tables, in registers for the
// loop, made here: made by the caller and passed by value, they made a one-token decode into fp8
// 2-5% slower, and rotate-then-copy, whose copy goes head by head, 14% slower; Zen 4, the
// binaries in turn, two rounds); other blocks go through the 16-bit lanes `tab` is for
// (StoreHalfAsFp8), 32 at a time, the same bits.
// The range check per 32 words: x << 1 (the sign shifted out) - 2 lo, wrapped, at most
// 2 (hi - lo). Two 32-byte streaming stores per block: one 64-byte store where the row allows
// measured no different (session 26: 7.0-7.6 ms for the Llama 2 7B prefill either way).
template <bool kStream, class Codes, class Map, class Tables>
HWY_NOINLINE POSENC_FP8_VBMI_ATTR void HalfRowsToFp8Vbmi(const std::uint16_t* in,
                                                         std::int64_t in_stride, std::uint8_t* out,
                                                         std::int64_t out_stride, std::int64_t rows,
                                                         std::int64_t len, const Map& map,
                                                         const Tables& tab, bool prefetch) {
  Codes codes(map);
  __m512i twice_lo = _mm512_set1_epi16(static_cast<std::int16_t>(2 * map.lo));
  __m512i twice_range = _mm512_set1_epi16(static_cast<std::int16_t>(2 * (map.hi - map.lo)));
  // Opaque, as in Bf16Fp8Tables: kept in registers, not re-made inside the loop.
  asm("" : "+v"(twice_lo), "+v"(twice_range));
  codes.KeepInRegisters();
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint16_t* x = in + r * in_stride;
    std::uint8_t* y = out + r * out_stride;
    if (prefetch) prefetch_ahead(x, len);
    for (std::int64_t i = 0; i < len; i += 64) {
      const __m512i x0 = _mm512_loadu_si512(x + i);
      const __m512i x1 = _mm512_loadu_si512(x + i + 32);
      const __mmask32 in0 = _mm512_cmple_epu16_mask(
          _mm512_sub_epi16(_mm512_slli_epi16(x0, 1), twice_lo), twice_range);
      const __mmask32 in1 = _mm512_cmple_epu16_mask(
          _mm512_sub_epi16(_mm512_slli_epi16(x1, 1), twice_lo), twice_range);
      if (HWY_UNLIKELY((in0 & in1) != 0xFFFFFFFFu)) {
        StoreHalfAsFp8<kStream>(hn::Vec<hn::ScalableTag<std::uint16_t>>{x0}, tab, y + i);
        StoreHalfAsFp8<kStream>(hn::Vec<hn::ScalableTag<std::uint16_t>>{x1}, tab, y + i + 32);
        continue;
      }
      const __m512i bytes = codes(x0, x1);
      if constexpr (kStream) {
        _mm256_stream_si256(reinterpret_cast<__m256i*>(y + i), _mm512_castsi512_si256(bytes));
        _mm256_stream_si256(reinterpret_cast<__m256i*>(y + i + 32),
                            _mm512_extracti64x4_epi64(bytes, 1));
      } else {
        _mm512_storeu_si512(y + i, bytes);
      }
    }
  }
}

// The codes of 64 bf16 words (two vectors) whose magnitudes lie in the table's range, by the
// scale's Bf16Fp8Map in byte lanes:
//   byte k of (x >> 4), bits 4-11 of word k, is (8 E + (m >> 4)) mod 256, and its sum with
//   map.bytes[m] (a two-table byte permute indexed by the low byte, whose bits 0-6 are m) is
//   the code; the sign, bit 7 of the high byte, goes on top by a bitwise select.
// Three two-source byte permutes gather the bytes: about 14 operations per 64 values with
// HalfRowsToFp8Vbmi's checks, loads and stores aside, against about 20 for two vectors of the
// power-of-two path and 28 of the table path. The same bits as StoreBf16AsFp8: t in [8, 0x7E] is
// its code before the min.
struct Bf16BlockCodes {
  explicit Bf16BlockCodes(const Bf16Fp8Map& map)
      : low_index(_mm512_load_si512(kLowBytes)),
        high_index(_mm512_load_si512(kHighBytes)),
        table0(_mm512_load_si512(map.bytes)),
        table1(_mm512_load_si512(map.bytes + 64)),
        sign_bit(_mm512_set1_epi8(static_cast<char>(0x80))) {}
  HWY_INLINE void KeepInRegisters() {
    asm("" : "+v"(low_index), "+v"(high_index), "+v"(table0), "+v"(table1), "+v"(sign_bit));
  }
  HWY_INLINE POSENC_FP8_VBMI_ATTR __m512i operator()(__m512i x0, __m512i x1) const {
    const __m512i bits4_11 =
        _mm512_permutex2var_epi8(_mm512_srli_epi16(x0, 4), low_index, _mm512_srli_epi16(x1, 4));
    const __m512i low = _mm512_permutex2var_epi8(x0, low_index, x1);
    const __m512i high = _mm512_permutex2var_epi8(x0, high_index, x1);
    const __m512i code = _mm512_add_epi8(bits4_11, _mm512_permutex2var_epi8(table0, low, table1));
    return _mm512_ternarylogic_epi32(sign_bit, high, code, 0xCA);  // sign_bit ? high : code
  }
  __m512i low_index, high_index, table0, table1, sign_bit;
};

// Rows of bf16 words into E4M3 bytes by the scale's table in byte lanes (HalfRowsToFp8Vbmi with
// Bf16BlockCodes, StoreBf16AsFp8 for the other blocks). Measured (Zen 4, `posenc bench`, the
// binaries before and after in turn, three rounds): a standalone loop in L1 1.94 -> 1.33 ns per
// 32 values against the power-of-two path; the fused Llama 2 7B prefill into fp8 8.2-8.6 -> 6.7-7.3
// ms, its one-token decode 1.15-1.17 -> 0.95-0.96 us.
template <bool kStream>
HWY_INLINE void Bf16RowsToFp8Vbmi(const std::uint16_t* in, std::int64_t in_stride,
                                  std::uint8_t* out, std::int64_t out_stride, std::int64_t rows,
                                  std::int64_t len, const Bf16Fp8Map& map, const Bf16Fp8Tables& tab,
                                  bool prefetch) {
  HalfRowsToFp8Vbmi<kStream, Bf16BlockCodes>(in, in_stride, out, out_stride, rows, len, map, tab,
                                             prefetch);
}

// The codes of 64 f16 words (two vectors) whose magnitudes lie in the tables' range, by the
// scale's F16Fp8Map in byte lanes:
//   byte k of (x >> 7), bits 7-14 of word k, is 8 E + (j >> 3) (j = m >> 4); byte k of (x >> 4)
//   has j in bits 0-5 and E's low bit in bit 6, and indexes map.bytes (base[j] - (j >> 3)) and
//   map.steps (step[j]), two two-table byte permutes; with r = x & 15, from the low byte, the code
//   is 8 E + (j >> 3) + bytes + (r >= steps), t itself, which is in [8, 0x7E] (the sums wrap mod
//   256 on the way); the sign goes on top from the high byte, as for bf16.
// Four byte permutes gather the bytes: about 20 operations per 64 values with
// HalfRowsToFp8Vbmi's checks, loads and stores aside, against about 32 for two vectors of
// StoreF16AsFp8.
struct F16BlockCodes {
  explicit F16BlockCodes(const F16Fp8Map& map)
      : low_index(_mm512_load_si512(kLowBytes)),
        high_index(_mm512_load_si512(kHighBytes)),
        bytes0(_mm512_load_si512(map.bytes)),
        bytes1(_mm512_load_si512(map.bytes + 64)),
        steps0(_mm512_load_si512(map.steps)),
        steps1(_mm512_load_si512(map.steps + 64)),
        low4(_mm512_set1_epi8(0x0F)),
        one(_mm512_set1_epi8(1)),
        sign_bit(_mm512_set1_epi8(static_cast<char>(0x80))) {}
  HWY_INLINE void KeepInRegisters() {
    asm(""
        : "+v"(low_index), "+v"(high_index), "+v"(bytes0), "+v"(bytes1), "+v"(steps0), "+v"(steps1),
          "+v"(low4), "+v"(one), "+v"(sign_bit));
  }
  HWY_INLINE POSENC_FP8_VBMI_ATTR __m512i operator()(__m512i x0, __m512i x1) const {
    const __m512i bits7_14 =
        _mm512_permutex2var_epi8(_mm512_srli_epi16(x0, 7), low_index, _mm512_srli_epi16(x1, 7));
    const __m512i bits4_11 =
        _mm512_permutex2var_epi8(_mm512_srli_epi16(x0, 4), low_index, _mm512_srli_epi16(x1, 4));
    const __m512i low = _mm512_permutex2var_epi8(x0, low_index, x1);
    const __m512i high = _mm512_permutex2var_epi8(x0, high_index, x1);
    const __m512i t = _mm512_add_epi8(bits7_14, _mm512_permutex2var_epi8(bytes0, bits4_11, bytes1));
    const __mmask64 up = _mm512_cmpge_epu8_mask(_mm512_and_si512(low, low4),
                                                _mm512_permutex2var_epi8(steps0, bits4_11, steps1));
    const __m512i code = _mm512_mask_add_epi8(t, up, t, one);
    return _mm512_ternarylogic_epi32(sign_bit, high, code, 0xCA);  // sign_bit ? high : code
  }
  __m512i low_index, high_index, bytes0, bytes1, steps0, steps1, low4, one, sign_bit;
};

// Rows of f16 words into E4M3 bytes by the scale's tables in byte lanes (HalfRowsToFp8Vbmi with
// F16BlockCodes, StoreF16AsFp8 for the other blocks).
template <bool kStream>
HWY_INLINE void F16RowsToFp8Vbmi(const std::uint16_t* in, std::int64_t in_stride, std::uint8_t* out,
                                 std::int64_t out_stride, std::int64_t rows, std::int64_t len,
                                 const F16Fp8Map& map, const F16Fp8Tables& tab, bool prefetch) {
  HalfRowsToFp8Vbmi<kStream, F16BlockCodes>(in, in_stride, out, out_stride, rows, len, map, tab,
                                            prefetch);
}

// bf16 and f16 alike for the callers (kv_cache-inl.h, kv_cache_stream-inl.h), by the input's tag
// or the type of the tables (HalfFp8Tables, below): whether the byte lanes serve the scale now
// (AVX-512 VBMI on, and a table with lanes inside, so StoresHalfAsFp8 holds too and the tables
// can be made for the fallback), rows in byte lanes, and the 16-bit store a loop picks once
// (WithBf16Fp8Store's choice for bf16).
template <class Tag>
HWY_INLINE bool HalfFp8ByBytes(const CacheScale& cs) {
  if constexpr (std::is_same_v<Tag, BF16Tag>) {
    return cs.bf16 != nullptr && cs.bf16->lo <= cs.bf16->hi && avx512_vbmi_enabled();
  } else {
    return cs.f16 != nullptr && cs.f16->lo <= cs.f16->hi && avx512_vbmi_enabled();
  }
}
template <bool kStream>
HWY_INLINE void HalfRowsToFp8Bytes(const std::uint16_t* in, std::int64_t in_stride,
                                   std::uint8_t* out, std::int64_t out_stride, std::int64_t rows,
                                   std::int64_t len, const CacheScale& cs, const Bf16Fp8Tables& tab,
                                   bool prefetch) {
  Bf16RowsToFp8Vbmi<kStream>(in, in_stride, out, out_stride, rows, len, *cs.bf16, tab, prefetch);
}
template <bool kStream>
HWY_INLINE void HalfRowsToFp8Bytes(const std::uint16_t* in, std::int64_t in_stride,
                                   std::uint8_t* out, std::int64_t out_stride, std::int64_t rows,
                                   std::int64_t len, const CacheScale& cs, const F16Fp8Tables& tab,
                                   bool prefetch) {
  F16RowsToFp8Vbmi<kStream>(in, in_stride, out, out_stride, rows, len, *cs.f16, tab, prefetch);
}
template <bool kStream = false, class F>
HWY_INLINE void WithHalfFp8Store(const Bf16Fp8Tables& tab, const F& f) {
  WithBf16Fp8Store<kStream>(tab, f);
}
template <bool kStream = false, class F>
HWY_INLINE void WithHalfFp8Store(const F16Fp8Tables& tab, const F& f) {
  f([&tab](hn::Vec<hn::ScalableTag<std::uint16_t>> x, std::uint8_t* p) {
    StoreF16AsFp8<kStream>(x, tab, p);
  });
}
#endif

// Whether values of KTag go into a cache of CTag through the 16-bit lanes (StoreHalfAsFp8) on
// AVX-512: bf16 for a power-of-two scale or one the call has a table of (TokenKv::k_fp8_map,
// v_fp8_map), f16 for a scale whose table (k_f16_fp8_map, v_f16_fp8_map) has lanes inside.
template <class KTag, class CTag>
HWY_INLINE bool StoresHalfAsFp8([[maybe_unused]] const CacheScale& scale) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (std::is_same_v<KTag, BF16Tag> && std::is_same_v<CTag, Fp8Tag>) {
    return Bf16Fp8In16Bits(scale);
  }
  if constexpr (std::is_same_v<KTag, F16Tag> && std::is_same_v<CTag, Fp8Tag>) {
    return scale.f16 != nullptr && scale.f16->lo <= scale.f16->hi;
  }
#endif
  return false;
}

#if !(HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3)
// fp8-inl.h's, on AVX-512 only; here never made (StoresHalfAsFp8 is false).
struct Bf16Fp8Tables {
  explicit Bf16Fp8Tables(const CacheScale&) {}
};
struct F16Fp8Tables {
  explicit F16Fp8Tables(const CacheScale&) {}
};
#endif

// The tables StoreHalfAsFp8 takes for Tag's words: Bf16Fp8Tables for bf16, F16Fp8Tables for f16
// (and for f32, whose values never take them: StoresHalfAsFp8 is false).
template <class Tag>
using HalfFp8Tables = std::conditional_t<std::is_same_v<Tag, BF16Tag>, Bf16Fp8Tables, F16Fp8Tables>;

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_FP8_INL_H_
