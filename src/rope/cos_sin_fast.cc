// CosSinStepper: rows by SIMD anchors and double rotations, rounded where a bound proves it.
//
// The bound. u = 2^-53 (double's unit roundoff); z_m = exp(i (p0 + m) w) the exact value of the
// m-th row after the anchor at p0, for one pair (w the double inv_freq, the product p w exact as
// in exact_sincos); af the attention factor.
//  1. exact_sincos gives cos and sin within d = 2u each: the reduction is exact to ~1e-22, glibc's
//     sin and cos of the remainder are within 1 ulp (<= u below 1), the correction term and the
//     final sum add < u/2. The anchors and the step factor U = exp(i w) are made by the SIMD
//     anchor kernel (the same reduction, Taylor polynomials within 1.0u: the derivation is in
//     kernels/cos_sin_fast_kernel.cc) or, for the pairs it flags, by exact_sincos: within d of
//     the true values either way, so Z_0 and U are within sqrt(2) d < 3u of z_0 and exp(i w)
//     (complex modulus).
//  2. The row kept is A_m, af times the m-th row: A_0 = fl(c af), fl(s af) with c and s within
//     d of the truth, so within |af| (d + 1.01u) < 3.1u |af| per part, 4.4u |af| in modulus, of
//     af z_0;
//     A_m = fl(A_{m-1} U). Each part of a product is x y - x' y' with one product rounded and the
//     rest fused (FMA), or both products and the sum rounded (no FMA): either way the error is
//     <= 2u (|x y| + |x' y'|) <= 2u |A||U| by Cauchy-Schwarz, < 3u |af| in modulus (|A| / |af| and
//     |U| are within 2^-30 of 1 for m <= 512). With e_m = |A_m - af z_m|:
//       e_m <= e_{m-1} |U| + |af| |U - exp(i w)| + 3u |af| <= e_{m-1} (1 + 3u) + 6u |af|,
//     so e_m <= |af| u (6 m + 4.4) (1 + 3u)^m < |af| u (6.01 m + 4.4) for m <= 512.
//  3. The entry v = Re A_m (or Im) is within e_m of af cos((p0 + m) w); the exact path's double
//     r = fl(c af) within 3.1u |af|. So |v - r| <= |af| u (6.01 m + 7.5), and computing v - E
//     and v + E rounds by at most 1.01u |af| more.
//  E = |af| u (8 m + 16) covers all of it for m <= kMaxSteps (8 m + 16 >= 6.01 m + 8.6).
//  A pair whose axis did not move (another axis of a multi-axis row did) steps by U = (1, 0)
//  exactly: x 1 - y 0 and y 1 + x 0 are x and y, so e_m = e_{m-1}, and counting the step in m
//  only widens E. (A whole row at the same positions again is the last row's floats, kept:
//  CosSinStepper::row.)
//  Positions are those exact_sincos reduces exactly, |p| < 2^31; w is any double.
// Where every real within E of v rounds to one float32, that float is fl32(r), and fl32(v) is the
// entry written; the kernel decides it (cos_sin_fast_kernel.cc: v more than max(2 E, 2^-149)
// from the midpoint of its float32 cell for a whole group of vectors, else fl32(v - E) ==
// fl32(v + E) entry by entry); elsewhere the pair is recomputed with exact_sincos (measured: about 2e-3 of the pairs
// of stepped rows, mostly values near zero, whose float32 ulp is small).
#include "rope/cos_sin_fast.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "rope/kernels/cos_sin_fast_kernel.h"

