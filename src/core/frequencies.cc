// compute_frequencies: RopeSpec -> Frequencies in one of the three numeric conventions.
#include "posenc/core/frequencies.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/methods.h"
#include "posenc/core/error.h"
#include "util/format.h"

namespace posenc {
namespace {

Frequencies from_result(const RopeSpec& spec, Numerics numerics, std::int64_t seq_len,
                        detail::MethodResult r) {
  Frequencies f;
  f.numerics = numerics;
  f.spec = spec;
  f.seq_len = seq_len;
  f.inv_freq = std::move(r.inv_freq);
  f.unscaled_inv_freq = std::move(r.unscaled_inv_freq);
  f.interpolation_weight = std::move(r.interpolation_weight);
  f.attention_factor = r.attention_factor;
  f.softmax_scale_multiplier = r.softmax_scale_multiplier;
  f.scale = r.scale;
  f.base = r.base;
  f.correction_low = r.correction_low;
  f.correction_high = r.correction_high;
  f.uses_long_factors = r.uses_long_factors;
  return f;
}

// spec.freq_factors (llama.cpp's rope_freqs): w_i / f_i, one more operation in the convention's
// arithmetic (float32 for hf). ggml's path divides inside rope_yarn itself. On plain RoPE the
// divisors are the whole scaling, so a pair's weight is how far it moved in log space relative to
// the largest divisor, as frequencies_from_ggml reports it.
void divide_by_freq_factors(const RopeSpec& spec, bool float32, detail::MethodResult& r) {
  if (spec.freq_factors.empty()) return;
  double largest = 1.0;
  for (double f : spec.freq_factors) largest = std::max(largest, f);
  for (std::size_t i = 0; i < spec.freq_factors.size(); ++i) {
    const double f = spec.freq_factors[i];
    r.inv_freq[i] =
        float32 ? static_cast<double>(static_cast<float>(r.inv_freq[i]) / static_cast<float>(f))
                : r.inv_freq[i] / f;
    if (spec.method == Method::kNone && largest > 1.0)
      r.interpolation_weight[i] = std::log(f) / std::log(largest);
  }
}

std::string sections_text(const AxisMap& map) {
  std::string out = "[";
  for (std::size_t i = 0; i < map.sections.size(); ++i)
    out += (i ? ", " : "") + std::to_string(map.sections[i]);
  return out + "]";
}

std::string fields_of(const RopeSpec& spec) {
  std::string out =
      "rope_theta " + detail::num(spec.rope_theta) + ", factor " + detail::num(spec.factor);
  if (method_reads(spec, kParamMaxContext)) {
    out += ", max_position_embeddings " + std::to_string(spec.max_position_embeddings);
  }
  if (method_reads(spec, kParamYarn)) {
    if (spec.yarn.mscale) out += ", mscale " + detail::num(*spec.yarn.mscale);
    if (spec.yarn.mscale_all_dim)
      out += ", mscale_all_dim " + detail::num(*spec.yarn.mscale_all_dim);
    out += ", original_max_position_embeddings " +
           std::to_string(spec.original_max_position_embeddings);
  }
  return out;
}

// validate() checks what it can without a sequence length; dynamic methods move the base and the
// attention factor with it, so the values at this length are checked here, in float32's range
// as validate() does, before any numerics turns one into inf or NaN.
void check_result(const RopeSpec& spec, std::int64_t seq_len, const detail::MethodResult& r) {
  constexpr double kFloat32Overflow = 0x1p128 - 0x1p103;
  auto fail = [&](const std::string& what, double v) {
    throw Error(
        method_name(spec) + ": at seq_len " + std::to_string(seq_len) + " " + what + " is " +
        detail::num(v) + " (" + fields_of(spec) +
        "); it must be a finite number greater than 0, within float32's range (1.2e-38 .. 3.4e38)");
  };
  if (r.base != 0.0 && !(r.base > 0 && r.base < kFloat32Overflow)) fail("the base", r.base);
  if (!(r.attention_factor >= 0x1p-126 && r.attention_factor < kFloat32Overflow)) {
    fail("the attention factor", r.attention_factor);
  }
  if (!(r.softmax_scale_multiplier >= 0x1p-126 && r.softmax_scale_multiplier < kFloat32Overflow)) {
    fail("the softmax-scale multiplier", r.softmax_scale_multiplier);
  }
  for (std::size_t i = 0; i < r.inv_freq.size(); ++i) {
    if (!(r.inv_freq[i] >= 0 && r.inv_freq[i] < kFloat32Overflow))
      fail("inv_freq[" + std::to_string(i) + "]", r.inv_freq[i]);
  }
}

detail::MethodResult checked(const RopeSpec& spec, std::int64_t seq_len, detail::MethodResult r) {
  check_result(spec, seq_len, r);
  return r;
}

// A vision spec in ggml numerics is llama.cpp's clip call ggml_rope_multi(..., n_dims = n,
// sections, GGML_ROPE_TYPE_VISION, ...): NeoX pairs across the whole head, each section restarting
// its running product. ggml has no adjacent-pair VISION mode (Llama 4's tower), so that is refused.
Frequencies ggml_vision_frequencies(const RopeSpec& spec) {
  const AxisMap& map = spec.axis_map;
  if (spec.layout != Layout::kHalfSplit || spec.rotary_dim != spec.head_dim ||
      spec.rotary_offset != 0 || map.sections.size() > 4) {
    throw Error("numerics ggml: the vision axis map (sections " + sections_text(map) + ", layout " +
                std::string(layout_name(spec.layout)) + ", rotary_dim " +
                std::to_string(spec.rotary_dim) + " of head_dim " + std::to_string(spec.head_dim) +
                ") has no ggml_rope_multi VISION equivalent, which rotates half-split pairs over "
                "the whole head in at most 4 sections; compute it with --numerics precise or hf");
  }
  GgmlRopeParams p;
  p.n_dims = static_cast<int>(pair_count(spec));
  p.mode = GgmlMode::kVision;
  p.freq_base = static_cast<float>(spec.rope_theta);
  for (std::size_t k = 0; k < map.sections.size(); ++k) {
    p.sections[k] = static_cast<int>(map.sections[k]);
  }
  return frequencies_from_ggml(p);
}

}  // namespace

Frequencies compute_frequencies(const RopeSpec& spec, Numerics numerics, std::int64_t seq_len) {
  if (seq_len < 0) {
    throw Error("seq_len (" + std::to_string(seq_len) + ") must not be negative");
  }
  validate(spec);
  const detail::MethodFn method =
      spec.axis_map.rule == AxisRule::kVision
          ? [](const RopeSpec& s, std::int64_t,
               bool float32) { return detail::vision_frequencies(s, float32); }
          : detail::find_method(spec);
  switch (numerics) {
    case Numerics::kPrecise: {
      detail::MethodResult r = method(spec, seq_len, false);
      divide_by_freq_factors(spec, false, r);
      return from_result(spec, numerics, seq_len, checked(spec, seq_len, std::move(r)));
    }
    case Numerics::kHf: {
      detail::MethodResult r = method(spec, seq_len, true);
      divide_by_freq_factors(spec, true, r);
      Frequencies f = from_result(spec, numerics, seq_len, checked(spec, seq_len, std::move(r)));
      // transformers keeps attention_scaling as a Python float and multiplies the float32 cos/sin
      // by it, which rounds it to float32 first.
      f.attention_factor = static_cast<float>(f.attention_factor);
      return f;
    }
    case Numerics::kGgml: {
      if (spec.axis_map.rule == AxisRule::kVision) return ggml_vision_frequencies(spec);
      // The angles are ggml's; the per-pair weights and DeepSeek's softmax multiplier are
      // properties of the method, not of ggml's arithmetic, so they come from the precise path.
      detail::MethodResult r = method(spec, seq_len, false);
      divide_by_freq_factors(spec, false, r);
      Frequencies precise =
          from_result(spec, numerics, seq_len, checked(spec, seq_len, std::move(r)));
      Frequencies f = frequencies_from_ggml(ggml_params_from_spec(spec, seq_len));
      f.spec = spec;
      f.seq_len = seq_len;
      f.interpolation_weight = std::move(precise.interpolation_weight);
      f.softmax_scale_multiplier = precise.softmax_scale_multiplier;
      f.scale = precise.scale;
      f.base = static_cast<double>(f.ggml->freq_base);
      f.uses_long_factors = precise.uses_long_factors;
      return f;
    }
  }
  throw Error("numerics (" + std::to_string(static_cast<int>(numerics)) + ") is not a convention");
}

std::string_view pair_treatment(const Frequencies& freqs, std::int64_t pair) {
  const auto i = static_cast<std::size_t>(pair);
  if (freqs.inv_freq.at(i) == 0.0) return "unrotated";
  const double w = freqs.interpolation_weight.at(i);
  if (freqs.inv_freq[i] == freqs.unscaled_inv_freq.at(i) || std::abs(w) < 1e-9) return "kept";
  if (w >= 1.0 - 1e-9) return "interpolated";
  return "blended";
}

}  // namespace posenc
