// tests/reference/ggml_multi_reference.h: llama.cpp's CPU ggml_rope_multi (modes MROPE 8,
// VISION 24, IMROPE 40), written from ggml/src/ggml-cpu/ops.cpp (@0049e3cb, the same loops in
// ggml_compute_forward_rope_flt, ggml_mrope_cache_init, rope_yarn and rotate_pairs), independent
// of src/. The shared pieces of rope_yarn (corr dims, ramp, mscale) are ggml_reference.h's.
//
//   cache over i0 = 0, 2, .., ne0 - 2 (ne0 = head dim), pair i = i0 / 2:
//     sect_dims = s0 + s1 + s2 + s3, sec_w = s0 + s1, sec_e = sec_w + s2
//     sector = i % sect_dims
//     VISION: if sector == 0 reset theta_t; else if sector == s0 reset theta_h;
//             else if sector == sec_w reset theta_w; else if sector == sec_e reset theta_e
//     IMROPE: sector%3==1 && sector < 3 s1 -> h; %3==2 && < 3 s2 -> w; %3==0 && < 3 s0 -> t;
//             else e
//     else:   sector in [s0, sec_w) -> h; [sec_w, sec_w + s2) -> w; >= sec_w + s2 -> e; else t
//     rope_yarn(theta / ff[i], ..., i0, ...); cache[i0 + 1] *= sin_sign
//     theta_t, theta_w, theta_h, theta_e *= theta_scale
//   rotation: MROPE / IMROPE rotate_pairs(n_dims, n_dims / 2) and copy dims >= n_dims;
//             VISION rotate_pairs(ne0, n_dims): pairs (i, i + n_dims), i < n_dims
//
// rotate_pairs' x0*cos - x1*sin, x0*sin + x1*cos: `fused` as a build with FMA contraction computes
// it (y0 = fma(x0, c, -x1 s), y1 = fma(x1, c, x0 s), the design doc's rule on FMA targets), else
// each product rounded (ggml built without FMA, and posenc's SCALAR / SSE targets).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/ggml_reference.h"

