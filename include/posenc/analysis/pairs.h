// posenc/analysis/pairs.h: what a model's RoPE does to each rotated pair, as `posenc inspect` and
// the report's per-pair table show it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "posenc/core/frequencies.h"

namespace posenc {

struct PairRow {
  std::int64_t index = 0;
  double inv_freq = 0;               // w_i as the method computes it
  std::optional<double> wavelength;  // 2 pi / inv_freq in tokens; none for an unrotated pair
  std::optional<double> rotations;   // r = L / lambda0: turns of the unscaled wavelength over L
  double weight = 0;                 // interpolation weight (0 kept, 1 interpolated)
  std::optional<double> ratio;       // inv_freq / unscaled inv_freq; none when that is 0
  std::string_view treatment;        // pair_treatment: "kept", "interpolated" or "blended"
  std::string_view axis;             // the position axis it reads: "t" (also one-axis), "h", "w"...
};

// One row per pair of `f`, with r counted over `context` (none when it is not positive).
std::vector<PairRow> pair_rows(const Frequencies& f, double context);

// As above over the model's original context, context_lengths(f.spec).original (the original
// context, else max_position_embeddings, else kAssumedContext).
std::vector<PairRow> pair_rows(const Frequencies& f);

}  // namespace posenc
