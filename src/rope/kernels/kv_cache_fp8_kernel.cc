// The fused RoPE + KV-cache kernel (kv_cache_kernel.h) for fp8 E4M3 caches, compiled once per
// SIMD target; its code is kv_cache-inl.h's (the scale there; the E4M3 rounding in fp8-inl.h). A translation unit
// of its own so that its instantiations (three input dtypes into fp8) compile beside the other
// caches' instead of after them.
// foreach_target.h re-includes this file once per target: the order of these lines is Highway's.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rope/kernels/kv_cache_fp8_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "rope/kernels/kv_cache-inl.h"
#include "rope/kernels/kv_cache_kernel.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {

void AppendTokenKvFp8(const TokenKv& t) { AppendTyped(Fp8Tag(), t); }

// Bf16Fp8Map's words by the float path (kv_cache_kernel.h derives them): the codes of the 128
// bf16 values at the anchor exponent E0, each minus 8 E0. Made on every target (the float path
// gives the same bits on all of them), so that a table kept across calls serves any target.
bool MakeBf16Fp8Map(float scale, Bf16Fp8Map* map) {
  const auto bits = std::bit_cast<std::uint32_t>(scale);
  const auto field = static_cast<int>(bits >> 23);  // the sign bit makes it > 255
  // scale = 2^e * ms with e = field - 127, so E0 = 128 + e = field + 1, in [9, 254].
  if (field < 8 || field > 253) return false;
  const int e0 = field + 1;
  alignas(64) std::uint16_t words[128];
  for (int m = 0; m < 128; ++m) words[m] = static_cast<std::uint16_t>(e0 << 7 | m);
  alignas(64) std::uint8_t codes[128];
  for (int i = 0; i < 128; i += 32)
    Bf16ToFp8ByFloat(words + i, scale, exact_inverse(scale), codes + i);
  int lo = 0x8000, hi = -1;
  for (int m = 0; m < 128; ++m) {
    const int w = codes[m] - 8 * e0;
    map->words[m] = static_cast<std::int16_t>(w);
    map->bytes[m] = static_cast<std::uint8_t>(w - (m >> 4));
    // This mantissa's exponents with 8 E + w in [8, 0x7E], E in [0, 254]: E >= ceil((8 - w) / 8)
    // and E <= floor((0x7E - w) / 8), both numerators taken where they are non-negative.
    const int e_min = w >= 8 ? 0 : (8 - w + 7) / 8;
    const int e_max = w > 0x7E ? -1 : std::min(254, (0x7E - w) / 8);
    if (e_min <= e_max) {
      lo = std::min(lo, e_min * 128 + m);
      hi = std::max(hi, e_max * 128 + m);
    }
  }
  map->lo = static_cast<std::uint16_t>(lo <= hi ? lo : 1);
  map->hi = static_cast<std::uint16_t>(lo <= hi ? hi : 0);
  return true;
}

// F16Fp8Map's tables by the float path (kv_cache_kernel.h derives them): the codes of the 1024
// values at the anchor exponent E0, made in float32 (E0 may lie outside f16's exponents), each
// minus 8 E0, in buckets of 16 mantissas. Made on every target, as MakeBf16Fp8Map.
bool MakeF16Fp8Map(float scale, F16Fp8Map* map) {
  const auto bits = std::bit_cast<std::uint32_t>(scale);
  const auto field = static_cast<int>(bits >> 23);  // the sign bit makes it > 255
  // scale = 2^e * ms with e = field - 127: the anchor 2^(e + 1) has the float32 exponent field
  // field + 1 (at most 254) and the f16 one E0 = 16 + e = field - 111.
  if (field < 1 || field > 253) return false;
  const int e0 = field - 111;
  alignas(64) float values[1024];
  for (std::uint32_t m = 0; m < 1024; ++m) {
    values[m] = std::bit_cast<float>(static_cast<std::uint32_t>(field + 1) << 23 | m << 13);
  }
  alignas(64) std::uint8_t codes[1024];
  FloatsToFp8ByFloat(values, 1024, scale, exact_inverse(scale), codes);
  F16Fp8Map made;
  int lo = 0x8000, hi = -1;
  for (int j = 0; j < 64; ++j) {
    const int base = codes[16 * j] - 8 * e0;
    int step = 16;
    for (int r = 1; r < 16; ++r) {
      if (codes[16 * j + r] != codes[16 * j]) {
        step = r;
        break;
      }
    }
    for (int r = 0; r < 16; ++r) {  // the two-level form holds (kv_cache_kernel.h says why)
      if (codes[16 * j + r] != codes[16 * j] + (r >= step ? 1 : 0)) return false;
    }
    // And the codes grow from bucket to bucket, which the search for [lo, hi] below relies on.
    if (j > 0 && codes[16 * j] < codes[16 * j - 1]) return false;
    made.base[j] = static_cast<std::int16_t>(base);
    made.step[j] = static_cast<std::int16_t>(step);
    for (int k : {j, j + 64}) {  // the byte lanes' tables: E's low bit in bit 6 of the index
      made.bytes[k] = static_cast<std::uint8_t>(base - (j >> 3));
      made.steps[k] = static_cast<std::uint8_t>(step);
    }
  }
  // t(a) = 8 E + w(m) grows with a = E << 10 | m (kv_cache_kernel.h), so [lo, hi] is found by
  // searching, E in [1, 30]: the first a with t >= 8 and the last with t <= 0x7E, an exponent at
  // a time, then by bisection of the mantissas (a scan of all 1024 mantissas for their exponent
  // ranges took most of the table's making).
  auto t = [&](int a) { return 8 * (a >> 10) + codes[a & 1023] - 8 * e0; };
  int e = 1;
  while (e <= 30 && t(e << 10 | 1023) < 8) ++e;
  if (e <= 30) {  // the first a in [e << 10, e << 10 | 1023] with t >= 8
    int below = (e << 10) - 1;
    lo = e << 10 | 1023;
    while (lo - below > 1) {
      const int a = (below + lo) / 2;
      (t(a) >= 8 ? lo : below) = a;
    }
  }
  e = 30;
  while (e >= 1 && t(e << 10) > 0x7E) --e;
  if (e >= 1) {  // the last a in [e << 10, e << 10 | 1023] with t <= 0x7E
    int above = (e << 10 | 1023) + 1;
    hi = e << 10;
    while (above - hi > 1) {
      const int a = (hi + above) / 2;
      (t(a) <= 0x7E ? hi : above) = a;
    }
  }
  made.lo = static_cast<std::uint16_t>(lo <= hi ? lo : 1);
  made.hi = static_cast<std::uint16_t>(lo <= hi ? hi : 0);
  *map = made;
  return true;
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::detail {

HWY_EXPORT(AppendTokenKvFp8);

void append_token_kv_fp8(const TokenKv& args) { HWY_DYNAMIC_DISPATCH(AppendTokenKvFp8)(args); }

HWY_EXPORT(MakeBf16Fp8Map);

bool make_bf16_fp8_map(float scale, Bf16Fp8Map& map) {
  return HWY_DYNAMIC_DISPATCH(MakeBf16Fp8Map)(scale, &map);
}

HWY_EXPORT(MakeF16Fp8Map);

bool make_f16_fp8_map(float scale, F16Fp8Map& map) {
  return HWY_DYNAMIC_DISPATCH(MakeF16Fp8Map)(scale, &map);
}

}  // namespace posenc::detail
#endif  // HWY_ONCE
