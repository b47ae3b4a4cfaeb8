// src/core/pi_reduction.h: pi/2 in three doubles, for the exact reduction of angles below 2^31
// (internal: exact_sincos in cos_sin.cc and the SIMD anchor rows in rope/kernels, which must reduce
// an angle to the same remainder, bit for bit).
#pragma once

namespace posenc::detail {

// pi/2 as the unevaluated sum of three doubles (Cody-Waite): kHalfPi1 is pi/2 rounded to double,
// kHalfPi2 the rounding error of that, kHalfPi3 the error of the pair. Together ~160 bits of
// pi/2, enough to reduce any angle below 2^31 without losing a bit of the remainder.
inline constexpr double kHalfPi1 = 1.570796326794896558e+00;
inline constexpr double kHalfPi2 = 6.123233995736766036e-17;
inline constexpr double kHalfPi3 = -1.497384904859169833e-33;
inline constexpr double kTwoOverPi = 0.63661977236758134308;

}  // namespace posenc::detail
