// src/core/torch_float32.h: the float32 pow, cos and sin that torch 1.13 computes on the CPU
// (Debian's python3-torch with the system libsleef 3.5.1), for the hf numerics; docs/numerics.md.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "posenc/core/numerics.h"

namespace posenc::detail {

// Floats per iteration of torch's vectorized binary loop (two vectors): 16 (AVX2), 32 (AVX512);
// 0 under DEFAULT, whose vector pow is std::pow on each lane.
std::size_t torch_pow_body_width(TorchCapability capability);

// `fl32(base) ** exponents` as torch's pow_tensor_tensor kernel: entries below
// W * floor(n / W) (W = torch_pow_body_width) from Sleef's FMA powf, the tail from the C
// library's powf. Throws Error when the capability needs FMA and the CPU has none.
std::vector<float> torch_pow(float base, std::span<const float> exponents,
                             TorchCapability capability = torch_capability());

// torch.cos / torch.sin of one float32 alone (Sleef's FMA kernels, or cosf/sinf under DEFAULT).
float torch_cos(float x, TorchCapability capability = torch_capability());
float torch_sin(float x, TorchCapability capability = torch_capability());

// cos and sin of transformers' emb = cat(angles, angles) at one position, as torch computes them
// on the contiguous [.., 2n] tensor: Sleef's vector kernels reduce a whole vector (8 lanes AVX2,
// 16 AVX512) the slower, more exact way when any lane has |x| >= 125, which changes the last bit
// of some small lanes; so each result depends on its lane group in the emb row (exact when 2n is
// a multiple of 8, i.e. rows start on a vector). Writes the first half (slots 0..n-1).
void torch_cos_sin_row(std::span<const float> angles, std::span<float> cos_out,
                       std::span<float> sin_out, TorchCapability capability = torch_capability());

// torch.cos / torch.sin of a whole contiguous float32 buffer in memory order, lane groups counted
// from its start (what the row rule applies to emb; also transformers' tensors laid out otherwise).
void torch_cos_sin_flat(std::span<const float> x, std::span<float> cos_out,
                        std::span<float> sin_out, TorchCapability capability = torch_capability());

}  // namespace posenc::detail
