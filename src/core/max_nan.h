// src/core/max_nan.h: the largest of two differences, where NaN wins (internal).
//
// std::max(worst, NaN) returns worst, so a NaN difference would read as agreement; every
// max-difference computation in compare, doctor and the report goes through this instead.
#pragma once

#include <cmath>

namespace posenc::detail {

inline double max_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::nan("");
  return a < b ? b : a;
}

}  // namespace posenc::detail
