// tests/reference/rope_reference.h: an independent float64 reference for the RoPE scaling
// methods of docs/design.md §3, and an exact cos/sin of p * w.
//
// Written from the formulas in docs/design.md §3 alone; it includes no posenc header and shares no
// code with src/, so that a test comparing the two compares two independent derivations.
//
// Accuracy of the frequencies. Powers b^(-2i/D) are evaluated as powl with the exponent formed
// in long double (64-bit significand on x86-64): the exponent's rounding error is 2^-64
// relative, which moves w by |ln w| * 2^-64 <= 25 * 2^-64 < 2^-59 relative, and powl is within
// about one long-double ulp (2^-63). Rounding the result to double is then the only error that
// matters: every reference frequency is the correctly rounded double of the formula's value
// except in the (never observed) case where the exact value lies within ~2^-58 relative of a
// rounding boundary. Blends and divisions are done in long double too and rounded once. The
// YaRN correction dims are computed in double exactly as every implementation writes them
// (D * ln(L / (beta * 2 * pi)) / (2 ln b)), because their floor/ceil is part of the definition.
//
// Accuracy of ExactSinCos (derived below, at the function): the angle p * w is formed exactly
// and reduced modulo pi/2 with a 124-bit pi/2, so sin and cos are within 2^-60 (absolute) of
// the sin and cos of the exact real product p * w, for |p| < 2^32 and |p * w| < 2^33. (Checked
// once against a 400-bit evaluation in Python for p up to 2^31 - 1 and w in [3e-5, 2]: the
// largest error seen was 4.0e-20, about 2^-64.)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace posenc_ref {

inline constexpr double kPi = 3.141592653589793238462643383279502884;

// ---------------------------------------------------------------------------------------------
// Building blocks.

// g(s, m) = 1 if s <= 1 else 0.1 m ln(s) + 1 (YaRN paper eq. 22; DeepSeek's yarn_get_mscale).
inline double YarnG(double s, double m) {
  if (s <= 1.0) return 1.0;
  return static_cast<double>(0.1L * m * std::log(static_cast<long double>(s)) + 1.0L);
}

// b^(-2i/D) in long double (see the header comment for its accuracy).
inline long double PowNegL(double b, std::int64_t two_i, std::int64_t d) {
  const long double x = static_cast<long double>(two_i) / static_cast<long double>(d);
  return std::pow(static_cast<long double>(b), -x);
}

// Plain RoPE: w_i = b^(-2i/D), i in [0, D/2).
inline std::vector<double> DefaultInvFreq(std::int64_t d, double b) {
  std::vector<double> w(static_cast<std::size_t>(d / 2));
  for (std::int64_t i = 0; i < d / 2; ++i) w[i] = static_cast<double>(PowNegL(b, 2 * i, d));
  return w;
}

// Linear (Position Interpolation): w_i / s.
inline std::vector<double> LinearInvFreq(std::int64_t d, double b, double s) {
  std::vector<double> w(static_cast<std::size_t>(d / 2));
  for (std::int64_t i = 0; i < d / 2; ++i) {
    w[i] = static_cast<double>(PowNegL(b, 2 * i, d) / s);
  }
  return w;
}

// Static NTK-aware: the base becomes b * s^(D/(D-2)).
inline long double NtkBaseL(std::int64_t d, double b, double s) {
  const long double e = static_cast<long double>(d) / static_cast<long double>(d - 2);
  return b * std::pow(static_cast<long double>(s), e);
}

// w_i for a base given in long double.
inline std::vector<double> InvFreqForBase(std::int64_t d, long double base) {
  std::vector<double> w(static_cast<std::size_t>(d / 2));
  for (std::int64_t i = 0; i < d / 2; ++i) {
    const long double x = static_cast<long double>(2 * i) / static_cast<long double>(d);
    w[i] = static_cast<double>(std::pow(base, -x));
  }
  return w;
}

inline std::vector<double> NtkInvFreq(std::int64_t d, double b, double s) {
  return InvFreqForBase(d, NtkBaseL(d, b, s));
}

// Hunyuan's NTK alpha: the base becomes b * alpha^(D/(D-2)) (HunYuan's rotary embedding).
inline long double NtkAlphaBaseL(std::int64_t d, double b, double alpha) {
  return static_cast<long double>(b) *
         std::pow(static_cast<long double>(alpha),
                  static_cast<long double>(d) / static_cast<long double>(d - 2));
}

inline std::vector<double> NtkAlphaInvFreq(std::int64_t d, double b, double alpha) {
  return InvFreqForBase(d, NtkAlphaBaseL(d, b, alpha));
}

