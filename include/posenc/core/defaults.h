// posenc/core/defaults.h: every default and magic number of the scaling methods, defined once.
//
// The parser (config.h) fills a missing key with these values and the math (frequencies.h)
// uses the same names, so a default can never drift between the two.
#pragma once

#include <cstdint>

namespace posenc {

// Base of the rotary frequencies, b in w_i = b^(-2i/D). RoFormer (Su et al. 2021) and
// Hugging Face's `default_theta`.
inline constexpr double kDefaultRopeTheta = 10000.0;

// YaRN ramp bounds, in rotations over the original context. YaRN paper (Peng et al. 2023) §3.2,
// "we set alpha = 1, beta = 32"; Hugging Face `_compute_yarn_parameters` `or 32` / `or 1`.
inline constexpr double kYarnBetaFast = 32.0;
inline constexpr double kYarnBetaSlow = 1.0;

// YaRN attention temperature sqrt(1/t) = 0.1 ln(s) + 1: YaRN paper eq. (22), the 0.1 and the 1.
inline constexpr double kYarnMscaleSlope = 0.1;

// Weight of the extrapolated frequency at full ramp: llama.cpp `yarn_ext_factor` (1 for YaRN).
inline constexpr double kYarnExtrapolationFactor = 1.0;

// Hugging Face and llama.cpp add this to the upper ramp bound when it equals the lower one
// ("prevent singularity"); llama.cpp's CPU kernel uses max(0.001, hi - lo) instead.
inline constexpr double kYarnRampGuard = 0.001;

// Llama 3.1 scaling: `low_freq_factor` 1 and `high_freq_factor` 4 of Meta's reference code
// (llama-models `apply_scaling`) and of every published Llama 3.1/3.2 config.
inline constexpr double kLlama3LowFreqFactor = 1.0;
inline constexpr double kLlama3HighFreqFactor = 4.0;

// Position interpolation and NTK default: no scaling.
inline constexpr double kDefaultFactor = 1.0;

// The context assumed for a model whose config states neither max_position_embeddings nor
// original_max_position_embeddings (Llama 2's 4096). Every command that needs a context then
// uses it and says so (context_lengths() in spec.h).
inline constexpr std::int64_t kAssumedContext = 4096;

}  // namespace posenc
