// src/ggml_angles.h: llama.cpp's CPU rope angles, reproduced in float32 (internal).
#pragma once

#include <cstdint>

#include "posenc/ggml.h"

namespace posenc::detail {

// cos/sin (mscale folded in) of every pair at `position`, as ggml_rope_cache_init computes them:
// the running product theta *= theta_scale from theta = (float)position. Outputs hold
// n_dims / 2 entries each. Throws Error when position does not fit ggml's int32 positions.
void ggml_cos_sin(const GgmlRopeParams& params, std::int64_t position, double* cos_out,
                  double* sin_out);

}  // namespace posenc::detail
