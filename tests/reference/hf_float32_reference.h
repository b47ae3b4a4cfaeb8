// tests/reference/hf_float32_reference.h: what Hugging Face transformers computes in float32,
// operation by operation, emulated independently of src/.
//
// Each function follows one function of transformers' modeling_rope_utils.py (and, for dynamic
// NTK, the forward-pass update), with torch's CPU semantics:
//   - a Python scalar meeting a float32 tensor is first rounded to float32 (fl32 below);
//   - `scalar / tensor` is `tensor.reciprocal() * scalar` (torch's __rtruediv__): two roundings;
//   - `tensor / scalar`, `tensor * scalar`, `tensor - scalar`: one float32 operation;
//   - `base ** tensor` is torch 1.13's pow_tensor_tensor kernel (Debian's build, system
//     libsleef 3.5.1): its vectorized loop takes 2 vectors per step, W = 16 floats under the AVX2
//     capability (32 under AVX512), through Sleef's FMA powf, and the last n mod W entries
//     through the C library's powf; the DEFAULT capability uses powf throughout (PowTensor);
//   - `tensor ** scalar` on a 0-dim tensor is std::pow(float, double): long double here, rounded
//     once (the same value);
//   - cos/sin are Sleef's vector cosf/sinf over the contiguous emb row (no scalar tail; a lane's
//     result depends on its 8-lane group, TorchCosSinRow), cosf/sinf under DEFAULT;
//   - the capability: ATEN_CPU_CAPABILITY ("default", "avx2", "avx512", anything else ignored),
//     else AVX2 when the CPU has AVX2 and FMA, else DEFAULT (torch never picks AVX512 itself).
//   - comparisons of a float32 tensor with a Python float compare with fl32 of the float;
//   - torch.arange(0, D, 2) is int64, `.float()` converts exactly, `/ D` is a float32 division.
// Every float32 operation is written as its own statement with a store into a float, and the
// tests that include this file are compiled with -ffp-contract=off, so nothing is fused and
// nothing is kept in extended precision (x86-64 SSE: FLT_EVAL_METHOD 0).
//
// Results are the float32 values; tests widen them to double exactly to compare with posenc.
#pragma once

#include <sleef.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "reference/rope_reference.h"

// sleef.h declares these only under FP_FAST_FMA (-mfma); they need an FMA CPU, which the AVX2
// capability implies.
extern "C" {
float Sleef_powf1_u10purecfma(float, float);
float Sleef_cosf1_u10purecfma(float);
float Sleef_sinf1_u10purecfma(float);
}
#include <immintrin.h>
// libsleef's dispatcher, as torch's Vectorized<float>::cos calls it; declared for AVX callers
// (clang refuses __m256 arguments across a call whose callee is not AVX-enabled).
extern "C" {
__attribute__((target("avx2,fma"))) __m256 Sleef_cosf8_u10(__m256);
__attribute__((target("avx2,fma"))) __m256 Sleef_sinf8_u10(__m256);
}

