// src/rope/kernels/half.h: scalar float32 <-> float16 / bfloat16 conversions, round to nearest even
// (internal), and the storage tags the SIMD kernels are templated on. The kernels use the same
// bit recipes lane-wise (rope/kernels/half-inl.h).
#pragma once

#include <bit>
#include <cstdint>

namespace posenc::detail {

// A tensor's element type resolved at compile time: the kernels compute in float32 and load and
// store through Storage (rope/kernels/half-inl.h's LoadF32 / StoreF32 overloads, one per tag).
struct F32Tag {
  using Storage = float;
};
struct F16Tag {
  using Storage = std::uint16_t;  // IEEE binary16 bits
};
struct BF16Tag {
  using Storage = std::uint16_t;  // bfloat16 bits
};

inline float f32_from_bf16(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

// Round to nearest even: add 0x7FFF plus the lowest kept bit, then drop 16 bits. NaNs stay NaN
// (quiet bit set) instead of rounding up into infinity.
inline std::uint16_t bf16_from_f32(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

inline float f32_from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  if (exp == 0) {
    // Subnormal: mant * 2^-24, exact in float32.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float32 -> float16, round to nearest even (F. Giesen's branch-light recipe): normal numbers
// re-bias the exponent and round with 0xFFF plus the lowest kept bit; small numbers are rounded
// by the FPU itself by adding a magic number whose ulp is the float16 subnormal step.
inline std::uint16_t f16_from_f32(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t a = bits & 0x7FFFFFFFu;
  std::uint16_t out;
  if (a >= 0x47800000u) {  // >= 65536, inf or NaN
    out = a > 0x7F800000u ? 0x7E00u : 0x7C00u;
  } else if (a < 0x38800000u) {  // below 2^-14: float16 subnormal or zero
    const float magic = std::bit_cast<float>(0x3F000000u);  // 0.5: ulp = 2^-24
    out = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + magic) -
                                     0x3F000000u);
  } else {
    const std::uint32_t odd = (a >> 13) & 1u;
    out =
        static_cast<std::uint16_t>((a + 0xC8000FFFu + odd) >> 13);  // (15 - 127) << 23 = 0xC8000000
  }
  return static_cast<std::uint16_t>(out | sign);
}

}  // namespace posenc::detail
