// The building blocks of svg.h: XML escaping, fixed-point numbers, nice ticks and colours.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string>

#include "posenc/report/svg.h"

namespace posenc::svg {
namespace {

std::string superscript(int exponent) {
  static const char* const kDigits[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  std::string digits = std::to_string(std::abs(exponent));
  std::string out = exponent < 0 ? "⁻" : "";
  for (char c : digits) out += kDigits[c - '0'];
  return out;
}

// Colour stops, evenly spaced over [0, 1].
// Viridis: matplotlib's viridis sampled at 0, 0.1, ..., 1 (van der Walt and Smith, 2015).
constexpr std::array<std::array<int, 3>, 11> kViridis{{{68, 1, 84},
                                                       {72, 36, 117},
                                                       {65, 68, 135},
                                                       {53, 95, 141},
                                                       {42, 120, 142},
                                                       {33, 145, 140},
                                                       {34, 168, 132},
                                                       {68, 191, 112},
                                                       {122, 209, 81},
                                                       {189, 223, 38},
                                                       {253, 231, 37}}};
// Diverging: ColorBrewer's 11-class RdBu, reversed so that low is blue and high is red.
constexpr std::array<std::array<int, 3>, 11> kDiverging{{{5, 48, 97},
                                                         {33, 102, 172},
                                                         {67, 147, 195},
                                                         {146, 197, 222},
                                                         {209, 229, 240},
                                                         {247, 247, 247},
                                                         {253, 219, 199},
                                                         {244, 165, 130},
                                                         {214, 96, 77},
                                                         {178, 24, 43},
                                                         {103, 0, 31}}};

std::string hex_color(double r, double g, double b) {
  static const char* const kHex = "0123456789abcdef";
  std::string out = "#";
  for (double c : {r, g, b}) {
    const int v = std::clamp(static_cast<int>(std::lround(c)), 0, 255);
    out += kHex[v / 16];
    out += kHex[v % 16];
  }
  return out;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') break;
        out += c;
    }
  }
  return out;
}

std::string fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "0";
  char buf[400];
  const auto [end, ec] =
      std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed, decimals);
  if (ec != std::errc()) return "0";
  std::string s(buf, end);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

namespace {

double nice_step(double lo, double hi, int target) {
  const double raw = (hi - lo) / std::max(1, target);
  if (!(raw > 0) || !std::isfinite(raw)) return 1.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double f = norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10;
  return f * mag;
}

}  // namespace

std::vector<double> linear_ticks(double lo, double hi, int target) {
  if (lo > hi) std::swap(lo, hi);
  const double step = nice_step(lo, hi, target);
  std::vector<double> ticks;
  const double eps = step * 1e-9;
  for (double k = std::ceil((lo - eps) / step); k * step <= hi + eps; k += 1) {
    double v = k * step;
    if (std::abs(v) < eps) v = 0;
    ticks.push_back(v);
    if (ticks.size() > 1000) break;
  }
  return ticks;
}

std::array<double, 2> nice_range(double lo, double hi, int target) {
  if (lo > hi) std::swap(lo, hi);
  const double step = nice_step(lo, hi, target);
  const double eps = step * 1e-9;
  return {std::floor((lo + eps) / step) * step, std::ceil((hi - eps) / step) * step};
}

std::vector<double> log_ticks(double lo, double hi) {
  if (lo > hi) std::swap(lo, hi);
  std::vector<double> ticks;
  if (!(lo > 0) || !std::isfinite(hi)) return ticks;
  const double decades = std::log10(hi / lo);
  std::vector<int> multiples = {1};
  int every = 1;
  if (decades < 1) {
    multiples = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  } else if (decades < 3) {
    multiples = {1, 2, 5};
  } else if (decades > 8) {
    every = static_cast<int>(std::ceil(decades / 8));
  }
  const int e0 = static_cast<int>(std::floor(std::log10(lo))) - 1;
  const int e1 = static_cast<int>(std::ceil(std::log10(hi))) + 1;
  for (int e = e0; e <= e1; ++e) {
    if (e % every != 0) continue;
    for (int m : multiples) {
      // 10^e as a literal power, so 1e-1 prints as 0.1 exactly.
      const double v = e >= 0 ? m * std::pow(10.0, e) : m / std::pow(10.0, -e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
    }
  }
  return ticks;
}

std::string tick_label(double value, Scale scale, double step) {
  if (scale == Scale::kLinear) {
    int decimals = 0;
    if (step > 0) decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    if (std::abs(value) >= 1e6 && step >= 1e5) {
      const int e = static_cast<int>(std::floor(std::log10(step)));
      return fixed(value / std::pow(10.0, e), 0) + "·10" + superscript(e);
    }
    return fixed(value, std::min(decimals, 12));
  }
  if (!(value > 0)) return fixed(value);
  const double e = std::log10(value);
  const int ei = static_cast<int>(std::lround(e));
  const bool power = std::abs(e - ei) < 1e-9;
  if (power && (ei < -2 || ei > 3)) return "10" + superscript(ei);
  if (!power && (ei < -2 || ei > 5)) {
    const int ef = static_cast<int>(std::floor(e + 1e-9));
    return fixed(value / std::pow(10.0, ef), 0) + "·10" + superscript(ef);
  }
  const int decimals = std::max(0, -static_cast<int>(std::floor(e + 1e-9)));
  return fixed(value, decimals);
}

std::string color_at(Colormap map, double t) {
  const auto& stops = map == Colormap::kViridis ? kViridis : kDiverging;
  if (!std::isfinite(t)) t = 0.5;
  t = std::clamp(t, 0.0, 1.0) * static_cast<double>(stops.size() - 1);
  const auto k = std::min(static_cast<std::size_t>(t), stops.size() - 2);
  const double f = t - static_cast<double>(k);
  const auto& a = stops[k];
  const auto& b = stops[k + 1];
  return hex_color(a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1]), a[2] + f * (b[2] - a[2]));
}

const std::vector<std::string>& palette() {
  // Tableau 10 (Tableau Software, 2016).
  static const std::vector<std::string> colors = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                  "#bcbd22", "#17becf"};
  return colors;
}

}  // namespace posenc::svg
