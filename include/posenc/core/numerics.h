// posenc/core/numerics.h: the three numeric conventions (docs/design.md §4).
//
//   kPrecise  float64 formulas; angles p * w_i reduced exactly (cos_sin.h). Default.
//   kHf       Hugging Face transformers in float32, op by op: inv_freq from a float32 pow of the
//             base rounded to float32, the ramp in float32, angle = fl32(fl32(p) * inv_freq),
//             cos/sin in float32, times the attention factor rounded to float32. Each step is
//             correctly rounded here; torch's own pow/cos/sin are not everywhere, so results may
//             differ from torch by 1 float32 ulp in a few entries.
//   kGgml     llama.cpp's CPU backend (ggml_rope_ext): theta_scale = powf(b, -2/D), angles by a
//             running float32 product from the position, ramp guard max(0.001, hi - lo),
//             ext_factor, mscale = attn_factor * (1 + 0.1 ln(1/freq_scale)) when ext_factor != 0.
#pragma once

#include <string_view>

namespace posenc {

enum class Numerics { kPrecise, kHf, kGgml };

std::string_view numerics_name(Numerics numerics);  // "precise", "hf", "ggml"

// Parses "precise", "hf" or "ggml"; throws Error naming `field` and the value otherwise.
Numerics parse_numerics(std::string_view name, std::string_view field = "numerics");

}  // namespace posenc
