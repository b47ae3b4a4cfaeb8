// tests/reference/half_reference.h: float16 and bfloat16 storage conversions written from the
// formats' definitions (round to nearest even), independent of src/rope/kernels/half.h. Includes no
// posenc header.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace posenc_ref {

inline std::uint16_t ToBf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline float FromBf16(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}
// Exponent field 31: an infinity (mantissa 0) or a NaN (any other mantissa), with the sign.
inline float FromF16(std::uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const float mag = e == 31  ? (m == 0 ? std::numeric_limits<float>::infinity()
                                       : std::numeric_limits<float>::quiet_NaN())
                    : e == 0 ? std::ldexp(static_cast<float>(m), -24)
                             : std::ldexp(1.0f + m / 1024.0f, e - 15);
  return (h & 0x8000) ? -mag : mag;
}
// float16 by arithmetic in double: scaling by a power of two is exact, and nearbyint rounds
// to nearest even in the default rounding mode (finite inputs below 65520).
inline std::uint16_t ToF16(float f) {
  const double a = std::abs(static_cast<double>(f));
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  // Zero and subnormals share the smallest exponent (ilogb(0) is not one: it must not reach the
  // normal branch, which would encode 0 as -1024 steps, the bits of an infinity).
  const int e = a == 0 ? -14 : std::max(std::ilogb(a), -14);
  const double steps = std::nearbyint(std::ldexp(a, 10 - e));  // multiples of the ulp at e
  if (e == -14 && steps < 1024)
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(steps));
  // steps is in [1024, 2048]; 2048 means the rounding carried into the next binade.
  const int exp = steps == 2048 ? e + 1 : e;
  const int mant = steps == 2048 ? 0 : static_cast<int>(steps) - 1024;
  return static_cast<std::uint16_t>(sign | ((exp + 15) << 10) | mant);
}

}  // namespace posenc_ref
