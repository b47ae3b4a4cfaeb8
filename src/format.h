// src/format.h: how numbers appear in error messages and warnings (internal).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace posenc::detail {

// Shortest text that reads back as the same double: 0.5, 1, 1e-06, 1.2772588722239781.
inline std::string num(double v) {
  char buf[32];
  // Whole numbers print as such (40, not 4e+01).
  if (std::abs(v) < 1e15 && v == static_cast<double>(static_cast<long long>(v))) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace posenc::detail
