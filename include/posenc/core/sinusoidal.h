// posenc/core/sinusoidal.h: the sinusoidal encoding of "Attention Is All You Need" (§3.5).
//
//   w_k = base^(-2k / d_model),  k in [0, d_model / 2)
//   kInterleaved (the paper):     PE(p, 2k) = sin(p w_k),  PE(p, 2k + 1) = cos(p w_k)
//   kConcatenated (tensor2tensor): PE(p, k) = sin(p w_k),  PE(p, d_model/2 + k) = cos(p w_k)
//
// The shift property (the seed document's proof): PE(p + D) = T(D) PE(p), where T(D) is
// block-diagonal with one 2x2 rotation per frequency,
//   [ sin(a + b) ]   [  cos b   sin b ] [ sin a ]
//   [ cos(a + b) ] = [ -sin b   cos b ] [ cos a ],   a = p w_k, b = D w_k,
// placed on dims (2k, 2k+1) (interleaved) or (k, d_model/2 + k) (concatenated). T(D) does not
// depend on p.
//
// Values are computed with exact angle reduction (cos_sin.h), so they are right to double
// precision at any position below 2^31.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/core/defaults.h"

namespace posenc {

enum class SinusoidalLayout { kInterleaved, kConcatenated };

// "interleaved" or "concatenated", and its inverse (throws Error naming `field` and the value).
std::string_view sinusoidal_layout_name(SinusoidalLayout layout);
SinusoidalLayout parse_sinusoidal_layout(std::string_view name, std::string_view field = "layout");

struct SinusoidalSpec {
  std::int64_t d_model = 0;         // even, > 0
  double base = kDefaultRopeTheta;  // 10000 in the paper
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
};

// Throws Error naming the field when d_model is not even and positive or base is not > 0.
void validate(const SinusoidalSpec& spec);

// w_k for k in [0, d_model/2).
std::vector<double> sinusoidal_frequencies(const SinusoidalSpec& spec);

// One row: PE(position, j) for j in [0, d_model). `out` must hold d_model entries.
void sinusoidal_row(const SinusoidalSpec& spec, std::int64_t position, std::span<double> out);

// The table for positions [first, first + count), row-major [count, d_model].
std::vector<double> sinusoidal_table(const SinusoidalSpec& spec, std::int64_t count,
                                     std::int64_t first = 0);

// embeddings[r, :] += PE(first + r, :) for r in [0, rows); `embeddings` is row-major
// [rows, d_model] (the input layer of the Transformer). Throws Error on a size mismatch.
void add_sinusoidal(const SinusoidalSpec& spec, std::span<float> embeddings, std::int64_t rows,
                    std::int64_t first = 0);
void add_sinusoidal(const SinusoidalSpec& spec, std::span<double> embeddings, std::int64_t rows,
                    std::int64_t first = 0);

// T(delta), row-major [d_model, d_model], with PE(p + delta) = T(delta) PE(p).
std::vector<double> sinusoidal_shift_matrix(const SinusoidalSpec& spec, std::int64_t delta);

}  // namespace posenc
