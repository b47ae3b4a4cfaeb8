// tests/support/spec_adapters.h: feeds a posenc::RopeSpec to the independent references.
//
// The references (rope_reference.h, hf_float32_reference.h) take plain numbers and know nothing
// of posenc; this header only reads the fields of a RopeSpec and calls the reference function
// of its method, so that a test can compare posenc::compute_frequencies with them entry by
// entry. It computes nothing itself, apart from choosing the LongRoPE list and the
// dynamic-YaRN scale exactly as docs/design.md §3 states.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/core/spec.h"
#include "reference/hf_float32_reference.h"
#include "reference/rope_reference.h"

namespace posenc_test {

inline constexpr double kUndefined = std::numeric_limits<double>::quiet_NaN();

inline posenc_ref::YarnOptions YarnOptionsOf(const posenc::RopeSpec& spec) {
  posenc_ref::YarnOptions o;
  o.beta_fast = spec.yarn.beta_fast;
  o.beta_slow = spec.yarn.beta_slow;
  o.truncate = spec.yarn.truncate;
  o.extrapolation_factor = spec.yarn.extrapolation_factor;
  o.paper_ramp = spec.yarn.ramp == posenc::YarnRamp::kPaper;
  o.attention_factor = spec.yarn.attention_factor;
  o.mscale = spec.yarn.mscale;
  o.mscale_all_dim = spec.yarn.mscale_all_dim;
  return o;
}

// What the float64 reference says for a spec at a sequence length.
struct PreciseResult {
  std::vector<double> inv_freq;
  std::vector<double> unscaled_inv_freq;     // empty: not checked (proportional)
  std::vector<double> interpolation_weight;  // NaN where the reference leaves it undefined
  double attention_factor = 1.0;
  double softmax_scale_multiplier = 1.0;
  double scale = 1.0;
  std::optional<double> base;  // ntk, dynamic: the new base
  std::optional<double> correction_low;
  std::optional<double> correction_high;
  bool uses_long_factors = false;
};

inline PreciseResult PreciseReference(const posenc::RopeSpec& spec, std::int64_t seq_len) {
  using posenc::Method;
  PreciseResult r;
  const std::int64_t d = spec.rotary_dim;
  const double b = spec.rope_theta;
  const double s = spec.factor;
  const std::int64_t orig = spec.original_max_position_embeddings;
  r.scale = s;
  if (spec.method != Method::kProportional) {
    r.unscaled_inv_freq = posenc_ref::DefaultInvFreq(d, b);
  }
  switch (spec.method) {
    case Method::kNone:
      r.inv_freq = posenc_ref::DefaultInvFreq(d, b);
      r.interpolation_weight.assign(r.inv_freq.size(), 0.0);
      break;
    case Method::kLinear:
      r.inv_freq = posenc_ref::LinearInvFreq(d, b, s);
      r.interpolation_weight.assign(r.inv_freq.size(), s > 1.0 ? 1.0 : kUndefined);
      break;
    case Method::kNtk: {
      r.inv_freq = posenc_ref::NtkInvFreq(d, b, s);
      r.base = static_cast<double>(posenc_ref::NtkBaseL(d, b, s));
      // ln(unscaled / w) / ln(s) = (2i/D) (D/(D-2)) = 2i / (D - 2).
      r.interpolation_weight.resize(r.inv_freq.size());
      for (std::size_t i = 0; i < r.inv_freq.size(); ++i) {
        r.interpolation_weight[i] =
            s > 1.0 ? 2.0 * static_cast<double>(i) / static_cast<double>(d - 2) : kUndefined;
      }
      break;
    }
    case Method::kNtkAlpha: {
      r.scale = spec.alpha;
      r.inv_freq = posenc_ref::NtkAlphaInvFreq(d, b, spec.alpha);
      r.base = static_cast<double>(posenc_ref::NtkAlphaBaseL(d, b, spec.alpha));
      r.interpolation_weight.resize(r.inv_freq.size());
      for (std::size_t i = 0; i < r.inv_freq.size(); ++i) {
        r.interpolation_weight[i] = spec.alpha > 1.0
                                        ? 2.0 * static_cast<double>(i) / static_cast<double>(d - 2)
                                        : kUndefined;
      }
      break;
    }
    case Method::kDynamic:
      r.inv_freq = posenc_ref::DynamicInvFreq(d, b, s, spec.max_position_embeddings, seq_len);
      r.base = static_cast<double>(
          posenc_ref::DynamicBaseL(d, b, s, spec.max_position_embeddings, seq_len));
      r.interpolation_weight.assign(r.inv_freq.size(), kUndefined);
      break;
    case Method::kYarn:
    case Method::kDynamicYarn: {
      const double scale =
          spec.method == Method::kYarn ? s : posenc_ref::DynamicYarnScale(orig, seq_len);
      r.scale = scale;
      const posenc_ref::YarnResult y =
          posenc_ref::YarnFrequencies(d, b, scale, orig, YarnOptionsOf(spec));
      r.inv_freq = y.inv_freq;
      r.attention_factor = y.attention_factor;
      r.softmax_scale_multiplier = y.softmax_scale_multiplier;
      if (spec.yarn.ramp == posenc::YarnRamp::kPairIndex) {
        r.correction_low = y.correction_low;
        r.correction_high = y.correction_high;
      }
      r.interpolation_weight = y.interpolation_weight;
      if (scale <= 1.0) r.interpolation_weight.assign(r.inv_freq.size(), kUndefined);
      break;
    }
    case Method::kLlama3: {
      const posenc_ref::BlendResult l = posenc_ref::Llama3InvFreq(
          d, b, s, orig, spec.llama3.low_freq_factor, spec.llama3.high_freq_factor);
      r.inv_freq = l.inv_freq;
      r.interpolation_weight = l.interpolation_weight;
      if (s <= 1.0) r.interpolation_weight.assign(r.inv_freq.size(), kUndefined);
      break;
    }
    case Method::kLongrope: {
      const posenc_ref::LongropeResult l = posenc_ref::LongropeFrequencies(
          d, b, s, orig, spec.longrope.short_factor, spec.longrope.long_factor,
          spec.longrope.attention_factor, seq_len);
      r.inv_freq = l.inv_freq;
      r.attention_factor = l.attention_factor;
      r.uses_long_factors = l.uses_long_factors;
      // ln(unscaled / w) / ln(s) = ln(f_i) / ln(s).
      const std::vector<double>& f =
          l.uses_long_factors ? spec.longrope.long_factor : spec.longrope.short_factor;
      r.interpolation_weight.resize(r.inv_freq.size());
      for (std::size_t i = 0; i < r.inv_freq.size(); ++i) {
        r.interpolation_weight[i] = s > 1.0 ? std::log(f[i]) / std::log(s) : kUndefined;
      }
      break;
    }
    case Method::kProportional:
      r.inv_freq = posenc_ref::ProportionalInvFreq(spec.head_dim, b, s, spec.partial_rotary_factor);
      r.interpolation_weight.assign(r.inv_freq.size(), kUndefined);
      break;
  }
  return r;
}

// What transformers computes in float32 for a spec at a sequence length.
struct HfResult {
  std::vector<float> inv_freq;
  std::vector<float> unscaled_inv_freq;  // empty: not checked (proportional)
  double attention_factor = 1.0;         // the Python float
  double softmax_scale_multiplier = 1.0;
};

inline HfResult HfReference(const posenc::RopeSpec& spec, std::int64_t seq_len) {
  using posenc::Method;
  HfResult r;
  const std::int64_t d = spec.rotary_dim;
  const double b = spec.rope_theta;
  const double s = spec.factor;
  const std::int64_t orig = spec.original_max_position_embeddings;
  if (spec.method != Method::kProportional) r.unscaled_inv_freq = posenc_hf::DefaultInvFreq(d, b);
  switch (spec.method) {
    case Method::kNone:
      r.inv_freq = posenc_hf::DefaultInvFreq(d, b);
      break;
    case Method::kLinear:
      r.inv_freq = posenc_hf::LinearInvFreq(d, b, s);
      break;
    case Method::kNtk:
      r.inv_freq = posenc_hf::NtkInvFreq(d, b, s);
      break;
    case Method::kNtkAlpha:
      // HunYuan: the base in Python floats, then transformers' float32 recipe (as static NTK).
      r.inv_freq = posenc_hf::NtkInvFreq(d, b, spec.alpha);
      break;
    case Method::kDynamic:
      r.inv_freq = posenc_hf::DynamicInvFreq(d, b, s, spec.max_position_embeddings, seq_len);
      break;
    case Method::kYarn:
    case Method::kDynamicYarn: {
      const double scale =
          spec.method == Method::kYarn ? s : posenc_ref::DynamicYarnScale(orig, seq_len);
      const posenc_hf::YarnResult y =
          posenc_hf::YarnFrequencies(d, b, scale, orig, YarnOptionsOf(spec));
      r.inv_freq = y.inv_freq;
      r.attention_factor = y.attention_factor;
      r.softmax_scale_multiplier = y.softmax_scale_multiplier;
      break;
    }
    case Method::kLlama3:
      r.inv_freq = posenc_hf::Llama3InvFreq(d, b, s, orig, spec.llama3.low_freq_factor,
                                            spec.llama3.high_freq_factor);
      break;
    case Method::kLongrope: {
      const bool use_long = seq_len > orig;
      r.inv_freq = posenc_hf::LongropeInvFreq(
          d, b, use_long ? spec.longrope.long_factor : spec.longrope.short_factor);
      r.attention_factor = posenc_ref::LongropeFrequencies(
                               d, b, s, orig, spec.longrope.short_factor, spec.longrope.long_factor,
                               spec.longrope.attention_factor, seq_len)
                               .attention_factor;
      break;
    }
    case Method::kProportional:
      r.inv_freq = posenc_hf::ProportionalInvFreq(spec.head_dim, b, s, spec.partial_rotary_factor);
      break;
  }
  return r;
}

// Distance in units in the last place between two finite doubles (or floats) of the same sign.
inline std::int64_t UlpDistance(double a, double b) {
  if (a == b) return 0;
  const std::int64_t ia = std::bit_cast<std::int64_t>(a);
  const std::int64_t ib = std::bit_cast<std::int64_t>(b);
  if ((ia < 0) != (ib < 0)) return std::numeric_limits<std::int64_t>::max();
  return std::llabs(ia - ib);
}

inline std::int64_t UlpDistance(float a, float b) {
  if (a == b) return 0;
  const std::int32_t ia = std::bit_cast<std::int32_t>(a);
  const std::int32_t ib = std::bit_cast<std::int32_t>(b);
  if ((ia < 0) != (ib < 0)) return std::numeric_limits<std::int64_t>::max();
  return std::llabs(static_cast<std::int64_t>(ia) - ib);
}

// A one-line description of a spec for failure messages.
inline std::string Describe(const posenc::RopeSpec& spec, std::int64_t seq_len) {
  std::ostringstream os;
  os.precision(17);
  os << posenc::method_name(spec) << " head_dim=" << spec.head_dim
     << " rotary_dim=" << spec.rotary_dim << " theta=" << spec.rope_theta
     << " factor=" << spec.factor << " L=" << spec.original_max_position_embeddings
     << " L'=" << spec.max_position_embeddings << " seq_len=" << seq_len;
  if (spec.method == posenc::Method::kYarn || spec.method == posenc::Method::kDynamicYarn) {
    os << " beta=" << spec.yarn.beta_fast << "/" << spec.yarn.beta_slow
       << " truncate=" << spec.yarn.truncate << " ext=" << spec.yarn.extrapolation_factor;
    if (spec.yarn.attention_factor) os << " attention_factor=" << *spec.yarn.attention_factor;
    if (spec.yarn.mscale) os << " mscale=" << *spec.yarn.mscale;
    if (spec.yarn.mscale_all_dim) os << " mscale_all_dim=" << *spec.yarn.mscale_all_dim;
  }
  if (spec.method == posenc::Method::kLlama3) {
    os << " low/high=" << spec.llama3.low_freq_factor << "/" << spec.llama3.high_freq_factor;
  }
  if (spec.method == posenc::Method::kProportional) os << " rho=" << spec.partial_rotary_factor;
  if (spec.method == posenc::Method::kLongrope && spec.longrope.attention_factor) {
    os << " attention_factor=" << *spec.longrope.attention_factor;
  }
  return os.str();
}

}  // namespace posenc_test
