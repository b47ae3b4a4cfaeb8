// posenc/core/cos_sin.h: cos and sin of the rotation angle at one position, per numeric convention.
//
//   kPrecise: angle = p * w_i formed exactly as a double-double product (FMA), reduced to
//             [-pi/4, pi/4] around a multiple of pi/2 with a three-part pi/2 (Cody-Waite), kept
//             as a double-double remainder, then cos/sin in double. The result is the cos/sin of
//             the exact product of p and the double w_i, within about an ulp of double, for any
//             |p| < 2^31; rounding it once to float32 gives the correctly rounded value in all
//             but the rarest ties.
//   kHf:      angle = fl32(fl32(p) * fl32(w_i)); cos, sin as torch 1.13 computes them over the
//             cat(angles, angles) row (docs/numerics.md); times fl32(attention_factor), rounded.
//   kGgml:    the running product of ggml_rope_cache_init from theta = (float)p (ggml.h).
// Every result carries the attention factor. kHf and kGgml values are float32 widened exactly.
#pragma once

#include <cstdint>
#include <span>

#include "posenc/core/frequencies.h"

namespace posenc {

// Fills cos_out[i] and sin_out[i], i in [0, freqs.pair_count()), at `position`.
// Precondition: both spans hold at least pair_count() entries (else throws Error).
void cos_sin_at(const Frequencies& freqs, std::int64_t position, std::span<double> cos_out,
                std::span<double> sin_out);

// Multi-axis (spec.axis_map): slot i at position axis_positions[slot_axis(map, i)], one position
// per axis (axis_count(spec) of them; else throws Error naming both counts). The same values as
// gathering slot i from the one-axis row at that position, except kHf with the interleaved and
// ERNIE rules, where transformers takes torch's cos over the gathered angle row (its lane groups).
// All axes equal: exactly the one-axis row.
void cos_sin_at(const Frequencies& freqs, std::span<const std::int64_t> axis_positions,
                std::span<double> cos_out, std::span<double> sin_out);

// Whether transformers takes cos/sin over the gathered angles (Qwen3-VL, ERNIE, the vision
// towers' cat(rotary_pos_emb, rotary_pos_emb)) rather than gathering slots from per-axis cos/sin
// rows: only the hf numerics can tell them apart. Also true for ggml_rope_multi's modes (kGgml
// with a multi mode), whose rows come from their own ladder.
bool gathers_angles(const Frequencies& freqs);

// What transformers' rotary forward (LlamaRotaryEmbedding and its siblings) returns for
// position_ids [batch, seq] (row-major in `positions`, batch * seq of them): cos and sin
// [batch, seq, width] in float32, width = 2n with emb = cat(freqs, freqs) (`cat`; Llama's class)
// or n with emb = freqs (gpt-oss's class), attention factor applied. In kHf each value is torch's
// for the tensor transformers builds: cos over the contiguous [batch, seq, 2n] emb, or over the
// [batch, n, seq] memory of the transposed product without the cat, whose lane groups run along
// the positions. Other numerics: the convention's values rounded once. Throws Error when the
// output spans are shorter than batch * seq * width or positions does not divide into batch.
// Multi-axis specs take position_ids [axes, batch, seq] (axis-major) as transformers' M-RoPE
// forward does; kHf then takes torch's cos over the emb of each axis and selects each slot from
// its axis (Qwen2-VL), or over the emb of the gathered angles (Qwen3-VL, ERNIE).
void rotary_forward_cos_sin(const Frequencies& freqs, std::span<const std::int64_t> positions,
                            std::int64_t batch, bool cat, std::span<float> cos_out,
                            std::span<float> sin_out);

// sin and cos of position * omega, with the product formed exactly and reduced exactly
// (see kPrecise above). The building block of kPrecise tables and of the sinusoidal encoding.
void exact_sincos(std::int64_t position, double omega, double& sin_out, double& cos_out);

}  // namespace posenc