namespace posenc_hf {

// Rounds a double (a Python float, or an int64 seq_len) to float32.
inline float Fl32(double x) { return static_cast<float>(x); }

// torch's CPU capability, from the rule in the header comment. Width() is the pow loop's block.
enum class Cap { kDefault, kAvx2, kAvx512 };

inline Cap CapabilityNow() {
  if (const char* v = std::getenv("ATEN_CPU_CAPABILITY")) {
    if (std::strcmp(v, "default") == 0) return Cap::kDefault;
    if (std::strcmp(v, "avx2") == 0) return Cap::kAvx2;
    if (std::strcmp(v, "avx512") == 0) return Cap::kAvx512;
  }
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Cap::kAvx2
                                                                         : Cap::kDefault;
}

inline Cap Capability() {
  static const Cap kCap = CapabilityNow();
  return kCap;
}

inline std::size_t Width(Cap c) { return c == Cap::kAvx512 ? 32 : c == Cap::kAvx2 ? 16 : 0; }

// The two float32 pows torch's kernel uses.
inline float SleefPowF(float base, float exponent) {
  return Sleef_powf1_u10purecfma(base, exponent);
}
inline float LibmPowF(float base, float exponent) { return ::powf(base, exponent); }

// `fl32(base) ** exponents`, one whole tensor (the function depends on the index and size).
inline std::vector<float> PowTensor(float base, const std::vector<float>& exponents,
                                    Cap cap = Capability()) {
  const std::size_t w = Width(cap);
  const std::size_t body = w == 0 ? 0 : exponents.size() / w * w;
  std::vector<float> p(exponents.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    p[i] = i < body ? SleefPowF(base, exponents[i]) : LibmPowF(base, exponents[i]);
  }
  return p;
}

// torch.cos / torch.sin over one contiguous emb row [angles, angles] (vec::map): AVX2 runs
// Sleef_cosf8_u10 on each 8 consecutive floats of the row, zero-padding the last; a Sleef vector
// whose lanes are not all below 125 in magnitude reduces every lane the Payne-Hanek way. AVX512
// (16 lanes, not runnable here) is emulated by pushing each lane of a 16-group that has such a
// lane through an 8-vector padded with 125s. Returns the first n slots.
__attribute__((target("avx2,fma"))) inline void Sleef8(const float* in, float* c, float* s) {
  const __m256 v = _mm256_loadu_ps(in);
  _mm256_storeu_ps(c, Sleef_cosf8_u10(v));
  _mm256_storeu_ps(s, Sleef_sinf8_u10(v));
}

inline void TorchCosSinRow(const std::vector<float>& angles, std::vector<float>& cos_out,
                           std::vector<float>& sin_out, Cap cap = Capability()) {
  const std::size_t n = angles.size();
  cos_out.assign(n, 0.0f);
  sin_out.assign(n, 0.0f);
  if (cap == Cap::kDefault) {
    for (std::size_t i = 0; i < n; ++i) {
      cos_out[i] = ::cosf(angles[i]);
      sin_out[i] = ::sinf(angles[i]);
    }
    return;
  }
  const std::size_t lanes = cap == Cap::kAvx512 ? 16 : 8;
  std::vector<float> row(2 * n + lanes, 0.0f);  // zero padding past the row
  for (std::size_t j = 0; j < 2 * n; ++j) row[j] = angles[j % n];
  float c[8], s[8];
  for (std::size_t lo = 0; lo < n; lo += lanes) {
    if (lanes == 8) {
      Sleef8(&row[lo], c, s);
      for (std::size_t k = 0; k < 8 && lo + k < n; ++k) {
        cos_out[lo + k] = c[k];
        sin_out[lo + k] = s[k];
      }
      continue;
    }
    bool any_big = false;
    for (std::size_t k = 0; k < 16; ++k) any_big = any_big || !(std::fabs(row[lo + k]) < 125.0f);
    for (std::size_t k = 0; k < 16 && lo + k < n; ++k) {
      float v[8] = {row[lo + k], 0, 0, 0, 0, 0, 0, 0};
      if (any_big) std::fill(v + 1, v + 8, 125.0f);
      Sleef8(v, c, s);
      cos_out[lo + k] = c[0];
      sin_out[lo + k] = s[0];
    }
  }
}

// 1.0 / t: reciprocal, then * 1.0 (exact).
inline float Recip(float t) { return 1.0f / t; }

// torch.arange(0, D, 2, dtype=int64).float() / D: the exponents 2i/D in float32.
inline std::vector<float> Exponents(std::int64_t d, std::int64_t count) {
  std::vector<float> x(static_cast<std::size_t>(count));
  const float df = static_cast<float>(d);
  for (std::int64_t i = 0; i < count; ++i) {
    const float two_i = static_cast<float>(2 * i);
    x[i] = two_i / df;
  }
  return x;
}

// _compute_default_rope_parameters: 1.0 / (base ** (arange(0, D, 2).float() / D)).
inline std::vector<float> DefaultInvFreq(std::int64_t d, double base) {
  const std::vector<float> x = Exponents(d, d / 2);
  const float bf = Fl32(base);
  const std::vector<float> p = PowTensor(bf, x);
  std::vector<float> w(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) w[i] = Recip(p[i]);
  return w;
}

// _compute_linear_scaling_rope_parameters: default, then `inv_freq /= factor`.
inline std::vector<float> LinearInvFreq(std::int64_t d, double base, double factor) {
  std::vector<float> w = DefaultInvFreq(d, base);
  const float f = Fl32(factor);
  for (float& v : w) v = v / f;
  return w;
}

// _compute_ntk_parameters: base = base * factor ** (dim / (dim - 2)) in Python doubles, then the
// default formula with that base (rounded to float32 by `base ** tensor`).
inline double NtkBase(std::int64_t d, double base, double factor) {
  const double e = static_cast<double>(d) / static_cast<double>(d - 2);
  return base * std::pow(factor, e);
}

inline std::vector<float> NtkInvFreq(std::int64_t d, double base, double factor) {
  return DefaultInvFreq(d, NtkBase(d, base, factor));
}

// Dynamic NTK in the forward pass (`_dynamic_frequency_update` / `dynamic_rope_update`):
// seq_len = max(position_ids) + 1 is an int64 0-dim tensor, so once it exceeds L'
//   base' = base * ((factor * seq_len / L') - (factor - 1)) ** (dim / (dim - 2))
// runs in float32 tensor arithmetic: fl32(fl32(s) * fl32(seq_len)), / fl32(L'), - fl32(s - 1),
// then `** (D / (D - 2))` and fl32(base) * . The exponent is NOT rounded to float32: torch's
// pow_tensor_scalar hands a 0-dim float tensor and a Python-float exponent to
// std::pow(float, double), a double pow whose result is rounded once to float (checked on
// torch 1.13: InternLM2.5's base at 65536 is 3052773.75; a float32 exponent gives 3052774).
// At seq_len <= L' (and at initialisation) the buffer keeps the default inv_freq.
inline float DynamicBase(std::int64_t d, double base, double factor, std::int64_t max_pos,
                         std::int64_t seq_len) {
  const float s = Fl32(factor);
  const float l = Fl32(static_cast<double>(seq_len));
  const float prod = s * l;
  const float ratio = prod / Fl32(static_cast<double>(max_pos));
  const float arg = ratio - Fl32(factor - 1.0);
  const double e = static_cast<double>(d) / static_cast<double>(d - 2);
  const float powered =
      static_cast<float>(std::pow(static_cast<long double>(arg), static_cast<long double>(e)));
  return Fl32(base) * powered;
}

inline std::vector<float> DynamicInvFreq(std::int64_t d, double base, double factor,
                                         std::int64_t max_pos, std::int64_t seq_len) {
  if (seq_len <= max_pos) return DefaultInvFreq(d, base);
  const float bf = DynamicBase(d, base, factor, max_pos, seq_len);
  const std::vector<float> x = Exponents(d, d / 2);
  const std::vector<float> p = PowTensor(bf, x);
  std::vector<float> w(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) w[i] = Recip(p[i]);
  return w;
}

// _compute_yarn_parameters.
struct YarnResult {
  std::vector<float> inv_freq;
  double attention_factor = 1.0;  // a Python float; cos/sin multiply by fl32 of it
  double softmax_scale_multiplier = 1.0;
  double low = 0.0;
  double high = 0.0;
};

inline YarnResult YarnFrequencies(std::int64_t d, double base, double factor, std::int64_t orig,
                                  const posenc_ref::YarnOptions& o) {
  YarnResult r;
  std::tie(r.attention_factor, r.softmax_scale_multiplier) = posenc_ref::YarnScalars(factor, o);
  const std::int64_t n = d / 2;
  // pos_freqs = base ** (arange(0, dim, 2).float() / dim)
  const std::vector<float> x = Exponents(d, n);
  const float bf = Fl32(base);
  const float sf = Fl32(factor);
  const std::vector<float> pos_freqs = PowTensor(bf, x);
  std::vector<float> extrap(n), interp(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const float pos = pos_freqs[i];
    extrap[i] = Recip(pos);         // 1.0 / pos_freqs
    const float scaled = sf * pos;  // factor * pos_freqs
    interp[i] = Recip(scaled);      // 1.0 / (factor * pos_freqs)
  }
  // find_correction_range, in Python doubles.
  double low = posenc_ref::YarnCorrectionDim(o.beta_fast, d, base, orig);
  double high = posenc_ref::YarnCorrectionDim(o.beta_slow, d, base, orig);
  if (o.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(d - 1));
  r.low = low;
  r.high = high;
  // linear_ramp_factor(low, high, dim // 2)
  if (low == high) high += 0.001;
  const float low_f = Fl32(low);
  const float span_f = Fl32(high - low);
  r.inv_freq.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const float idx = static_cast<float>(i);  // torch.arange(dim, dtype=float32)
    const float shifted = idx - low_f;
    const float linear = shifted / span_f;
    const float ramp = std::clamp(linear, 0.0f, 1.0f);
    const float e = 1.0f - ramp;  // inv_freq_extrapolation_factor
    const float one_minus_e = 1.0f - e;
    const float a = interp[i] * one_minus_e;
    const float b = extrap[i] * e;
    r.inv_freq[i] = a + b;
  }
  return r;
}

