// src/format.h: how numbers appear in error messages and warnings (internal).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace posenc::detail {

// Shortest text that reads back as the same double: 0.5, 1, 1e-06, 1.2772588722239781.
inline std::string num(double v) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace posenc::detail
