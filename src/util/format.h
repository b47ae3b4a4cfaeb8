// src/util/format.h: how numbers appear in messages, warnings, tables and figures (internal). One
// family, each name saying what it prints:
//   num(v)            whole numbers as such (40), others the shortest %g that reads back (0.5)
//   shortest(v)       std::to_chars' shortest round trip, never %g's exponent for 40 (40, 0.001)
//   sig(v, digits)    printf's %.<digits>g: that many significant digits (0.123, 1.23e+04)
//   sci(v, digits)    printf's %.<digits>e: scientific, that many decimals (1.23e-05)
//   fixed(v, decimals) printf's %.<decimals>f: fixed point, that many decimals (3.142)
// (svg::fixed is the figures' own fixed point: locale-free, trailing zeros dropped.)
#pragma once

#include <charconv>
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

inline std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// printf of one double with a precision; sized for any value (%.2f of 1e300 is 303 bytes).
inline std::string printf_precision(const char* format, int precision, double v) {
  const int n = std::snprintf(nullptr, 0, format, precision, v);
  std::string s(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
  std::snprintf(s.data(), s.size() + 1, format, precision, v);
  return s;
}

inline std::string sig(double v, int digits) { return printf_precision("%.*g", digits, v); }
inline std::string sci(double v, int digits) { return printf_precision("%.*e", digits, v); }
inline std::string fixed(double v, int decimals) { return printf_precision("%.*f", decimals, v); }

}  // namespace posenc::detail