// _compute_llama3_parameters, torch.where semantics.
inline std::vector<float> Llama3InvFreq(std::int64_t d, double base, double factor,
                                        std::int64_t orig, double low_freq_factor,
                                        double high_freq_factor) {
  const std::vector<float> inv = DefaultInvFreq(d, base);
  const double low_freq_wavelen = static_cast<double>(orig) / low_freq_factor;
  const double high_freq_wavelen = static_cast<double>(orig) / high_freq_factor;
  const float low_wl = Fl32(low_freq_wavelen);
  const float high_wl = Fl32(high_freq_wavelen);
  const float two_pi = Fl32(2.0 * posenc_ref::kPi);  // 2 * math.pi
  const float f = Fl32(factor);
  const float old_len = Fl32(static_cast<double>(orig));
  const float lf = Fl32(low_freq_factor);
  const float hl = Fl32(high_freq_factor - low_freq_factor);
  std::vector<float> out(inv.size());
  for (std::size_t i = 0; i < inv.size(); ++i) {
    // wavelen = 2 * math.pi / inv_freq
    const float r1 = Recip(inv[i]);
    const float wavelen = r1 * two_pi;
    // inv_freq_llama = where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    const float divided = inv[i] / f;
    const float llama = wavelen > low_wl ? divided : inv[i];
    // smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high - low)
    const float r2 = Recip(wavelen);
    const float ratio = r2 * old_len;
    const float shifted = ratio - lf;
    const float smooth = shifted / hl;
    // smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    const float one_minus = 1.0f - smooth;
    const float t1 = one_minus * llama;
    const float t2 = t1 / f;
    const float t3 = smooth * llama;
    const float smoothed = t2 + t3;
    const bool is_medium = !(wavelen < high_wl) && !(wavelen > low_wl);
    out[i] = is_medium ? smoothed : llama;
  }
  return out;
}

