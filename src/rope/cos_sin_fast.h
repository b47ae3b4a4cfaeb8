// src/rope/cos_sin_fast.h: the on-the-fly cos/sin rows of `precise` numerics at memory speed
// (internal).
//
// A CosSinStepper makes the rows of a run of tokens whose positions go up by one (a prefill): it
// computes one row directly (the anchor: exact_sincos's exact reduction and Taylor polynomials in
// SIMD), then each next row by rotating the previous one by the step angle w_i in double. Each
// entry is rounded to float32 only where an error bound proves the rounding equals the exact
// path's; the other entries are computed by exact_sincos. Every row after kMaxSteps steps, or
// after any other jump of a position, is an anchor. So every entry is bit-identical to
// cos_sin_row_f32 (the bound and its derivation are in cos_sin_fast.cc and, for the anchors,
// kernels/cos_sin_fast_kernel.cc).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/core/frequencies.h"

namespace posenc::detail {

class CosSinStepper {
 public:
  // Steps between anchors. The bound grows with the steps, and with it the pairs sent to
  // exact_sincos; since the anchors are SIMD, anchoring more often is cheaper than those: rows of
  // head_dim 64 / 128 / 256 (1 thread, Zen 5) took 12.2-12.6 / 24.8-25.2 / 46.8-47.0 ns each at
  // 512 steps, 11.6 / 23.7-24.2 / 43.9-44.3 at 256, 11.3 / 23.0-23.5 / 42.7-43.0 at 128, 11.5-11.7
  // / 23.1-23.6 / 42.7-43.4 at 64.
  static constexpr std::int64_t kMaxSteps = 128;

  struct Stats {
    std::int64_t anchors = 0;      // rows computed exactly
    std::int64_t steps = 0;        // rows stepped from the previous one
    std::int64_t repeats = 0;      // rows at the last row's positions again: its floats, kept
    std::int64_t exact_pairs = 0;  // pairs of stepped rows the bound sent to the exact path
  };

  // Whether rows of `freqs` can be stepped: `precise` numerics and a finite attention factor
  // below 2^64 (the others keep their engines' float32 arithmetic, cos_sin_at).
  static bool applies(const Frequencies& freqs);

  // `bound_scale` multiplies the error bound: 1 in the library; tests shrink it to show the
  // check is what keeps the rows exact.
  explicit CosSinStepper(const Frequencies& freqs, double bound_scale = 1.0);

  // As a new stepper of `freqs`, keeping this one's memory.
  void reset(const Frequencies& freqs, double bound_scale = 1.0);

  // Whether a stepper reset to (freqs, bound_scale) would be this one: the same bits of inv_freq
  // and of the attention factor, the same axis map and bound scale. Its rows and the state they
  // step from then serve the next call as they are (rope_rows.cc keeps a thread's steppers from one
  // call to the next).
  bool serves(const Frequencies& freqs, double bound_scale = 1.0) const;

  // The row at one position per axis of the spec's axis map, or one position for every axis, n
  // values each; the same bits as cos_sin_row_f32 of those positions. The positions of the last
  // row again (every layer of a decode step rotates its token at one position) give that row's
  // floats, kept by the stepper, without arithmetic (below).
  void row(std::span<const std::int64_t> axis_positions, float* c, float* s);

  // The rows of a one-axis spec at positions[0 .. count): row k's n values at c + k * stride and
  // s + k * stride; the same bits as row() per position. A run of positions going up by one is
  // stepped in one kernel call (a prefill's block of tokens); anything else goes row by row.
  void rows(const std::int64_t* positions, std::int64_t count, float* c, float* s,
            std::int64_t stride);

  // The rows of any axis map at positions[a * count + k] (axis a of row k), row k's n values at
  // c + k * stride and s + k * stride; the same bits as row() per row. A run of rows whose axes
  // each move by one or stay, the same ones from row to row (a multi-axis spec's text tokens:
  // every axis moves; along a row of an image grid: the width's), is stepped in one kernel call,
  // as rows() steps a one-axis run.
  void rows_by_axis(const std::int64_t* positions, std::int64_t count, float* c, float* s,
                    std::int64_t stride);

  const Stats& stats() const { return stats_; }

