// src/rope/kernels/kv_cache_kernel.h: the per-token SIMD entry point of the fused RoPE + KV-cache
// append (internal). One call handles every kv head of one token: k rotated with the prepared row
// (rotate.h's form) and written to the key cache, v converted into the value cache.
#pragma once

#include <bit>
#include <cstdint>

#include "posenc/core/spec.h"
#include "posenc/rope/kv_cache.h"
#include "posenc/rope/tensor.h"

namespace posenc::detail {

struct Bf16Fp8Map;  // below
struct F16Fp8Map;

struct TokenKv {
  const void* k = nullptr;  // first element of the token's first head
  DType k_dtype = DType::kF32;
  std::int64_t k_head_stride = 0;
  void* k_back = nullptr;  // == k to store the rotated k back in place; nullptr: k is read only
  const void* v = nullptr;
  DType v_dtype = DType::kF32;
  std::int64_t v_head_stride = 0;
  void* k_cache = nullptr;  // the token's (page, entry) cell, first head
  void* v_cache = nullptr;
  CacheDType cache_dtype = CacheDType::kF32;
  std::int64_t cache_head_stride = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t offset = 0;  // first rotated dim
  std::int64_t pairs = 0;   // n; 0: k is copied as given
  Layout layout = Layout::kHalfSplit;
  const float* c = nullptr;
  const float* s = nullptr;
  float k_scale = 1.0f;  // fp8: stored = value / scale
  float v_scale = 1.0f;
  float k_inv_scale = 0.0f;  // exact_inverse(k_scale): nonzero, the kernel multiplies by it
  float v_inv_scale = 0.0f;
  // bf16 k or v into an fp8 cache: the scale's table (make_bf16_fp8_map), or null where it has
  // none (the float path).
  const Bf16Fp8Map* k_fp8_map = nullptr;
  const Bf16Fp8Map* v_fp8_map = nullptr;
  // f16 k or v into an fp8 cache: the scale's table (make_f16_fp8_map), or null (the float path).
  const F16Fp8Map* k_f16_fp8_map = nullptr;
  const F16Fp8Map* v_f16_fp8_map = nullptr;
  // Write the cache rows with non-temporal (streaming) stores: each row is made in a buffer on
  // the stack and then copied out by whole aligned vectors that bypass the caches. The caller
  // sets it for large appends (a prefill) and calls hwy::FlushStream() (sfence) once it is done
  // and before anything else may read the cache, since streaming stores are weakly ordered.
  bool stream_cache = false;
  // Software prefetch ahead of each head of k and v (rotate.h's prefetch_ahead): large appends,
  // as src/rope/software_prefetch.h decides.
  bool prefetch = false;
};

// Rows (head_dim x cache element size) up to this many bytes are staged for streaming stores;
// longer ones are written directly.
inline constexpr std::size_t kMaxStagedRowBytes = 4096;

// The fp8 cache's storage tag (half.h's tags for the others): OCP E4M3 (torch float8_e4m3fn) bits.
struct Fp8Tag {
  using Storage = std::uint8_t;
};

// bf16 values divided by an fp8 cache's scale and rounded to E4M3, by a table of 128 words
// (fp8-inl.h's StoreBf16AsFp8 uses it on AVX-512; the float path is the definition).
//
// A bf16 magnitude a has the exponent field E = a >> 7 and the mantissa m = a & 0x7F, so its value
// is 2^(E - 127) (1 + m / 128) for E >= 1. The stored code is e4m3(fl32(v / scale)). Let E0 be the
// exponent field of 2^(e + 1) for scale = 2^e * ms (1 <= ms < 2): E0 = 128 + e. Then v / scale at
// (E0, m) is 2 (1 + m / 128) / ms, in (1, 4), and its code c(m) is a normal E4M3 code in [0x38,
// 0x48]. Dividing by scale, rounding to float32 and rounding to E4M3 all commute with a power of
// two 2^k while every result stays normal, and a normal E4M3 code grows by 8 per factor 2, so at
// any E the code is
//   t = 8 (E - E0) + c(m) = 8 E + words[m],   words[m] = c(m) - 8 E0,
// where t >= 8 (a normal result; t = 8 also where the value lies just below 2^-6, whose subnormal
// rounding reaches 2^-6 as well) and E < 255 (not an infinity or NaN); min(t, 0x7E) saturates as
// the float path does (every code above 0x7E is a value of at least 480). Lanes outside (t < 8:
// zeros, bf16 subnormals and E4M3 subnormal results; E = 255) take the float path. E0 >= 9 keeps
// t < 8 for every E = 0 lane; E0 <= 254 keeps the anchor finite: scales in [2^-119, 2^127).
//
// The same table for 64 values in byte lanes (fp8-inl.h's Bf16RowsToFp8Vbmi, AVX-512 VBMI): the
// byte of bits 4-11 of a bf16 word is (8 E + (m >> 4)) mod 256, so adding
//   bytes[m] = (words[m] - (m >> 4)) mod 256
// gives t mod 256, which is t itself where t is in [8, 0x7E]. t grows with a (the codes grow with
// the value), so those lanes are the magnitudes a in [lo, hi] (with E < 255); lanes outside, the
// saturated ones too, take the 16-bit paths. lo > hi where no lane is inside.
struct Bf16Fp8Map {
  alignas(64) std::int16_t words[128];
  alignas(64) std::uint8_t bytes[128];
  std::uint16_t lo = 1, hi = 0;
};

// The table of `scale` (a positive finite float) into `map`, by the float path on the 128 values
// at E0 (the same bits on every target; only AVX-512 reads it); false, leaving `map` as it was,
// where the scale is outside [2^-119, 2^127). About 0.27 us (Zen 4): kv_cache.cc keeps them.
bool make_bf16_fp8_map(float scale, Bf16Fp8Map& map);

// f16 values divided by an fp8 cache's scale and rounded to E4M3, by two tables of 64 words
// (fp8-inl.h's StoreF16AsFp8 uses them on AVX-512; the float path is the definition).
//
// An f16 magnitude a has the exponent field E = a >> 10 and the mantissa m = a & 0x3FF, so its
// value is 2^(E - 15) (1 + m / 1024) for E >= 1. As for bf16 (Bf16Fp8Map), let E0 = 16 + e for
// scale = 2^e * ms (1 <= ms < 2), the exponent field 2^(e + 1) would have: v / scale at (E0, m) is
// 2 (1 + m / 1024) / ms, in (1, 4), its code c(m) a normal E4M3 code, and at any E the code is
//   t = 8 E + w(m),   w(m) = c(m) - 8 E0,
// where t is in [8, 0x7E] (a normal, unsaturated result; t = 8 also just below 2^-6, as for bf16)
// and 1 <= E <= 30 (not an f16 subnormal, infinity or NaN): dividing, rounding to float32 and
// rounding to E4M3 commute with powers of two while the results stay normal. E0 need not be an f16
// exponent: the codes at E0 are computed in float32. w has 1024 entries, too many for a register
// permute, but 16 consecutive mantissas (a bucket j = m >> 4, r = m & 15) span less than 16 / 1024
// of the value, less than one E4M3 step (at least 1 / 16 of it), and c grows with m, so
//   w(16 j + r) = base[j] + (r >= step[j] ? 1 : 0),
// step[j] in [1, 16] (16: no step in the bucket); make_f16_fp8_map checks this for every m. t grows
// with a, so the lanes the tables serve are the magnitudes a in [lo, hi]; lo > hi where none are.
//
// The same tables for 64 values in byte lanes (fp8-inl.h's F16RowsToFp8Vbmi, AVX-512 VBMI): the
// byte of bits 7-14 of an f16 word is 8 E + (j >> 3), and the byte of bits 4-11 has j in bits 0-5
// and E's low bit in bit 6, a 7-bit index into
//   bytes[k] = (base[k & 63] - ((k & 63) >> 3)) mod 256,   steps[k] = step[k & 63],
// so their sum with bytes[] and the step gives t mod 256, t itself where t is in [8, 0x7E].
struct F16Fp8Map {
  alignas(64) std::int16_t base[64];
  alignas(64) std::int16_t step[64];
  alignas(64) std::uint8_t bytes[128];
  alignas(64) std::uint8_t steps[128];
  std::uint16_t lo = 1, hi = 0;
};

// The tables of `scale` (a positive finite float) into `map`, by the float path on the 1024 values
// at E0 (the same bits on every target; only AVX-512 reads them); false, leaving `map` as it was,
// where the scale is not a normal float below 2^127. About 0.7 us (Zen 4): kv_cache.cc keeps them.
bool make_f16_fp8_map(float scale, F16Fp8Map& map);

// An fp8 cache's divisor, its exact reciprocal (exact_inverse) or 0, and for bf16 and f16 values
// their tables (make_bf16_fp8_map, make_f16_fp8_map) or null, as the kernel takes them.
struct CacheScale {
  float scale = 1.0f;
  float inv = 0.0f;
  const Bf16Fp8Map* bf16 = nullptr;
  const F16Fp8Map* f16 = nullptr;
};

// 1 / scale when it is exact and a normal float (scale = +-2^k, k in [-126, 126]), else 0. Then
// v * (1 / scale) is the same real number as v / scale, so both round to the same float
// (subnormal, overflowing, infinite and NaN results included): the fp8 store may multiply
// instead of dividing, with bit-identical results. 2^127 is left out (its inverse 2^-127 is
// subnormal: still exact, but not worth a case), and so are subnormal scales (2^-127 and below:
// the inverse overflows).
inline float exact_inverse(float scale) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(scale);
  const std::uint32_t exp = (bits >> 23) & 0xFFu;
  if ((bits & 0x7FFFFFu) != 0 || exp < 1 || exp > 253) return 0.0f;  // not 2^k, k in [-126, 126]
  return std::bit_cast<float>((254u - exp) << 23 | (bits & 0x80000000u));
}

// Runs on the best SIMD target this CPU supports (or the forced one, targets.h).
void append_token_kv(const TokenKv& args);

// append_token_kv for an fp8 cache (kv_cache_fp8_kernel.cc, its own translation unit so the two
// halves compile in parallel); append_token_kv calls it.
void append_token_kv_fp8(const TokenKv& args);

}  // namespace posenc::detail
