// posenc/core/frequencies.h: Frequencies, a RopeSpec turned into numbers.
//
// Every scaling method reduces to per-pair frequencies w_i plus two scalars (docs/design.md §2):
//   angle(p, i)  = p * w_i
//   cos, sin     = attention_factor * cos(angle), attention_factor * sin(angle)
//   softmax      = softmax(q.k * softmax_scale_multiplier / sqrt(d_k))   (DeepSeek's mscale)
// Kernels only ever see these numbers; they never learn which method produced them.
//
// Example (Llama 2 7B, yarn, s = 16, L = 4096):
//   auto f = posenc::compute_frequencies(spec, posenc::Numerics::kPrecise);
//   f.attention_factor        // 1.2772588722239781  (0.1 ln 16 + 1)
//   f.correction_low/high     // 20, 46
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/ggml.h"
#include "posenc/core/numerics.h"
#include "posenc/core/spec.h"

namespace posenc {

struct Frequencies {
  Numerics numerics = Numerics::kPrecise;
  RopeSpec spec;             // the spec these came from (its method, dims, layout)
  std::int64_t seq_len = 0;  // the sequence length asked for; 0 = at initialisation

  // One entry per frequency slot, n = rotary_dim / 2. Values computed in float32 (kHf, kGgml)
  // are the float32 results widened exactly to double.
  std::vector<double> inv_freq;           // w_i, radians per token
  std::vector<double> unscaled_inv_freq;  // plain RoPE's b^(-2i/D) in the same numerics
  // How far each pair moved from plain RoPE towards w/s: 0 kept, 1 fully divided by s.
  // Blend methods (linear, yarn, llama3) report their blend weight; base-changing and
  // per-pair-factor methods (ntk, dynamic, longrope) report ln(unscaled / w) / ln(s).
  std::vector<double> interpolation_weight;

  double attention_factor = 1.0;          // multiplies cos and sin (q.k grows by its square)
  double softmax_scale_multiplier = 1.0;  // DeepSeek: g(s, mscale_all_dim)^2, else 1
  double scale = 1.0;                     // the s in effect (dynamic-yarn: max(1, seq_len/L))
  double base = 0.0;                      // the base in effect (ntk, dynamic: the new base)

  // YaRN only: the ramp bounds in pair index (after truncate and clamping, before the guard).
  std::optional<double> correction_low;
  std::optional<double> correction_high;
  bool uses_long_factors = false;  // LongRoPE: long factors chosen (seq_len > L)

  std::optional<GgmlRopeParams> ggml;  // kGgml: the ggml_rope_ext parameters used

  std::int64_t pair_count() const { return static_cast<std::int64_t>(inv_freq.size()); }
};

// Computes the frequencies of `spec` in the given numerics at sequence length `seq_len`
// (largest position + 1; 0 means at initialisation: dynamic equals plain RoPE and LongRoPE uses
// its short factors). Methods that do not depend on the sequence length ignore it.
// Validates `spec` first (throws Error as validate() does).
Frequencies compute_frequencies(const RopeSpec& spec, Numerics numerics = Numerics::kPrecise,
                                std::int64_t seq_len = 0);

// YaRN's attention-factor rule g(s, m) = 1 if s <= 1 else 0.1 m ln(s) + 1 (YaRN paper eq. 22;
// DeepSeek-V2's yarn_get_mscale).
double yarn_mscale(double scale, double mscale = 1.0);

// A word for pair i: "kept" (weight 0), "interpolated" (weight 1), else "blended".
std::string_view pair_treatment(const Frequencies& freqs, std::int64_t pair);

}  // namespace posenc
