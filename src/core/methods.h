// src/core/methods.h: the scaling-method registry (internal).
//
// One small function per method computes the frequencies of docs/design.md §3. Each is a template
// over the arithmetic type: `double` gives the precise convention, `float` gives Hugging Face's
// float32 pipeline, because every tensor operation of transformers rounds to float32 exactly
// where an operation on `float` does (see src/core/methods.cc for the mapping rules).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "posenc/core/spec.h"

namespace posenc::detail {

struct MethodResult {
  std::vector<double> inv_freq;
  std::vector<double> unscaled_inv_freq;
  std::vector<double> interpolation_weight;
  double attention_factor = 1.0;
  double softmax_scale_multiplier = 1.0;
  double scale = 1.0;
  double base = 0.0;
  std::optional<double> correction_low;
  std::optional<double> correction_high;
  bool uses_long_factors = false;
};

// float32 == true: the hf convention; false: precise (float64).
using MethodFn = MethodResult (*)(const RopeSpec& spec, std::int64_t seq_len, bool float32);

// The function of the spec's method (the registry of src/core/methods.cc).
MethodFn find_method(const RopeSpec& spec);

// The restarted ladder of the vision axis map (AxisRule::kVision; plain RoPE only, validated).
MethodResult vision_frequencies(const RopeSpec& spec, bool float32);

// The attention factor YaRN uses at scale s (explicit value, mscale ratio or g(s, 1)).
double yarn_attention_factor(const YarnParams& yarn, double scale);

// The s dynamic-yarn uses at `seq_len`: max(1, seq_len / L); 1 at initialisation.
double dynamic_yarn_scale(const RopeSpec& spec, std::int64_t seq_len);

// The base dynamic NTK uses at `seq_len`, in float64 (for ggml's freq_base).
double dynamic_ntk_base(const RopeSpec& spec, std::int64_t seq_len);

// Hunyuan's base b * alpha^(D / (D - 2)) (ntk-alpha).
double ntk_alpha_base(const RopeSpec& spec);

// The static NTK base b * s^(D / (D - 2)).
double ntk_base(const RopeSpec& spec);

// Number of rotated pairs of proportional RoPE: int(rho * d_h // 2).
std::int64_t proportional_rotated_pairs(const RopeSpec& spec);

}  // namespace posenc::detail
