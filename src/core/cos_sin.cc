// cos/sin of the rotation angle at one position, per numeric convention (cos_sin.h).
#include "posenc/core/cos_sin.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/ggml_model.h"
#include "core/pi_reduction.h"
#include "core/torch_float32.h"
#include "posenc/core/error.h"

namespace posenc {
namespace {

using detail::kHalfPi1;
using detail::kHalfPi2;
using detail::kHalfPi3;
using detail::kTwoOverPi;

// A ggml_rope_multi call (MROPE, IMROPE, VISION): its rows come from ggml_mrope_cache_init.
bool ggml_multi(const Frequencies& freqs) {
  return freqs.numerics == Numerics::kGgml && freqs.ggml && ggml_is_multi(freqs.ggml->mode);
}

}  // namespace

void exact_sincos(std::int64_t position, double omega, double& sin_out, double& cos_out) {
  // p * omega = hi + lo exactly (|p| < 2^53 converts exactly; FMA recovers the product's error).
  const double p = static_cast<double>(position);
  const double hi = p * omega;
  const double lo = std::fma(p, omega, -hi);
  // Reduce to r in [-pi/4, pi/4] around the nearest multiple k of pi/2. With t_hi + t_lo =
  // k * kHalfPi1 exactly, hi - t_hi is exact by Sterbenz's lemma (hi lies within k pi/2 +- pi/4,
  // so t_hi / hi is in [2/3, 2] for |k| >= 1). The remaining terms are tiny; their rounding errors
  // are below 1e-22 for |k| < 2^31, so r = r_hi + r_lo is known far beyond double precision.
  const double k = std::nearbyint(hi * kTwoOverPi);
  const double t_hi = k * kHalfPi1;
  const double t_lo = std::fma(k, kHalfPi1, -t_hi);
  const double head = hi - t_hi;
  const double tail = lo - t_lo - k * kHalfPi2 - k * kHalfPi3;
  // TwoSum (Knuth): r_hi + r_lo == head + tail exactly, whichever is larger.
  const double r_hi = head + tail;
  const double b = r_hi - head;
  const double r_lo = (head - (r_hi - b)) + (tail - b);
  // sin(r_hi + r_lo) = sin r_hi + r_lo cos r_hi (r_lo^2 is below 1e-32).
  const double s = std::sin(r_hi) + r_lo * std::cos(r_hi);
  const double c = std::cos(r_hi) - r_lo * std::sin(r_hi);
  switch (static_cast<std::int64_t>(k) & 3) {
    case 0:
      sin_out = s;
      cos_out = c;
      break;
    case 1:
      sin_out = c;
      cos_out = -s;
      break;
    case 2:
      sin_out = -s;
      cos_out = -c;
      break;
    default:
      sin_out = -c;
      cos_out = s;
      break;
  }
}

void cos_sin_at(const Frequencies& freqs, std::int64_t position, std::span<double> cos_out,
                std::span<double> sin_out) {
  const std::size_t n = freqs.inv_freq.size();
  if (cos_out.size() < n || sin_out.size() < n) {
    throw Error("cos_sin_at: output spans (" + std::to_string(cos_out.size()) + ", " +
                std::to_string(sin_out.size()) + ") must hold pair_count (" + std::to_string(n) +
                ") entries");
  }
  switch (freqs.numerics) {
    case Numerics::kPrecise: {
      const double af = freqs.attention_factor;
      for (std::size_t i = 0; i < n; ++i) {
        double s, c;
        exact_sincos(position, freqs.inv_freq[i], s, c);
        cos_out[i] = c * af;
        sin_out[i] = s * af;
      }
      return;
    }
    case Numerics::kHf: {
      // transformers: freqs = inv_freq.float() @ position_ids.float(); cos = emb.cos() * scaling,
      // with torch's own float32 cos and sin over the emb row.
      const float p = static_cast<float>(position);
      const float af = static_cast<float>(freqs.attention_factor);
      // Stack rows for the head dims models have (the on-the-fly path calls this per token).
      constexpr std::size_t kStack = 512;
      float angle_stack[kStack], c_stack[kStack], s_stack[kStack];
      std::vector<float> heap(n > kStack ? 3 * n : 0);
      float* angle = n > kStack ? heap.data() : angle_stack;
      float* c = n > kStack ? heap.data() + n : c_stack;
      float* s = n > kStack ? heap.data() + 2 * n : s_stack;
      for (std::size_t i = 0; i < n; ++i) angle[i] = static_cast<float>(freqs.inv_freq[i]) * p;
      detail::torch_cos_sin_row({angle, n}, {c, n}, {s, n});
      for (std::size_t i = 0; i < n; ++i) {
        cos_out[i] = c[i] * af;
        sin_out[i] = s[i] * af;
      }
      return;
    }
    case Numerics::kGgml: {
      if (!freqs.ggml) throw Error("cos_sin_at: ggml numerics without ggml parameters");
      detail::ggml_cos_sin(*freqs.ggml, position, cos_out.data(), sin_out.data());
      return;
    }
  }
}

bool gathers_angles(const Frequencies& freqs) {
  const AxisRule rule = freqs.spec.axis_map.rule;
  // ggml_rope_multi's VISION restarts the ladder per section: no one-axis row holds its angles.
  if (ggml_multi(freqs)) return true;
  return freqs.numerics == Numerics::kHf &&
         (rule == AxisRule::kInterleaved || rule == AxisRule::kErnie || rule == AxisRule::kVision);
}

void cos_sin_at(const Frequencies& freqs, std::span<const std::int64_t> axis_positions,
                std::span<double> cos_out, std::span<double> sin_out) {
  const AxisMap& map = freqs.spec.axis_map;
  if (static_cast<std::int64_t>(axis_positions.size()) != map.axes) {
    throw Error("cos_sin_at: axis_positions hold " + std::to_string(axis_positions.size()) +
                " positions, but the spec's axis map (" + std::string(axis_rule_name(map.rule)) +
                ") reads " + std::to_string(map.axes) + " axes");
  }
  const std::size_t n = freqs.inv_freq.size();
  if (cos_out.size() < n || sin_out.size() < n) {
    throw Error("cos_sin_at: output spans (" + std::to_string(cos_out.size()) + ", " +
                std::to_string(sin_out.size()) + ") must hold pair_count (" + std::to_string(n) +
                ") entries");
  }
  if (ggml_multi(freqs)) {
    detail::ggml_multi_cos_sin(*freqs.ggml, axis_positions, cos_out.data(), sin_out.data());
    return;
  }
  const bool same = std::all_of(axis_positions.begin(), axis_positions.end(),
                                [&](std::int64_t p) { return p == axis_positions[0]; });
  if (same || map.slot_axis.empty()) {
    cos_sin_at(freqs, axis_positions[0], cos_out, sin_out);
    return;
  }
  auto pos = [&](std::size_t i) {
    return axis_positions[static_cast<std::size_t>(map.slot_axis[i])];
  };
  if (freqs.numerics == Numerics::kPrecise) {
    const double af = freqs.attention_factor;
    for (std::size_t i = 0; i < n; ++i) {
      double s, c;
      exact_sincos(pos(i), freqs.inv_freq[i], s, c);
      cos_out[i] = c * af;
      sin_out[i] = s * af;
    }
    return;
  }
  if (gathers_angles(freqs)) {
    // Qwen3VLTextRotaryEmbedding: freqs per axis in float32, interleaved, then emb.cos().
    const float af = static_cast<float>(freqs.attention_factor);
    std::vector<float> angle(n), c(n), s(n);
    for (std::size_t i = 0; i < n; ++i)
      angle[i] = static_cast<float>(freqs.inv_freq[i]) * static_cast<float>(pos(i));
    detail::torch_cos_sin_row(angle, c, s);
    for (std::size_t i = 0; i < n; ++i) {
      cos_out[i] = c[i] * af;
      sin_out[i] = s[i] * af;
    }
    return;
  }
  // Per-axis rows, then each slot from its axis' row (Qwen2-VL's section select on cos/sin).
  std::vector<double> c(n), s(n);
  for (std::int64_t a = 0; a < map.axes; ++a) {
    cos_sin_at(freqs, axis_positions[static_cast<std::size_t>(a)], c, s);
    for (std::size_t i = 0; i < n; ++i) {
      if (map.slot_axis[i] != a) continue;
      cos_out[i] = c[i];
      sin_out[i] = s[i];
    }
  }
}

void rotary_forward_cos_sin(const Frequencies& freqs, std::span<const std::int64_t> positions,
                            std::int64_t batch, bool cat, std::span<float> cos_out,
                            std::span<float> sin_out) {
  const auto n = static_cast<std::size_t>(freqs.pair_count());
  const std::size_t width = cat ? 2 * n : n;
  const AxisMap& map = freqs.spec.axis_map;
  const auto axes = static_cast<std::size_t>(map.axes);
  if (batch <= 0 || positions.size() % (axes * static_cast<std::size_t>(batch)) != 0) {
    throw Error("rotary_forward_cos_sin: positions (" + std::to_string(positions.size()) +
                ") must divide into " + (axes > 1 ? std::to_string(axes) + " axes x " : "") +
                "batch (" + std::to_string(batch) + ") rows");
  }
  // Multi-axis: position_ids [axes, batch, seq], axis-major.
  const std::size_t tokens = positions.size() / axes;
  const std::size_t seq = tokens / static_cast<std::size_t>(batch);
  if (cos_out.size() < tokens * width || sin_out.size() < tokens * width) {
    throw Error("rotary_forward_cos_sin: output spans must hold batch * seq * width (" +
                std::to_string(tokens * width) + ") entries");
  }
  auto axis_of = [&](std::size_t i) -> std::size_t {
    return map.slot_axis.empty() ? 0 : map.slot_axis[i];
  };
  const float af = static_cast<float>(freqs.attention_factor);
  if (freqs.numerics == Numerics::kHf) {
    // Build emb in the memory order torch holds it, then cos/sin over that buffer: one emb per
    // axis ([axes, batch, seq, width], Qwen2-VL selects slots from their axis' cos after), or
    // one of the gathered angles (Qwen3-VL and ERNIE interleave freqs before the cos).
    const std::size_t embs = axes > 1 && !gathers_angles(freqs) ? axes : 1;
    const std::size_t plane = tokens * width;
    std::vector<float> emb(embs * plane), c(emb.size()), s(emb.size());
    for (std::size_t e = 0; e < embs; ++e) {
      for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
        for (std::size_t t = 0; t < seq; ++t) {
          const std::size_t token = b * seq + t;
          for (std::size_t i = 0; i < n; ++i) {
            const std::size_t a = embs > 1 ? e : axis_of(i);
            const float p = static_cast<float>(positions[a * tokens + token]);
            const float angle = static_cast<float>(freqs.inv_freq[i]) * p;
            if (cat) {
              emb[e * plane + token * width + i] = emb[e * plane + token * width + n + i] = angle;
            } else {
              emb[e * plane + (b * n + i) * seq + t] = angle;  // [batch, n, seq]
            }
          }
        }
      }
    }
    detail::torch_cos_sin_flat(emb, c, s);
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
      for (std::size_t t = 0; t < seq; ++t) {
        for (std::size_t j = 0; j < width; ++j) {
          const std::size_t e = embs > 1 ? axis_of(j % n) : 0;
          const std::size_t from =
              e * plane + (cat ? (b * seq + t) * width + j : (b * n + j) * seq + t);
          cos_out[(b * seq + t) * width + j] = c[from] * af;
          sin_out[(b * seq + t) * width + j] = s[from] * af;
        }
      }
    }
    return;
  }
  std::vector<double> c(n), s(n);
  std::vector<std::int64_t> at(axes);
  for (std::size_t k = 0; k < tokens; ++k) {
    for (std::size_t a = 0; a < axes; ++a) at[a] = positions[a * tokens + k];
    cos_sin_at(freqs, at, c, s);
    for (std::size_t j = 0; j < width; ++j) {
      cos_out[k * width + j] = static_cast<float>(c[j % n]);
      sin_out[k * width + j] = static_cast<float>(s[j % n]);
    }
  }
}

}  // namespace posenc
