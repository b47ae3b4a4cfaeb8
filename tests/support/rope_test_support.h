// tests/support/rope_test_support.h: what the kernel tests share (test-only): a tensor of any
// dtype as bytes, the specs they rotate with, and the check against the exact rotation.
//
//
// Tolerances, per dtype (x = input pair, |x| its norm, af the attention factor):
//   f32: the kernel rounds c and s to float32 (0.5 ulp each, relative to af), then forms
//        x_a c - x_b s with one rounded product and one fused multiply-add (<= 1.5 ulp of
//        af |x|). Total <= ~2.5 ulp of af |x|; the bound checked is 4 float32 ulps of af |x|
//        (the budget), i.e. 4 * 2^-23 * 2^floor(log2(af |x|)).
//   f16, bf16: inputs are exact in the storage type; the float32 math above adds at most
//        2.5 * 2^-24 af |x| before the final rounding to nearest even, which adds 0.5 ulp of the
//        storage type. So the output is within 1 storage ulp of the exact result whenever that
//        result is not tiny against the pair norm; for results below 2^-11 af |x| (f16) the
//        float32 term can dominate, so the bound is 1 storage ulp + 2.5 * 2^-24 af |x|.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "posenc/core/frequencies.h"
#include "posenc/rope/tensor.h"
#include "reference/half_reference.h"
#include "reference/rope_reference.h"
#include "support/spec_builder.h"

