// tests/reference/fp8_reference.h: float32 -> OCP FP8 E4M3 (torch float8_e4m3fn bits) written from
// the format's definition, independent of src/: every finite E4M3 value decoded to double, the
// nearest one chosen, ties to the even code. Saturating (|x| > 448, infinities too, -> +-448, as
// vLLM's and FlashInfer's fp8 KV caches and CUDA's __NV_SATFINITE store), NaN -> 0x7F with the
// sign. Includes no posenc header.
#pragma once

#include <cmath>
#include <cstdint>

namespace posenc_ref {

// The value of a non-negative E4M3 code 0x00..0x7E: bias 7, 3 mantissa bits, subnormals at
// exponent 0 (m * 2^-9); 0x7F is NaN (E4M3 has no infinity).
inline double Fp8E4M3Value(std::uint8_t code) {
  const int e = (code >> 3) & 0xF, m = code & 7;
  return e == 0 ? std::ldexp(m, -9) : std::ldexp(1.0 + m / 8.0, e - 7);
}

inline std::uint8_t ToFp8E4M3(float f) {
  const std::uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return static_cast<std::uint8_t>(sign | 0x7F);
  const double a = std::abs(static_cast<double>(f));
  if (a >= 448.0) return static_cast<std::uint8_t>(sign | 0x7E);
  std::uint8_t best = 0;
  for (int code = 1; code <= 0x7E; ++code) {
    const double d = std::abs(Fp8E4M3Value(static_cast<std::uint8_t>(code)) - a);
    const double bd = std::abs(Fp8E4M3Value(best) - a);
    if (d < bd || (d == bd && (code & 1) == 0)) best = static_cast<std::uint8_t>(code);
  }
  return static_cast<std::uint8_t>(sign | best);
}

}  // namespace posenc_ref