// Dynamic NTK (Hugging Face): l = max(seq_len, L'); base b * (s l / L' - (s - 1))^(D/(D-2)).
// seq_len 0 means "at initialisation", l = L' (the base is then b).
inline long double DynamicBaseL(std::int64_t d, double b, double s, std::int64_t max_pos,
                                std::int64_t seq_len) {
  const std::int64_t l = std::max(seq_len, max_pos);
  const long double arg = static_cast<long double>(s) * static_cast<long double>(l) /
                              static_cast<long double>(max_pos) -
                          (static_cast<long double>(s) - 1.0L);
  const long double e = static_cast<long double>(d) / static_cast<long double>(d - 2);
  return b * std::pow(arg, e);
}

inline std::vector<double> DynamicInvFreq(std::int64_t d, double b, double s, std::int64_t max_pos,
                                          std::int64_t seq_len) {
  return InvFreqForBase(d, DynamicBaseL(d, b, s, max_pos, seq_len));
}

// ---------------------------------------------------------------------------------------------
// YaRN.

struct YarnOptions {
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
  double extrapolation_factor = 1.0;
  bool paper_ramp = false;  // ramp in r = L / lambda (the paper) instead of the pair index
  std::optional<double> attention_factor;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
};

struct YarnResult {
  std::vector<double> inv_freq;
  std::vector<double> interpolation_weight;  // 1 - e_i: 0 kept, 1 divided by s
  double attention_factor = 1.0;
  double softmax_scale_multiplier = 1.0;
  double correction_low = 0.0;  // pair-index ramp only: after truncate and clamp, before guard
  double correction_high = 0.0;
};

// c(beta) = D ln(L / (2 pi beta)) / (2 ln b), written in the order of every implementation.
inline double YarnCorrectionDim(double beta, std::int64_t d, double b, std::int64_t orig) {
  return (static_cast<double>(d) * std::log(static_cast<double>(orig) / (beta * 2.0 * kPi))) /
         (2.0 * std::log(b));
}

// The attention factor rule of docs/design.md §3 (yarn row), and DeepSeek's softmax multiplier.
inline std::pair<double, double> YarnScalars(double s, const YarnOptions& o) {
  double af;
  if (o.attention_factor.has_value()) {
    af = *o.attention_factor;
  } else if (o.mscale.has_value() && o.mscale_all_dim.has_value() && *o.mscale != 0.0 &&
             *o.mscale_all_dim != 0.0) {
    af = YarnG(s, *o.mscale) / YarnG(s, *o.mscale_all_dim);
  } else {
    af = YarnG(s, 1.0);
  }
  double softmax = 1.0;
  if (o.mscale_all_dim.has_value() && *o.mscale_all_dim != 0.0) {
    const double g = YarnG(s, *o.mscale_all_dim);
    softmax = g * g;
  }
  return {af, softmax};
}

inline YarnResult YarnFrequencies(std::int64_t d, double b, double s, std::int64_t orig,
                                  const YarnOptions& o) {
  YarnResult r;
  const std::int64_t n = d / 2;
  r.inv_freq.resize(static_cast<std::size_t>(n));
  r.interpolation_weight.resize(static_cast<std::size_t>(n));
  std::tie(r.attention_factor, r.softmax_scale_multiplier) = YarnScalars(s, o);

  double lo = YarnCorrectionDim(o.beta_fast, d, b, orig);
  double hi = YarnCorrectionDim(o.beta_slow, d, b, orig);
  if (o.truncate) {
    lo = std::floor(lo);
    hi = std::ceil(hi);
  }
  lo = std::max(lo, 0.0);
  hi = std::min(hi, static_cast<double>(d - 1));
  r.correction_low = lo;
  r.correction_high = hi;
  if (lo == hi) hi += 0.001;

  for (std::int64_t i = 0; i < n; ++i) {
    const long double w = PowNegL(b, 2 * i, d);
    long double e;  // weight of the extrapolated (kept) frequency
    if (o.paper_ramp) {
      // r_i = L / lambda_i, lambda_i = 2 pi / w_i; gamma ramps from beta_slow to beta_fast.
      const long double ratio = static_cast<long double>(orig) * w / (2.0L * kPi);
      long double gamma;
      if (ratio < o.beta_slow) {
        gamma = 0.0L;
      } else if (ratio > o.beta_fast) {
        gamma = 1.0L;
      } else {
        gamma = (ratio - o.beta_slow) / (o.beta_fast - o.beta_slow);
      }
      e = gamma;
    } else {
      const double ramp = std::clamp((static_cast<double>(i) - lo) / (hi - lo), 0.0, 1.0);
      e = (1.0L - ramp) * o.extrapolation_factor;
    }
    r.inv_freq[i] = static_cast<double>((w / s) * (1.0L - e) + w * e);
    r.interpolation_weight[i] = static_cast<double>(1.0L - e);
  }
  return r;
}

