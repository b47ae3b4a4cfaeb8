// posenc/core/numerics.h: the three numeric conventions (docs/design.md §4).
//
//   kPrecise  float64 formulas; angles p * w_i reduced exactly (cos_sin.h). Default.
//   kHf       Hugging Face transformers in float32, op by op: inv_freq from a float32 pow of the
//             base rounded to float32, the ramp in float32, angle = fl32(fl32(p) * inv_freq),
//             cos/sin in float32, times the attention factor rounded to float32. pow, cos and
//             sin are the functions torch 1.13 calls (Sleef's or the C library's, by the
//             TorchCapability below and, for pow, by the entry's index), so every entry is
//             bit-identical to Debian's torch on the CPU (docs/numerics.md).
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

// The CPU kernels torch (ATen) dispatches to, which decide the functions hf numerics compute
// pow, cos and sin with: DEFAULT (the C library's powf/cosf/sinf), AVX2 or AVX512 (Sleef).
enum class TorchCapability { kDefault, kAvx2, kAvx512 };

// The capability torch would pick in this process, computed once: the environment variable
// ATEN_CPU_CAPABILITY ("default", "avx2", "avx512"; other values are ignored, as torch does),
// else kAvx2 when the CPU has AVX2 and FMA, else kDefault (torch never picks AVX512 itself).
TorchCapability torch_capability();

std::string_view torch_capability_name(TorchCapability capability);  // "default", "avx2", "avx512"

// Parses "default", "avx2" or "avx512"; throws Error naming `field` and the value otherwise.
TorchCapability parse_torch_capability(std::string_view name,
                                       std::string_view field = "torch capability");

}  // namespace posenc