namespace posenc::detail {

namespace {

constexpr double kUnitRoundoff = 0x1p-53;
static_assert(CosSinStepper::kMaxSteps <= 512, "the bound above is derived for m <= 512");
constexpr std::size_t kMaxStepperAxes = 8 * sizeof(unsigned);  // bits of `moving`

constexpr std::int64_t kStepLimit = std::int64_t{1} << 31;

// Whether p is the position after `last`, both inside the positions the bound covers
// (|p| < 2^31, which exact_sincos reduces exactly); without an overflow at the int64 limits.
constexpr bool steps_by_one(std::int64_t last, std::int64_t p) {
  return last > -kStepLimit && last < kStepLimit - 1 && p == last + 1;
}

// Whether a row may keep position p's doubles (an axis that stays while another moves): p inside
// the positions the bound covers.
constexpr bool stays_in_bound(std::int64_t p) { return p > -kStepLimit && p < kStepLimit; }

}  // namespace

bool CosSinStepper::applies(const Frequencies& freqs) {
  return freqs.numerics == Numerics::kPrecise && std::isfinite(freqs.attention_factor) &&
         std::abs(freqs.attention_factor) < 0x1p64;
}

CosSinStepper::CosSinStepper(const Frequencies& freqs, double bound_scale) {
  reset(freqs, bound_scale);
}

void CosSinStepper::reset(const Frequencies& freqs, double bound_scale) {
  if (!applies(freqs)) throw Error("CosSinStepper: rows of these numerics cannot be stepped");
  // No row and no frequencies until the reset is done: a throw below (a map built by hand, an
  // allocation) leaves a stepper that serves nothing and keeps no row.
  since_anchor_ = -1;
  w_.clear();
  const std::size_t n = freqs.inv_freq.size();
  const AxisMap& map = freqs.spec.axis_map;
  const std::size_t axes = std::max<std::size_t>(1, static_cast<std::size_t>(map.axes));
  if (axes > kMaxStepperAxes) {
    throw Error("CosSinStepper: too many axes (" + std::to_string(axes) + ")");
  }
  // compute_frequencies validated the map; Frequencies built or changed by hand are not, and the
  // rows read positions by it.
  if (!map.slot_axis.empty() && map.slot_axis.size() != n) {
    throw Error("CosSinStepper: the axis map has " + std::to_string(map.slot_axis.size()) +
                " slots; expected one per frequency pair (" + std::to_string(n) + ")");
  }
  for (const std::uint8_t a : map.slot_axis) {
    if (a >= axes) {
      throw Error("CosSinStepper: a slot of the axis map reads axis " + std::to_string(a) +
                  ", not below its axis count (" + std::to_string(axes) + ")");
    }
  }
  // assign, resize and clear keep each vector's memory: a decode step's call resets the thread's
  // stepper instead of allocating a new one (nine allocations, as long as the rotation of one
  // token's 32 heads).
  af_ = freqs.attention_factor;
  bound_scale_ = bound_scale;
  map_ = map;
  slot_axis_.assign(n, 0);
  if (!map.slot_axis.empty()) {
    for (std::size_t i = 0; i < n; ++i) slot_axis_[i] = static_cast<std::size_t>(map.slot_axis[i]);
  }
  used_axes_.clear();
  for (std::size_t a = 0; a < axes; ++a) {
    if (std::find(slot_axis_.begin(), slot_axis_.end(), a) != slot_axis_.end())
      used_axes_.push_back(static_cast<unsigned>(a));
  }
  c_.resize(n);
  s_.resize(n);
  kept_c_.resize(n);
  kept_s_.resize(n);
  position_.resize(n);
  anchor_pos_.resize(n);
  last_pos_.assign(axes, 0);
  if (flagged_.size() < n) flagged_.resize(n);
  for (std::vector<double>& f : factors_) f.clear();
  factors_.resize(std::size_t{1} << std::min<std::size_t>(axes, 4));
  unit_step_.clear();
  last_moving_ = 0;
  last_factors_ = nullptr;
  stats_ = Stats{};
  live_end_ = n;
  while (live_end_ > 0 && freqs.inv_freq[live_end_ - 1] == 0.0) --live_end_;
  live_begin_ = 0;
  while (live_begin_ < live_end_ && freqs.inv_freq[live_begin_] == 0.0) ++live_begin_;
  w_.assign(freqs.inv_freq.begin(), freqs.inv_freq.end());  // last: serves() holds from here
}

void CosSinStepper::fill_zero_pairs(std::int64_t count, float* c, float* s,
                                    std::int64_t stride) const {
  const auto n = static_cast<std::int64_t>(w_.size());
  const auto b = static_cast<std::int64_t>(live_begin_), e = static_cast<std::int64_t>(live_end_);
  if (b == 0 && e == n) return;
  // exact_sincos(p, +-0) is (+0, 1) at every position (the product p w is a zero, whose reduction
  // gives +0), so the exact path's floats are fl32(1 af) and fl32(+0 af).
  const auto cf = static_cast<float>(1.0 * af_);
  const auto sf = static_cast<float>(0.0 * af_);
  for (std::int64_t r = 0; r < count; ++r) {
    float* cr = c + r * stride;
    float* sr = s + r * stride;
    std::fill(cr, cr + b, cf);
    std::fill(sr, sr + b, sf);
    std::fill(cr + e, cr + n, cf);
    std::fill(sr + e, sr + n, sf);
  }
}

void CosSinStepper::anchor(const std::int64_t* ap, float* c, float* s) {
  const std::size_t n = w_.size();
  for (std::size_t i = 0; i < n; ++i) {
    anchor_pos_[i] = ap[slot_axis_[i]];
    position_[i] = static_cast<double>(anchor_pos_[i]);
  }
  // The first row's bound: the SIMD anchor's doubles are within 1.0 u of the true values, closer
  // than the 2 u the derivation above allows exact_sincos (cos_sin_fast_kernel.cc).
  const std::int64_t k = exact_anchor(af_, bound_scale_ * std::abs(af_) * kUnitRoundoff * 16.0,
                                      c_.data(), s_.data(), c, s);
  since_anchor_ = 0;
  ++stats_.anchors;
  stats_.exact_pairs += k;
}

std::int64_t CosSinStepper::exact_anchor(double af, double bound, double* dc, double* ds, float* c,
                                         float* s) {
  // The live pairs only; the kernel's indices count from live_begin_.
  const std::size_t b = live_begin_;
  CosSinAnchor a;
  a.position = position_.data() + b;
  a.w = w_.data() + b;
  a.n = static_cast<std::int64_t>(live_end_ - b);
  a.af = af;
  a.c = dc + b;
  a.s = ds + b;
  a.cos_out = c + b;
  a.sin_out = s + b;
  a.bound = bound;
  a.flagged = flagged_.data();
  const std::int64_t k = cos_sin_anchor(a);
  // The pairs whose rounding the bound left open, or whose angle the polynomials do not cover:
  // exact_sincos, doubles and floats.
  for (std::int64_t j = 0; j < k; ++j) {
    const auto i = b + static_cast<std::size_t>(flagged_[static_cast<std::size_t>(j)]);
    double se, ce;
    exact_sincos(anchor_pos_[i], w_[i], se, ce);
    dc[i] = ce * af;
    ds[i] = se * af;
    c[i] = static_cast<float>(dc[i]);
    s[i] = static_cast<float>(ds[i]);
  }
  // The pairs of frequency 0 around them: their doubles exact, as the steps keep them.
  const auto zero_pair = [&](std::size_t i) {
    dc[i] = 1.0 * af;
    ds[i] = 0.0 * af;
    c[i] = static_cast<float>(dc[i]);
    s[i] = static_cast<float>(ds[i]);
  };
  for (std::size_t i = 0; i < b; ++i) zero_pair(i);
  for (std::size_t i = live_end_; i < w_.size(); ++i) zero_pair(i);
  return k;
}

bool CosSinStepper::serves(const Frequencies& freqs, double bound_scale) const {
  return applies(freqs) && bound_scale == bound_scale_ &&
         std::bit_cast<std::uint64_t>(freqs.attention_factor) ==
             std::bit_cast<std::uint64_t>(af_) &&
         freqs.inv_freq.size() == w_.size() &&
         std::memcmp(freqs.inv_freq.data(), w_.data(), w_.size() * sizeof(double)) == 0 &&
         freqs.spec.axis_map == map_;
}

const std::vector<double>& CosSinStepper::step_factors(unsigned moving) {
  const std::size_t n = w_.size();
  if (unit_step_.empty()) {
    // exp(i w) for each pair: the anchor at position 1 without the attention factor (its doubles
    // are within 1.0 u of the true values, inside the 3 u the bound allows U); its floats are not
    // needed.
    unit_step_.resize(2 * n);
    std::fill(anchor_pos_.begin(), anchor_pos_.end(), 1);
    std::fill(position_.begin(), position_.end(), 1.0);
    std::vector<float> unused(2 * n);
    exact_anchor(1.0, 0.0, unit_step_.data(), unit_step_.data() + n, unused.data(),
                 unused.data() + n);
  }
  if (moving >= factors_.size()) factors_.resize(std::size_t{moving} + 1);
  std::vector<double>& f = factors_[moving];
  if (f.empty()) {
    f.resize(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      const bool moves = (moving >> slot_axis_[i]) & 1u;
      f[i] = moves ? unit_step_[i] : 1.0;
      f[n + i] = moves ? unit_step_[n + i] : 0.0;
    }
  }
  return f;
}

std::int64_t CosSinStepper::moving_axes(const std::int64_t* last, const std::int64_t* ap,
                                        std::int64_t stride) const {
  unsigned moving = 0;
  for (unsigned a : used_axes_) {
    const std::int64_t p = ap[static_cast<std::int64_t>(a) * stride];
    if (p == last[a]) {
      if (!stays_in_bound(p)) return -1;
      continue;
    }
    if (!steps_by_one(last[a], p)) return -1;
    moving |= 1u << a;
  }
  return moving;
}

bool CosSinStepper::repeats_last(const std::int64_t* ap) const {
  if (since_anchor_ < 0) return false;
  for (unsigned a : used_axes_) {
    if (ap[a] != last_pos_[a]) return false;
  }
  return true;
}

void CosSinStepper::give_kept(std::int64_t count, float* c, float* s, std::int64_t stride) {
  stats_.repeats += count;
  if (kept_c_.empty()) return;  // no pairs: memcpy must not see a null pointer
  const std::size_t bytes = kept_c_.size() * sizeof(float);
  for (std::int64_t r = 0; r < count; ++r) {
    std::memcpy(c + r * stride, kept_c_.data(), bytes);
    std::memcpy(s + r * stride, kept_s_.data(), bytes);
  }
}

void CosSinStepper::keep(const float* c, const float* s) {
  if (kept_c_.empty()) return;
  const std::size_t bytes = kept_c_.size() * sizeof(float);
  std::memcpy(kept_c_.data(), c, bytes);
  std::memcpy(kept_s_.data(), s, bytes);
}

// The public calls change the row state all or nothing: a throw midway (an allocation of the step
// factors, a wrong position count) leaves a stepper with no row, whose next row is an anchor,
// instead of positions, doubles and the kept row out of step (a repeat would give a stale row).
template <class F>
void CosSinStepper::all_or_nothing(F&& make) {
  try {
    make();
  } catch (...) {
    since_anchor_ = -1;
    throw;
  }
}

void CosSinStepper::row(std::span<const std::int64_t> ap, float* c, float* s) {
  all_or_nothing([&] { make_row(ap, c, s); });
}

void CosSinStepper::rows(const std::int64_t* positions, std::int64_t count, float* c, float* s,
                         std::int64_t stride) {
  all_or_nothing([&] { make_rows(positions, count, c, s, stride); });
}

void CosSinStepper::rows_by_axis(const std::int64_t* positions, std::int64_t count, float* c,
                                 float* s, std::int64_t stride) {
  all_or_nothing([&] { make_rows_by_axis(positions, count, c, s, stride); });
}

void CosSinStepper::make_row(std::span<const std::int64_t> ap, float* c, float* s) {
  // One axis moving by one (a prefill's rows): straight to the step, without the multi-axis
  // bookkeeping below (in a profile of 8 f16 heads rotated on the fly it took 8% of the time,
  // the step itself 20%).
  if (ap.size() == 1 && last_pos_.size() == 1 && since_anchor_ >= 0 && since_anchor_ < kMaxSteps) {
    const std::int64_t p = ap[0];
    if (steps_by_one(last_pos_[0], p)) {
      last_pos_[0] = p;
      step(1u, ap.data(), c, s);
      keep(c, s);
      return;
    }
  }
  if (ap.size() == 1 && last_pos_.size() > 1) {  // one position for every axis
    std::int64_t same[kMaxStepperAxes];
    std::fill(same, same + last_pos_.size(), ap[0]);
    return make_row(std::span<const std::int64_t>(same, last_pos_.size()), c, s);
  }
  if (ap.size() != last_pos_.size()) {
    throw Error("CosSinStepper: " + std::to_string(ap.size()) + " axis positions for a " +
                std::to_string(last_pos_.size()) + "-axis map");
  }
  if (repeats_last(ap.data())) {
    std::copy(ap.begin(), ap.end(), last_pos_.begin());
    give_kept(1, c, s, 0);
    return;
  }
  // Which axes moved by one since the last row; any other change re-anchors. The same positions
  // again were given above (the kept row); here an axis a row reads may stay (a step by exactly
  // (1, 0) for its pairs) while another moves.
  const std::int64_t moving = since_anchor_ >= 0 && since_anchor_ < kMaxSteps
                                  ? moving_axes(last_pos_.data(), ap.data(), 1)
                                  : -1;
  std::copy(ap.begin(), ap.end(), last_pos_.begin());
  if (moving < 0) {
    anchor(ap.data(), c, s);
  } else {
    step(static_cast<unsigned>(moving), ap.data(), c, s);
  }
  keep(c, s);
}

void CosSinStepper::make_rows(const std::int64_t* positions, std::int64_t count, float* c, float* s,
                              std::int64_t stride) {
  if (last_pos_.size() != 1) {
    throw Error(
        "CosSinStepper: rows() takes one position per row, for a one-axis map; this one "
        "reads " +
        std::to_string(last_pos_.size()) + " axes");
  }
  std::int64_t k = 0;
  while (k < count) {
    // The run of rows from k that step by one from the current row, before the next anchor.
    std::int64_t m = 0;
    if (since_anchor_ >= 0) {
      const std::int64_t room = std::min(count - k, kMaxSteps - since_anchor_);
      std::int64_t last = last_pos_[0];
      while (m < room && steps_by_one(last, positions[k + m])) {
        last = positions[k + m];
        ++m;
      }
    }
    if (m == 0) {
      make_row(std::span<const std::int64_t>(positions + k, 1), c + k * stride, s + k * stride);
      ++k;
      continue;
    }
    step_rows(positions + k, m, c + k * stride, s + k * stride, stride);
    k += m;
    keep(c + (k - 1) * stride, s + (k - 1) * stride);
  }
}

template <class PositionOf>
void CosSinStepper::step_run(unsigned moving, std::int64_t count, float* c, float* s,
                             std::int64_t stride, PositionOf position_of) {
  const std::size_t n = w_.size();
  if (moving != last_moving_ || last_factors_ == nullptr) {
    last_factors_ = step_factors(moving).data();
    last_moving_ = moving;
  }
  if (flagged_.size() < static_cast<std::size_t>(count) * n)
    flagged_.resize(static_cast<std::size_t>(count) * n);
  const double unit = bound_scale_ * std::abs(af_) * kUnitRoundoff;
  // The live pairs only (fill_zero_pairs writes the others); the kernel's indices count from
  // live_begin_.
  const std::size_t b = live_begin_;
  CosSinStep st;
  st.c = c_.data() + b;
  st.s = s_.data() + b;
  st.uc = last_factors_ + b;
  st.us = last_factors_ + n + b;
  st.n = static_cast<std::int64_t>(live_end_ - b);
  // Row j is step m = since_anchor_ + 1 + j: E = unit (8 m + 16), the bound above.
  st.bound = unit * static_cast<double>(8 * (since_anchor_ + 1) + 16);
  st.bound_step = unit * 8.0;
  st.rows = count;
  st.cos_out = c + b;
  st.sin_out = s + b;
  st.out_stride = stride;
  st.flagged = flagged_.data();
  const std::int64_t k = cos_sin_step(st);
  const auto un = static_cast<std::int64_t>(live_end_ - b);
  for (std::int64_t j = 0; j < k; ++j) {
    const std::int64_t f = flagged_[static_cast<std::size_t>(j)];
    const std::int64_t r = f / un, i = static_cast<std::int64_t>(b) + f % un;
    const auto pair = static_cast<std::size_t>(i);
    double se, ce;
    exact_sincos(position_of(r, pair), w_[pair], se, ce);
    c[r * stride + i] = static_cast<float>(ce * af_);
    s[r * stride + i] = static_cast<float>(se * af_);
  }
  fill_zero_pairs(count, c, s, stride);
  since_anchor_ += count;
  stats_.exact_pairs += k;
  stats_.steps += count;
}

void CosSinStepper::step_rows(const std::int64_t* positions, std::int64_t count, float* c, float* s,
                              std::int64_t stride) {
  step_run(1u, count, c, s, stride,
           [positions](std::int64_t r, std::size_t) { return positions[r]; });
  last_pos_[0] = positions[count - 1];
}

void CosSinStepper::step(unsigned moving, const std::int64_t* ap, float* c, float* s) {
  step_run(moving, 1, c, s, 0, [&](std::int64_t, std::size_t i) { return ap[slot_axis_[i]]; });
}

void CosSinStepper::make_rows_by_axis(const std::int64_t* positions, std::int64_t count, float* c,
                                      float* s, std::int64_t stride) {
  const std::size_t axes = last_pos_.size();
  if (axes == 1) return make_rows(positions, count, c, s, stride);
  const auto at = [&](std::size_t a, std::int64_t k) {
    return positions[static_cast<std::int64_t>(a) * count + k];
  };
  std::int64_t ap[kMaxStepperAxes];
  std::int64_t k = 0;
  while (k < count) {
    // The run of rows from k that step from the row before by the same axes, before the next
    // anchor.
    std::int64_t m = 0, moving = -1;
    if (since_anchor_ >= 0 && since_anchor_ < kMaxSteps)
      moving = moving_axes(last_pos_.data(), positions + k, count);
    if (moving >= 0) {
      const std::int64_t room = std::min(count - k, kMaxSteps - since_anchor_);
      for (m = 1; m < room; ++m) {
        for (std::size_t a = 0; a < axes; ++a) ap[a] = at(a, k + m - 1);
        if (moving_axes(ap, positions + k + m, count) != moving) break;
      }
    }
    if (m == 0) {
      for (std::size_t a = 0; a < axes; ++a) ap[a] = at(a, k);
      make_row(std::span<const std::int64_t>(ap, axes), c + k * stride, s + k * stride);
      ++k;
      continue;
    }
    for (std::size_t a = 0; a < axes; ++a) last_pos_[a] = at(a, k + m - 1);
    if (moving == 0) {  // the last row's positions again (row())
      give_kept(m, c + k * stride, s + k * stride, stride);
    } else {
      step_run(static_cast<unsigned>(moving), m, c + k * stride, s + k * stride, stride,
               [&](std::int64_t r, std::size_t i) { return at(slot_axis_[i], k + r); });
      keep(c + (k + m - 1) * stride, s + (k + m - 1) * stride);
    }
    k += m;
  }
}

}  // namespace posenc::detail