namespace posenc::testing {

using posenc::DType;
using posenc::Layout;

inline double StorageUlp(DType dtype, double v) {
  const int mant = dtype == DType::kF32 ? 23 : dtype == DType::kBF16 ? 7 : 10;
  const int min_exp = dtype == DType::kF16 ? -14 : -126;
  const int e = std::max(v == 0 ? min_exp : std::ilogb(v), min_exp);
  return std::ldexp(1.0, e - mant);
}

// A tensor of one dtype, stored as raw bytes, with float access.
struct Buffer {
  DType dtype;
  std::vector<std::uint8_t> bytes;
  Buffer(DType d, std::size_t n) : dtype(d), bytes(n * posenc::dtype_size(d)) {}
  float get(std::size_t i) const {
    if (dtype == DType::kF32) {
      float f;
      std::memcpy(&f, &bytes[4 * i], 4);
      return f;
    }
    std::uint16_t h;
    std::memcpy(&h, &bytes[2 * i], 2);
    return dtype == DType::kBF16 ? posenc_ref::FromBf16(h) : posenc_ref::FromF16(h);
  }
  void set(std::size_t i, float v) {
    if (dtype == DType::kF32) {
      std::memcpy(&bytes[4 * i], &v, 4);
      return;
    }
    const std::uint16_t h = dtype == DType::kBF16 ? posenc_ref::ToBf16(v) : posenc_ref::ToF16(v);
    std::memcpy(&bytes[2 * i], &h, 2);
  }
};

// Plain RoPE over `rotary_dim` dims of a `head_dim` head, from dim `offset`, in `layout`.
inline posenc::RopeSpec Spec(std::int64_t head_dim, std::int64_t rotary_dim, std::int64_t offset,
                             Layout layout) {
  posenc::RopeSpec s = make_spec(posenc::Method::kNone, head_dim);
  s.rotary_dim = rotary_dim;
  s.rotary_offset = offset;
  s.layout = layout;
  return s;
}

inline posenc::RopeSpec YarnSpec(std::int64_t head_dim, Layout layout) {
  posenc::RopeSpec s = make_spec(posenc::Method::kYarn, head_dim, 10000.0, 16.0, 4096);
  s.layout = layout;
  return s;
}

// Pair i's two dims within a head.
inline std::pair<std::int64_t, std::int64_t> PairDims(const posenc::RopeSpec& s, std::int64_t i) {
  if (s.layout == Layout::kHalfSplit)
    return {s.rotary_offset + i, s.rotary_offset + i + s.rotary_dim / 2};
  return {s.rotary_offset + 2 * i, s.rotary_offset + 2 * i + 1};
}

// Checks `out` (from `in`) against the exact rotation where pair i of token t is at position
// slot_pos[t * n + i] (multi-axis RoPE); returns the number of elements checked.
inline int CheckRotationSlots(const posenc::Frequencies& f, const Buffer& in, const Buffer& out,
                              std::int64_t tokens, std::int64_t heads,
                              const std::vector<std::int64_t>& slot_pos, bool inverse,
                              const std::string& what) {
  const std::size_t n = static_cast<std::size_t>(f.spec.rotary_dim / 2);
  const posenc::RopeSpec& s = f.spec;
  const long double af = f.attention_factor;
  int checked = 0, failures = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::size_t base = static_cast<std::size_t>((t * heads + h) * s.head_dim);
      for (std::int64_t i = 0; i < s.rotary_dim / 2; ++i) {
        long double sn, cs;
        const std::int64_t p =
            slot_pos[static_cast<std::size_t>(t) * n + static_cast<std::size_t>(i)];
        posenc_ref::ExactSinCosL(p, f.inv_freq[static_cast<std::size_t>(i)], sn, cs);
        if (inverse) sn = -sn;
        const auto [a, b] = PairDims(s, i);
        const long double xa = in.get(base + static_cast<std::size_t>(a)),
                          xb = in.get(base + static_cast<std::size_t>(b));
        const long double ya = af * (xa * cs - xb * sn), yb = af * (xb * cs + xa * sn);
        const double norm = static_cast<double>(af * std::sqrt(xa * xa + xb * xb));
        for (auto [dim, exact] : {std::pair{a, ya}, std::pair{b, yb}}) {
          const double got = out.get(base + static_cast<std::size_t>(dim));
          const double err = std::abs(got - static_cast<double>(exact));
          const double tol = in.dtype == DType::kF32
                                 ? 4 * StorageUlp(DType::kF32, norm)
                                 : StorageUlp(in.dtype, std::abs(static_cast<double>(exact))) +
                                       2.5 * std::ldexp(norm, -24);
          ++checked;
          if (!(err <= tol) && failures++ < 5) {
            ADD_FAILURE() << what << ": token " << t << " head " << h << " pair " << i << " dim "
                          << dim << " position " << p << ": got " << got << ", exact "
                          << static_cast<double>(exact) << ", error " << err << " > " << tol;
          }
        }
      }
      // Dims outside the rotated range: untouched, bit for bit.
      for (std::int64_t d = 0; d < s.head_dim; ++d) {
        if (d >= s.rotary_offset && d < s.rotary_offset + s.rotary_dim) continue;
        const std::size_t k = (base + static_cast<std::size_t>(d)) * posenc::dtype_size(in.dtype);
        if (std::memcmp(&in.bytes[k], &out.bytes[k], posenc::dtype_size(in.dtype)) != 0 &&
            failures++ < 5) {
          ADD_FAILURE() << what << ": dim " << d << " outside the rotary range changed";
        }
      }
    }
  }
  return checked;
}

// Checks `out` (from `in`) against the exact rotation, token t at position pos[t].
inline int CheckRotation(const posenc::Frequencies& f, const Buffer& in, const Buffer& out,
                         std::int64_t tokens, std::int64_t heads,
                         const std::vector<std::int64_t>& pos, bool inverse,
                         const std::string& what) {
  const std::size_t n = static_cast<std::size_t>(f.spec.rotary_dim / 2);
  std::vector<std::int64_t> slot_pos;
  for (std::int64_t t = 0; t < tokens; ++t)
    slot_pos.insert(slot_pos.end(), n, pos[static_cast<std::size_t>(t)]);
  return CheckRotationSlots(f, in, out, tokens, heads, slot_pos, inverse, what);
}

inline Buffer Random(DType dtype, std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Buffer b(dtype, n);
  for (std::size_t i = 0; i < n; ++i) b.set(i, dist(rng));
  return b;
}

}  // namespace posenc::testing
