// posenc/rope/table.h: CosSinTable, cos and sin per (position, pair), built once.
//
//   cos[p * n + i] = attention_factor * cos(p * w_i)
//   sin[p * n + i] = attention_factor * sin(p * w_i)
//   for p in [0, positions), i in [0, n), n = Frequencies::pair_count().
//
// Each entry is computed in the Frequencies' numeric convention (cos_sin.h) and rounded once to
// float32: in `precise` numerics that is the exactly rounded value of the float64-frequency
// angle; in `hf` it is transformers' float32 value; in `ggml` llama.cpp's. One row serves every
// head of every token at that position (ggml's per-position cache, shared by all heads).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/core/frequencies.h"

namespace posenc {

class CosSinTable {
 public:
  // Builds the rows for positions [0, positions). Throws Error when positions < 0 or the table
  // would not fit in memory addressable here.
  CosSinTable(const Frequencies& freqs, std::int64_t positions);

  std::int64_t positions() const { return positions_; }
  std::int64_t pairs() const { return pairs_; }
  const Frequencies& frequencies() const { return freqs_; }

  // Row of position p (0 <= p < positions()): n cosines, n sines. One-axis rows: a multi-axis
  // token's row gathers slot i from the row of its axis' position (apply.h).
  std::span<const float> cos_row(std::int64_t p) const {
    return {cos_.data() + static_cast<std::size_t>(p * pairs_), static_cast<std::size_t>(pairs_)};
  }
  std::span<const float> sin_row(std::int64_t p) const {
    return {sin_.data() + static_cast<std::size_t>(p * pairs_), static_cast<std::size_t>(pairs_)};
  }

 private:
  Frequencies freqs_;
  std::int64_t positions_ = 0;
  std::int64_t pairs_ = 0;
  std::vector<float> cos_;
  std::vector<float> sin_;
};

// One row computed on the fly: cos/sin of every pair at `position`, rounded once to float32 (the
// exact path). The kernels' table-free path gives these bits too, stepping `precise` rows of
// consecutive positions (src/rope/cos_sin_fast.h); CosSinTable does the same.
void cos_sin_row_f32(const Frequencies& freqs, std::int64_t position, std::span<float> cos_out,
                     std::span<float> sin_out);
// Multi-axis: one position per axis of freqs.spec's axis map (cos_sin_at's multi-axis rule).
void cos_sin_row_f32(const Frequencies& freqs, std::span<const std::int64_t> axis_positions,
                     std::span<float> cos_out, std::span<float> sin_out);

}  // namespace posenc
