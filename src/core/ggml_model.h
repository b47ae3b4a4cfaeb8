// src/core/ggml_model.h: llama.cpp's float32 arithmetic around ggml_rope_ext, in one place
// (internal). ggml.cc (the ggml numerics), engines/llama_cpp.cc (what llama.cpp does with a model)
// and gguf_rope.cc (the parameters a GGUF file gives) all compute with these; the constants are in
// defaults.h.
#pragma once

#include <cstdint>
#include <span>

#include "posenc/core/ggml.h"

namespace posenc::detail {

// llama-context.cpp's get_mscale lambda in float32: 1 if s <= 1 else 0.1 m ln s + 1.
float ggml_get_mscale(float scale, float mscale);

// The YaRN attn_factor llama-context.cpp hands to ggml while ext_factor != 0: the attention
// factor divided by 1 + 0.1 ln(factor), which rope_yarn multiplies back (ggml_kernel_mscale).
float ggml_host_yarn_attn_factor(float attention_factor, float factor);

// What rope_yarn multiplies cos and sin by: attn_factor (1 + 0.1 ln(1 / freq_scale) while
// ext_factor != 0).
float ggml_kernel_mscale(const GgmlRopeParams& params);

// cos/sin (mscale folded in) of every pair at `position`, as ggml_rope_cache_init computes them:
// the running product theta *= theta_scale from theta = (float)position. Outputs hold
// n_dims / 2 entries each. Throws Error when position does not fit ggml's int32 positions.
// For a multi mode: every axis at `position` (a text token of ggml_rope_multi).
void ggml_cos_sin(const GgmlRopeParams& params, std::int64_t position, double* cos_out,
                  double* sin_out);

// cos/sin of every pair (ggml_pair_count) of a ggml_rope_multi call at the token's four positions
// (t, h, w, e), as ggml_mrope_cache_init computes them. Throws Error for a one-axis mode, a count
// other than 4, or a position outside int32.
void ggml_multi_cos_sin(const GgmlRopeParams& params, std::span<const std::int64_t> positions,
                        double* cos_out, double* sin_out);

}  // namespace posenc::detail