 private:
  void anchor(const std::int64_t* axis_positions, float* c, float* s);
  // The doubles dc, ds (times af) and the floats c, s of the pairs at anchor_pos_ (one position
  // per pair, also in position_ as doubles): the SIMD anchor kernel, and exact_sincos for the
  // pairs it flags. Returns how many it flagged.
  std::int64_t exact_anchor(double af, double bound, double* dc, double* ds, float* c, float* s);
  // The next row by one step of the axes in `moving` (bit a: axis a moves by one).
  void step(unsigned moving, const std::int64_t* axis_positions, float* c, float* s);
  // `count` one-axis rows by one step each from the current row, at positions[0 .. count), which
  // go up by one from the last row's, within kMaxSteps of the anchor.
  void step_rows(const std::int64_t* positions, std::int64_t count, float* c, float* s,
                 std::int64_t stride);
  // The public calls' work; all_or_nothing(make) runs it and, if it throws, leaves no row.
  void make_row(std::span<const std::int64_t> axis_positions, float* c, float* s);
  void make_rows(const std::int64_t* positions, std::int64_t count, float* c, float* s,
                 std::int64_t stride);
  void make_rows_by_axis(const std::int64_t* positions, std::int64_t count, float* c, float* s,
                         std::int64_t stride);
  template <class F>
  void all_or_nothing(F&& make);
  // The axes rows read that move by one from positions `last` to the positions at
  // axis_positions[a * stride] (bit a), or -1 where a row there cannot be stepped from `last` (a
  // jump, or an axis that stays at |p| >= 2^31).
  std::int64_t moving_axes(const std::int64_t* last, const std::int64_t* axis_positions,
                           std::int64_t stride) const;
  // Whether the axes that rows read are at the last row's positions (a row made, and kept).
  bool repeats_last(const std::int64_t* axis_positions) const;
  // Gives the kept row again, as `count` rows (row r at c + r * stride).
  void give_kept(std::int64_t count, float* c, float* s, std::int64_t stride);
  // Keeps the row just made, the one at last_pos_.
  void keep(const float* c, const float* s);
  // The floats of the pairs outside [live_begin_, live_end_) in `count` rows (row r at
  // c + r * stride): every pair there has frequency 0.
  void fill_zero_pairs(std::int64_t count, float* c, float* s, std::int64_t stride) const;
  // What step and step_rows share: `count` rows by one step each of the axes in `moving`, row r's
  // floats at c + r * stride; position_of(r, i) is pair i's position in row r (for the pairs the
  // bound sends to the exact path).
  template <class PositionOf>
  void step_run(unsigned moving, std::int64_t count, float* c, float* s, std::int64_t stride,
                PositionOf position_of);
  const std::vector<double>& step_factors(unsigned moving);

  std::vector<double> w_;
  // The pairs between the first and the last nonzero frequency, [live_begin_, live_end_): only these
  // are anchored and stepped. Proportional RoPE leaves every pair past its rotated fraction at
  // frequency 0; rerotate_keys' rows (the frequencies' differences) are 0 where a method left a
  // pair's frequency as it was (dynamic NTK's first pair, YaRN's fastest ones). A pair of
  // frequency 0 is (af, +0 af) at every position, exact_sincos's (+0, 1) times the attention
  // factor, so its floats are written as they are (fill_zero_pairs).
  std::size_t live_begin_ = 0, live_end_ = 0;
  AxisMap map_;                         // the spec's, for serves()
  std::vector<std::size_t> slot_axis_;  // per pair; all 0 for a one-axis row
  std::vector<unsigned> used_axes_;     // the axes some pair reads
  double af_ = 1.0;
  double bound_scale_ = 1.0;
  std::vector<double> c_, s_;  // the current row, times the attention factor
  // The floats of the last row made (at last_pos_), for its positions again: a step by exactly
  // (1, 0) would leave c_ and s_ as they are and decide every float as the last row did, so the
  // same floats (the exact path's, with the library's bound). `posenc bench --filter decode` on
  // the fly (its decode cases rotate one position again and again, as a decode step's layers after
  // the first do; one thread, Zen 4, medians of three runs), a step again -> the kept row:
  // llama2-7b-decode f32 309 -> 289 ns, f16 390 -> 372, bf16 358 -> 344.
  std::vector<float> kept_c_, kept_s_;
  std::vector<std::int64_t> anchor_pos_;  // per pair, the anchor's position
  std::vector<double> position_;          // the same as doubles, for the kernel
  std::vector<std::int64_t> last_pos_;
  std::vector<std::int64_t> flagged_;
  // Step factors per set of moving axes (bit a: axis a moves by one): [uc | us], 2n each; (1, 0)
  // for pairs of axes that stay.
  std::vector<std::vector<double>> factors_;
  std::vector<double> unit_step_;  // exact cos w_i, sin w_i, made on the first step
  unsigned last_moving_ = 0;       // the moving axes of last_factors_ (null: none yet)
  const double* last_factors_ = nullptr;
  std::int64_t since_anchor_ = -1;  // -1: no row yet
  Stats stats_;
};

}  // namespace posenc::detail
