// src/rope/kernels/cos_sin_fast_kernel.h: the on-the-fly cos/sin kernels (internal): the step of
// the recurrence and the anchor rows (below).
//
// The step advances a double row (already scaled by the attention factor) by one rotation,
// (c, s) <- (c uc - s us, s uc + c us), and rounds it to float32, listing each pair whose rounding
// the error bound cannot decide (rope/cos_sin_fast.h has the bound and the exact fallback); `rows`
// times in one call, each row's floats out_stride after the previous one's.
#pragma once

#include <cstdint>

namespace posenc::detail {

struct CosSinStep {
  double* c = nullptr;  // n cosines and n sines in double, times the attention factor; advanced
  double* s = nullptr;
  const double* uc = nullptr;  // the step's n cosines and sines
  const double* us = nullptr;
  std::int64_t n = 0;
  double bound = 0.0;       // bound on |scaled entry - the exact path's double|, first row
  double bound_step = 0.0;  // what the bound grows by from one row to the next
  std::int64_t rows = 1;
  float* cos_out = nullptr;  // row r's n floats at cos_out + r * out_stride (sin_out likewise)
  float* sin_out = nullptr;
  std::int64_t out_stride = 0;
  std::int64_t* flagged = nullptr;  // room for rows * n: r * n + i for each pair i of row r where
                                    // [v - bound, v + bound] of the cos or the sin rounds to two
                                    // floats, in no particular order
};

// Runs on the dispatched SIMD target (targets.h). Returns how many pairs it flagged.
std::int64_t cos_sin_step(const CosSinStep& args);

// An anchor row in SIMD: for each pair i, cos and sin of position[i] * w[i] (the product exact, as
// in exact_sincos), times af, in double, and rounded to float32 where the interval of `bound`
// around each decides the rounding, as for a step. The reduction is exact_sincos's, operation for
// operation; sin and cos of the remainder are Taylor polynomials, each within 1.0 u (u = 2^-53)
// of the true value (the derivation is in cos_sin_fast_kernel.cc), where exact_sincos calls libm.
struct CosSinAnchor {
  const double* position = nullptr;  // per pair, an integer (rounded to double past 2^53)
  const double* w = nullptr;
  std::int64_t n = 0;
  double af = 1.0;
  double* c = nullptr;       // out: n cosines and n sines times af, in double; NaN where the pair's
  double* s = nullptr;       // angle is out of the polynomials' range (flagged)
  float* cos_out = nullptr;  // out: the floats; pairs flagged are left for the caller
  float* sin_out = nullptr;
  double bound = 0.0;               // bound on |entry - the exact path's double|
  std::int64_t* flagged = nullptr;  // room for n: each pair i whose rounding is not decided or
                                    // whose angle is out of range, ascending; on targets without
                                    // a fused multiply-add (SSE4 and below) every pair
};

// Runs on the dispatched SIMD target. Returns how many pairs it flagged.
std::int64_t cos_sin_anchor(const CosSinAnchor& args);

// Whether the dispatched target computes anchors in SIMD (it has a fused multiply-add); where it
// does not, cos_sin_anchor flags every pair.
bool cos_sin_anchor_in_simd();

}  // namespace posenc::detail