namespace posenc_ggml {

enum class MultiMode { kMrope = 8, kVision = 24, kImrope = 40 };

struct MultiParams {
  Params rope;  // n_dims, freq_base, ..., freq_factors (one per cache pair used)
  MultiMode mode = MultiMode::kMrope;
  std::array<int, 4> sections{};
  int ne0 = 0;  // head dim
};

// The cache of one token: cache[2i] = cos, cache[2i + 1] = sin of pair i, for i < ne0 / 2.
inline std::vector<float> MultiCache(const MultiParams& m, const std::array<std::int32_t, 4>& pos,
                                     float sin_sign) {
  const Params& p = m.rope;
  const float neg_two = -2.0f;
  const float exponent = neg_two / static_cast<float>(p.n_dims);
  const float theta_scale = std::pow(Opaque(p.freq_base), Opaque(exponent));  // powf
  float corr[2];
  CorrDims(p, corr);
  const float mscale_base = p.attn_factor;
  const float base_t = static_cast<float>(static_cast<std::int64_t>(pos[0]));
  const float base_h = static_cast<float>(static_cast<std::int64_t>(pos[1]));
  const float base_w = static_cast<float>(static_cast<std::int64_t>(pos[2]));
  const float base_e = static_cast<float>(static_cast<std::int64_t>(pos[3]));
  float theta_t = base_t, theta_h = base_h, theta_w = base_w, theta_e = base_e;
  const int* s = m.sections.data();
  const int sect_dims = s[0] + s[1] + s[2] + s[3];
  const int sec_w = s[1] + s[0];
  const int sec_e = s[2] + sec_w;
  const bool is_imrope = m.mode == MultiMode::kImrope;
  const bool indep_sects = m.mode == MultiMode::kVision;
  std::vector<float> cache(static_cast<std::size_t>(m.ne0));
  for (int i0 = 0; i0 < m.ne0; i0 += 2) {
    // ggml reads ff[i0/2] for every cache pair; only the rotated ones matter.
    const std::size_t fi = static_cast<std::size_t>(i0 / 2);
    const float ff =
        p.freq_factors.empty() || fi >= p.freq_factors.size() ? 1.0f : p.freq_factors[fi];
    const int sector = (i0 / 2) % sect_dims;
    if (indep_sects) {
      if (sector == 0) {
        theta_t = base_t;
      } else if (sector == s[0]) {
        theta_h = base_h;
      } else if (sector == sec_w) {
        theta_w = base_w;
      } else if (sector == sec_e) {
        theta_e = base_e;
      }
    }
    float theta = theta_t;
    if (is_imrope) {
      if (sector % 3 == 1 && sector < 3 * s[1]) {
        theta = theta_h;
      } else if (sector % 3 == 2 && sector < 3 * s[2]) {
        theta = theta_w;
      } else if (sector % 3 == 0 && sector < 3 * s[0]) {
        theta = theta_t;
      } else {
        theta = theta_e;
      }
    } else {
      if (sector >= s[0] && sector < sec_w) {
        theta = theta_h;
      } else if (sector >= sec_w && sector < sec_w + s[2]) {
        theta = theta_w;
      } else if (sector >= sec_w + s[2]) {
        theta = theta_e;
      }
    }
    // rope_yarn(theta / ff, freq_scale, corr_dims, i0, ext_factor, mscale, ...)
    const float theta_extrap = theta / ff;
    const float theta_interp = p.freq_scale * theta_extrap;
    float t = theta_interp;
    float mscale = mscale_base;
    if (p.ext_factor != 0.0f) {
      const float ramp_mix = YarnRamp(corr[0], corr[1], i0 / 2) * p.ext_factor;
      const float one_minus = 1.0f - ramp_mix;
      const float a = theta_interp * one_minus;
      const float b = theta_extrap * ramp_mix;
      t = a + b;
      const float inv = 1.0f / p.freq_scale;
      const float l = std::log(Opaque(inv));  // logf
      const float k = 0.1f * l;
      const float mm = 1.0f + k;
      mscale = mscale * mm;
    }
    const float c = std::cos(Opaque(t));   // cosf
    const float sn = std::sin(Opaque(t));  // sinf
    cache[static_cast<std::size_t>(i0)] = c * mscale;
    cache[static_cast<std::size_t>(i0) + 1] = sn * mscale;
    cache[static_cast<std::size_t>(i0) + 1] *= sin_sign;
    theta_t *= theta_scale;
    theta_w *= theta_scale;
    theta_h *= theta_scale;
    theta_e *= theta_scale;
  }
  return cache;
}

// One head (ne0 floats, already converted from storage) rotated as ggml_compute_forward_rope_flt.
inline std::vector<float> RotateHead(const MultiParams& m, const std::vector<float>& cache,
                                     const std::vector<float>& src, bool fused) {
  std::vector<float> dst = src;  // MROPE / IMROPE copy the dims past n_dims
  const bool vision = m.mode == MultiMode::kVision;
  const int n = vision ? m.ne0 : m.rope.n_dims;
  const int n_offset = vision ? m.rope.n_dims : m.rope.n_dims / 2;
  for (int i0 = 0; i0 < n; i0 += 2) {
    const int ic = i0 / 2;
    const float c = cache[static_cast<std::size_t>(i0)];
    const float s = cache[static_cast<std::size_t>(i0) + 1];
    const float x0 = src[static_cast<std::size_t>(ic)];
    const float x1 = src[static_cast<std::size_t>(ic + n_offset)];
    const float x1s = x1 * s;
    const float x0s = x0 * s;
    if (fused) {
      dst[static_cast<std::size_t>(ic)] = std::fma(x0, c, -x1s);
      dst[static_cast<std::size_t>(ic + n_offset)] = std::fma(x1, c, x0s);
    } else {
      const float x0c = x0 * c;
      const float x1c = x1 * c;
      dst[static_cast<std::size_t>(ic)] = x0c - x1s;
      dst[static_cast<std::size_t>(ic + n_offset)] = x1c + x0s;
    }
  }
  return dst;
}

}  // namespace posenc_ggml
