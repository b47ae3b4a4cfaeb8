// src/rope/kernels/cos_sin_fast_kernel.h: one step of the on-the-fly cos/sin recurrence (internal).
//
// Advances a double row (already scaled by the attention factor) by one rotation,
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
                                    // floats, ascending
};

// Runs on the dispatched SIMD target (targets.h). Returns how many pairs it flagged.
std::int64_t cos_sin_step(const CosSinStep& args);

}  // namespace posenc::detail