// _compute_longrope_parameters: 1.0 / (ext_factors * base ** inv_freq_shape), ext_factors a
// float32 tensor of the chosen list.
inline std::vector<float> LongropeInvFreq(std::int64_t d, double base,
                                          const std::vector<double>& factors) {
  const std::vector<float> x = Exponents(d, d / 2);
  const float bf = Fl32(base);
  const std::vector<float> pos_freqs = PowTensor(bf, x);
  std::vector<float> w(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float p = pos_freqs[i];
    const float ext = Fl32(factors[i]);
    const float prod = ext * p;
    w[i] = Recip(prod);
  }
  return w;
}

// _compute_proportional_rope_parameters: rope_angles = int(rho * head_dim // 2);
// 1.0 / (base ** (arange(0, 2 * rope_angles, 2).float() / head_dim)), zeros to head_dim // 2,
// then / factor.
inline std::vector<float> ProportionalInvFreq(std::int64_t head_dim, double base, double factor,
                                              double rho) {
  const std::int64_t k = posenc_ref::ProportionalRotatedPairs(head_dim, rho);
  const std::vector<float> x = Exponents(head_dim, k);
  const float bf = Fl32(base);
  const float f = Fl32(factor);
  const std::vector<float> p = PowTensor(bf, x);
  std::vector<float> w(static_cast<std::size_t>(head_dim / 2), 0.0f);
  for (std::int64_t i = 0; i < k; ++i) w[i] = Recip(p[i]);
  for (float& v : w) v = v / f;
  return w;
}

// cos and sin at one position: freqs = fl32(p) * inv_freq (one float32 product), then
// emb.cos() * attention_scaling: torch's float32 cos, times fl32(attention_factor), rounded.
inline void CosSinAt(const std::vector<float>& inv_freq, double attention_factor,
                     std::int64_t position, std::vector<float>& cos_out,
                     std::vector<float>& sin_out) {
  const float p = Fl32(static_cast<double>(position));
  const float af = Fl32(attention_factor);
  std::vector<float> angle(inv_freq.size()), cf, sf;
  for (std::size_t i = 0; i < inv_freq.size(); ++i) angle[i] = p * inv_freq[i];
  TorchCosSinRow(angle, cf, sf);
  cos_out.resize(inv_freq.size());
  sin_out.resize(inv_freq.size());
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    cos_out[i] = cf[i] * af;
    sin_out[i] = sf[i] * af;
  }
}

}  // namespace posenc_hf