// Dynamic-YaRN: yarn with s = max(1, seq_len / L); seq_len 0 (initialisation) gives s = 1.
inline double DynamicYarnScale(std::int64_t orig, std::int64_t seq_len) {
  if (seq_len <= 0) return 1.0;
  return std::max(1.0, static_cast<double>(seq_len) / static_cast<double>(orig));
}

// ---------------------------------------------------------------------------------------------
// Llama 3.

struct BlendResult {
  std::vector<double> inv_freq;
  std::vector<double> interpolation_weight;
};

// lambda = 2 pi / w: lambda < L/hf keep; lambda > L/lf divide by s; between blend with
// gamma = (L/lambda - lf) / (hf - lf): (1 - gamma) w / s + gamma w.
inline BlendResult Llama3InvFreq(std::int64_t d, double b, double s, std::int64_t orig,
                                 double low_freq_factor, double high_freq_factor) {
  BlendResult r;
  const std::int64_t n = d / 2;
  r.inv_freq.resize(static_cast<std::size_t>(n));
  r.interpolation_weight.resize(static_cast<std::size_t>(n));
  const long double high_wavelen = static_cast<long double>(orig) / high_freq_factor;
  const long double low_wavelen = static_cast<long double>(orig) / low_freq_factor;
  for (std::int64_t i = 0; i < n; ++i) {
    const long double w = PowNegL(b, 2 * i, d);
    const long double wavelen = 2.0L * kPi / w;
    long double gamma;  // weight of the kept frequency
    if (wavelen < high_wavelen) {
      gamma = 1.0L;
    } else if (wavelen > low_wavelen) {
      gamma = 0.0L;
    } else {
      gamma = (static_cast<long double>(orig) / wavelen - low_freq_factor) /
              (static_cast<long double>(high_freq_factor) - low_freq_factor);
    }
    r.inv_freq[i] = static_cast<double>((1.0L - gamma) * w / s + gamma * w);
    r.interpolation_weight[i] = static_cast<double>(1.0L - gamma);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// LongRoPE.

struct LongropeResult {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
  bool uses_long_factors = false;
};

// w_i / f_i with f the long factors iff seq_len > L; attention factor explicit, else
// sqrt(1 + ln s / ln L) (1 when s <= 1).
inline LongropeResult LongropeFrequencies(std::int64_t d, double b, double s, std::int64_t orig,
                                          const std::vector<double>& short_factor,
                                          const std::vector<double>& long_factor,
                                          std::optional<double> attention_factor,
                                          std::int64_t seq_len) {
  LongropeResult r;
  r.uses_long_factors = seq_len > orig;
  const std::vector<double>& f = r.uses_long_factors ? long_factor : short_factor;
  r.inv_freq.resize(static_cast<std::size_t>(d / 2));
  for (std::int64_t i = 0; i < d / 2; ++i) {
    r.inv_freq[i] = static_cast<double>(PowNegL(b, 2 * i, d) / f[i]);
  }
  if (attention_factor.has_value()) {
    r.attention_factor = *attention_factor;
  } else if (s <= 1.0) {
    r.attention_factor = 1.0;
  } else {
    r.attention_factor = static_cast<double>(std::sqrt(
        1.0L + std::log(static_cast<long double>(s)) / std::log(static_cast<long double>(orig))));
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Proportional RoPE: head_dim/2 slots; b^(-2i/d_h) / s for i < int(rho d_h / 2), 0 beyond.
inline std::int64_t ProportionalRotatedPairs(std::int64_t head_dim, double rho) {
  return static_cast<std::int64_t>(std::floor(rho * static_cast<double>(head_dim) / 2.0));
}

inline std::vector<double> ProportionalInvFreq(std::int64_t head_dim, double b, double s,
                                               double rho) {
  const std::int64_t k = ProportionalRotatedPairs(head_dim, rho);
  std::vector<double> w(static_cast<std::size_t>(head_dim / 2), 0.0);
  for (std::int64_t i = 0; i < k && i < head_dim / 2; ++i) {
    w[i] = static_cast<double>(PowNegL(b, 2 * i, head_dim) / s);
  }
  return w;
}

// ---------------------------------------------------------------------------------------------
// Exact sin and cos of p * w.
//
// 1. The product. w is a double: w = w_hi + w_lo, w_hi its leading 32 significand bits and w_lo
//    the remaining 21 (both exact doubles). For |p| < 2^32, p * w_hi needs at most 64 bits and
//    p * w_lo at most 53: both are exact in long double (64-bit significand). So A = p * w_hi
//    and B = p * w_lo are exact and A + B = p * w exactly.
// 2. The reduction. pi/2 = C1 + C2 + C3 + d with C1 = 0x1.921FB54p0 (29 bits, below pi/2),
//    C2 = 0x442D1846p-60 (31 bits), C3 = 0x9898CC51701B839Ap-124 (64 bits), |d| < 2^-124
//    (pi/2 = 0x1.921FB54442D18469898CC51701B839A252049C11..., checked against a Machin-formula
//    evaluation with big integers). For k = nearest integer to A / (pi/2), |A| < 2^33 gives
//    |k| < 2^33, so k*C1 (62 bits) and k*C2 (64 bits) are exact; A - k*C1 is exact by
//    Sterbenz's lemma (C1 < pi/2 keeps k*C1/2 <= A <= 2*k*C1); subtracting k*C2 leaves at
//    most pi/4 + 2^-60 and rounds by at most 2^-64; k*C3 (< 2^-27) and its subtraction add
//    < 2^-90; k*d < 2^-91. B is reduced the same way (|B| <= |p| * |w_lo| < 2^-31 |p w|).
//    Adding the two reduced parts rounds by at most 2^-64 (|r| < 2). Total: |r - (p w mod
//    pi/2)| < 2^-62.
// 3. sinl and cosl of |r| < 2 (glibc x87: within a few long-double ulps, < 2^-61 absolute), and
//    the quadrant (k mod 4) maps them exactly to sin and cos of p * w.
// Result: |error| < 2^-60 absolute, 2^7 times smaller than half a double ulp at 1.

namespace internal {

// Splits a finite double into its leading 32 significand bits and the rest.
inline void Split32(double w, double& hi, double& lo) {
  if (w == 0.0 || !std::isfinite(w)) {
    hi = w;
    lo = 0.0;
    return;
  }
  int e = 0;
  const double m = std::frexp(w, &e);  // |m| in [0.5, 1)
  hi = std::ldexp(std::trunc(std::ldexp(m, 32)), e - 32);
  lo = w - hi;  // exact: the low 21 bits
}

// x (an exact long double, |x| < 2^33) reduced modulo pi/2: x = k pi/2 + r, |r| <= ~pi/4.
inline long double ReduceHalfPi(long double x, std::int64_t& k) {
  constexpr long double kC1 = 0x1.921FB54p0L;
  constexpr long double kC2 = 0x442D1846p-60L;
  constexpr long double kC3 = 0x9898CC51701B839Ap-124L;
  const long double kf = std::nearbyint(x / (kC1 + kC2));
  k = static_cast<std::int64_t>(kf);
  long double r = x - kf * kC1;  // exact (Sterbenz)
  r -= kf * kC2;                 // k*C2 exact; one rounding of the difference
  r -= kf * kC3;
  return r;
}

}  // namespace internal

// sin and cos of the exact real product position * w, |position| < 2^32, |position * w| < 2^33,
// in long double (for callers that round once, to double or to float).
inline void ExactSinCosL(std::int64_t position, double w, long double& sin_out,
                         long double& cos_out) {
  double w_hi = 0.0, w_lo = 0.0;
  internal::Split32(w, w_hi, w_lo);
  const long double a = static_cast<long double>(position) * w_hi;  // exact
  const long double b = static_cast<long double>(position) * w_lo;  // exact
  std::int64_t ka = 0, kb = 0;
  const long double r = internal::ReduceHalfPi(a, ka) + internal::ReduceHalfPi(b, kb);
  const long double s = std::sin(r);
  const long double c = std::cos(r);
  switch (static_cast<int>(((ka + kb) % 4 + 4) % 4)) {
    case 0:  // p w = r
      sin_out = s;
      cos_out = c;
      break;
    case 1:  // p w = pi/2 + r
      sin_out = c;
      cos_out = -s;
      break;
    case 2:  // p w = pi + r
      sin_out = -s;
      cos_out = -c;
      break;
    default:  // p w = 3 pi/2 + r
      sin_out = -c;
      cos_out = s;
      break;
  }
}

// The same, rounded once to double.
inline void ExactSinCos(std::int64_t position, double w, double& sin_out, double& cos_out) {
  long double s = 0.0L, c = 0.0L;
  ExactSinCosL(position, w, s, c);
  sin_out = static_cast<double>(s);
  cos_out = static_cast<double>(c);
}

}  // namespace posenc_ref
