// tests/reference/ggml_reference.h: llama.cpp's CPU rope (ggml_rope_cache_init, rope_yarn,
// rope_yarn_ramp, ggml_rope_yarn_corr_dims), emulated independently of src/ from its published
// description (the comment of include/posenc/core/ggml.h, and ggml-cpu's ops):
//
//   theta_scale = powf(freq_base, -2.0f / n_dims)
//   corr_dim(b) = n_dims * logf(n_ctx_orig / (b * 2 * (float)M_PI)) / (2 * logf(freq_base))
//   dims        = { max(0, floorf(corr_dim(beta_fast))),
//                   min(n_dims - 1, ceilf(corr_dim(beta_slow))) }
//   theta       = (float)p, and per pair i:
//                    theta_extrap = theta / ff[i]; then theta *= theta_scale
//                    theta_interp = freq_scale * theta_extrap
//   ext_factor != 0: ramp = 1 - min(1, max(0, (i - lo) / max(0.001f, hi - lo)));
//                    mix = ramp * ext_factor;
//                    theta = theta_interp * (1 - mix) + theta_extrap * mix;
//                    mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale)
//   cos, sin    = cosf(theta) * mscale, sinf(theta) * mscale
//
// All float32, every operation its own statement (tests built with -ffp-contract=off, so no
// FMA contraction). powf, logf, cosf and sinf are the C library's, as ggml calls them: the
// emulation is of llama.cpp on this platform (glibc), not of a correctly rounded ideal. The
// difference is visible: glibc's sinf/cosf are faithful, not correctly rounded, and swapping
// them for correctly rounded ones changes about 0.5% of the cos/sin values of
// frequencies_reference_test's ggml grid (2558 entries), so that test tells the two apart.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace posenc_ggml {

// Hides a value from the optimiser, so that a libm call on constant arguments is not folded at
// compile time (GCC folds powf/logf/cosf with MPFR, correctly rounded, which is not what the C
// library computes at run time).
inline float Opaque(float x) {
  volatile float v = x;
  return v;
}

struct Params {
  int n_dims = 0;
  int n_ctx_orig = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  std::vector<float> freq_factors;  // empty or n_dims / 2
};

// ggml_rope_yarn_corr_dim (float arithmetic, left to right as written in C).
inline float CorrDim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  const float pi_f = static_cast<float>(3.14159265358979323846);  // (float)M_PI
  const float two_rot = n_rot * 2.0f;
  const float denom = two_rot * pi_f;
  const float ratio = static_cast<float>(n_ctx_orig) / denom;
  const float num = static_cast<float>(n_dims) * std::log(Opaque(ratio));  // logf
  const float log_base = std::log(Opaque(base));
  const float den2 = 2.0f * log_base;
  return num / den2;
}

inline void CorrDims(const Params& p, float dims[2]) {
  const float start = std::floor(CorrDim(p.n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base));
  const float end = std::ceil(CorrDim(p.n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(p.n_dims - 1), end);
}

// rope_yarn_ramp(low, high, i0) with i0 = 2i.
inline float YarnRamp(float low, float high, int pair) {
  const float num = static_cast<float>(pair) - low;
  const float den = std::max(0.001f, high - low);
  const float y = num / den;
  const float clamped = std::min(1.0f, std::max(0.0f, y));
  return 1.0f - clamped;
}

// The multiplier of cos and sin: attn_factor * (1 + 0.1 ln(1/freq_scale)) when ext_factor != 0.
inline float Mscale(const Params& p) {
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) {
    const float inv = 1.0f / p.freq_scale;
    const float l = std::log(Opaque(inv));  // logf
    const float t = 0.1f * l;
    const float m = 1.0f + t;
    mscale = mscale * m;
  }
  return mscale;
}

// The rotation angles ggml uses at `position` (before cosf/sinf), one per pair.
inline std::vector<float> Angles(const Params& p, std::int64_t position) {
  const float neg_two = -2.0f;
  const float exponent = neg_two / static_cast<float>(p.n_dims);
  const float theta_scale = std::pow(Opaque(p.freq_base), Opaque(exponent));  // powf
  float dims[2];
  CorrDims(p, dims);
  float theta = static_cast<float>(position);
  std::vector<float> out(static_cast<std::size_t>(p.n_dims / 2));
  for (int i = 0; i < p.n_dims / 2; ++i) {
    const float ff = p.freq_factors.empty() ? 1.0f : p.freq_factors[i];
    const float extrap = theta / ff;
    const float interp = p.freq_scale * extrap;
    float t = interp;
    if (p.ext_factor != 0.0f) {
      const float ramp = YarnRamp(dims[0], dims[1], i);
      const float mix = ramp * p.ext_factor;
      const float one_minus = 1.0f - mix;
      const float a = interp * one_minus;
      const float b = extrap * mix;
      t = a + b;
    }
    out[i] = t;
    theta = theta * theta_scale;
  }
  return out;
}

// cos and sin at `position`: cosf(theta) * mscale, sinf(theta) * mscale.
inline void CosSinAt(const Params& p, std::int64_t position, std::vector<float>& cos_out,
                     std::vector<float>& sin_out) {
  const std::vector<float> angles = Angles(p, position);
  const float mscale = Mscale(p);
  cos_out.resize(angles.size());
  sin_out.resize(angles.size());
  for (std::size_t i = 0; i < angles.size(); ++i) {
    const float c = std::cos(Opaque(angles[i]));  // cosf
    const float s = std::sin(Opaque(angles[i]));  // sinf
    cos_out[i] = c * mscale;
    sin_out[i] = s * mscale;
  }
}

}  // namespace posenc_ggml
