// The per-token cos/sin rows of apply_rope, rerotate_keys and rope_append_kv_cache
// (rope/rope_rows.h): read in place from a table, gathered from a table's rows for multi-axis
// tokens, or computed on the fly by each thread's CosSinStepper, a token at a time or a run of
// tokens ahead.
#include "rope/rope_rows.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "rope/cos_sin_fast.h"
#include "rope/kernels/rotate.h"

namespace posenc::detail {

// The axis positions of token t: positions[a * tokens + t].
void axis_positions(const Positions& positions, std::int64_t axes, std::int64_t tokens,
                    std::int64_t t, std::int64_t* out) {
  for (std::int64_t a = 0; a < axes; ++a) out[a] = position_at(positions, a * tokens + t);
}

namespace {

// How many tokens ahead CosSinRows prefetches the table rows a multi-axis gather will read.
constexpr std::int64_t kRowPrefetchTokens = 8;

std::string str(std::int64_t v) { return std::to_string(v); }

// What the rows' position arrays hold: at most kMaxAxes axes. The callers' rope_token_count
// refuses more first, naming the call.
void check_axis_count(std::int64_t axes) {
  if (axes > kMaxAxes)
    throw Error("axis_map: " + str(axes) + " axes; at most " + str(kMaxAxes) + " are supported");
}

// Where a multi-axis token's row comes from, given a table of `rows` rows: computed where a
// position is outside it; read in place where every axis is at one position p (a text token, as
// Qwen2-VL's text and every decoded token: each slot reads row p, so the row is the table's own);
// else gathered slot by slot from its axes' rows.
enum class TableRow { kComputed, kInPlace, kGathered };
TableRow table_row_of(const std::int64_t* ap, std::int64_t axes, std::int64_t rows) {
  bool text = true;
  for (std::int64_t a = 0; a < axes; ++a) {
    if (ap[a] < 0 || ap[a] >= rows) return TableRow::kComputed;
    text = text && ap[a] == ap[0];
  }
  return text ? TableRow::kInPlace : TableRow::kGathered;
}

}  // namespace

namespace {

// This thread's CosSinStepper for `freqs`. A thread computes runs of consecutive tokens, so its
// steppers live in thread-local storage, and they are kept from one call to the next (a stepper
// is reset only for frequencies none of them serves): an engine's decode step rotates its token
// at position p in every layer, then at p + 1, so after the first call each call is a step from
// the last row (or, at the same position, the last row's floats again) instead of an anchor. Four,
// for models whose layers alternate frequencies (Gemma 3's local and global bases), replaced in
// turn. Same bits either way: every row is the exact path's (cos_sin_fast.h).
CosSinStepper& thread_stepper(const Frequencies& freqs) {
  constexpr std::size_t kSteppers = 4;
  thread_local std::array<std::optional<CosSinStepper>, kSteppers> steppers;
  thread_local std::size_t last = 0;  // the one used last, tried first
  thread_local std::size_t next = 0;  // the one replaced next
  if (steppers[last] && steppers[last]->serves(freqs)) return *steppers[last];
  for (std::size_t i = 0; i < kSteppers; ++i) {
    if (steppers[i] && steppers[i]->serves(freqs)) {
      last = i;
      return *steppers[i];
    }
  }
  last = next;
  next = (next + 1) % kSteppers;
  if (steppers[last]) {
    steppers[last]->reset(freqs);
  } else {
    steppers[last].emplace(freqs);
  }
  return *steppers[last];
}

}  // namespace

CosSinRowBlocks::CosSinRowBlocks(const Frequencies& freqs, const Positions& positions,
                                 std::int64_t tokens, const CosSinTable* table)
    : freqs_(freqs),
      positions_(positions),
      tokens_(tokens),
      axes_(axis_count(freqs.spec)),
      applies_(!table && CosSinStepper::applies(freqs)) {
  if (applies_) check_axis_count(axes_);  // operator()'s positions
}

void CosSinRowBlocks::operator()(std::int64_t t0, std::int64_t count, float* c, float* s,
                                 std::int64_t stride) const {
  // Positions axis by axis, [axes, chunk] (CosSinStepper::rows_by_axis).
  constexpr std::int64_t kChunk = 64;
  std::int64_t p[kMaxAxes * kChunk];
  for (std::int64_t k0 = 0; k0 < count; k0 += kChunk) {
    const std::int64_t m = std::min(kChunk, count - k0);
    for (std::int64_t a = 0; a < axes_; ++a) {
      for (std::int64_t k = 0; k < m; ++k)
        p[a * m + k] = position_at(positions_, a * tokens_ + t0 + k0 + k);
    }
    thread_stepper(freqs_).rows_by_axis(p, m, c + k0 * stride, s + k0 * stride, stride);
  }
}

namespace {

// This thread's buffer for RowRuns, grown to the largest run it has held (at most kRowRunBytes,
// or one group of rows where a group is larger) and kept for the thread's life; `taken` while a
// RowRuns of this thread holds it.
struct RowRunBuffer {
  std::vector<float> floats;
  bool taken = false;
};
RowRunBuffer& thread_row_run_buffer() {
  thread_local RowRunBuffer buffer;
  return buffer;
}

// Tokens a run of rows of n pairs holds: kRowRunBytes of rows, a multiple of `group` (at least
// one group), and no more than the chunk's tokens need.
std::int64_t row_run_tokens(std::int64_t pairs, std::int64_t tokens, std::int64_t group) {
  const std::int64_t row_bytes = std::max<std::int64_t>(1, 2 * pairs * std::int64_t{sizeof(float)});
  const std::int64_t groups = std::max<std::int64_t>(1, kRowRunBytes / row_bytes / group);
  return std::clamp<std::int64_t>(groups * group, 1, std::max<std::int64_t>(1, tokens));
}

}  // namespace

RowRuns::RowRuns(const RowBlockFn& block, std::int64_t pairs, std::int64_t begin, std::int64_t end,
                 std::int64_t group)
    : block_(block),
      n_(pairs),
      end_(end),
      run_(row_run_tokens(pairs, end - begin, group)),
      first_(begin),
      last_(begin) {
  const auto floats = static_cast<std::size_t>(run_ * 2 * n_);
  RowRunBuffer& buffer = thread_row_run_buffer();
  if (!buffer.taken) {
    if (buffer.floats.size() < floats) buffer.floats.resize(floats);
    buffer.taken = holds_thread_buffer_ = true;
    rows_ = buffer.floats.data();
  } else {
    own_ = std::make_unique<float[]>(floats);
    rows_ = own_.get();
  }
}

RowRuns::~RowRuns() {
  if (holds_thread_buffer_) thread_row_run_buffer().taken = false;
}

std::pair<float*, float*> RowRuns::row(std::int64_t t) {
  if (t >= last_) {
    // Recorded once made: a run whose rows threw is not one.
    const std::int64_t last = std::min(end_, t + run_);
    block_(t, last - t, rows_, rows_ + n_, 2 * n_);
    first_ = t;
    last_ = last;
  }
  float* c = rows_ + (t - first_) * 2 * n_;
  return {c, c + n_};
}

void RowRuns::rows(std::int64_t t0, std::int64_t count, const float** c, const float** s) {
  const float* first = row(t0).first;
  for (std::int64_t k = 0; k < count; ++k) {
    c[k] = first + k * 2 * n_;
    s[k] = c[k] + n_;
  }
}

CosSinRows::CosSinRows(const Frequencies& freqs, const Positions& positions, std::int64_t tokens,
                       const CosSinTable* table)
    : freqs_(freqs),
      positions_(positions),
      tokens_(tokens),
      table_(table),
      axes_(axis_count(freqs.spec)),
      n_(static_cast<std::size_t>(freqs.pair_count())),
      step_(CosSinStepper::applies(freqs)),
      // The hf numerics of a rule that takes cos over gathered angles has no table row to
      // gather from, so it computes them.
      gather_table_(table && !gathers_angles(freqs)) {
  // One axis: the table's row is read in place. No table: nothing to gather.
  if (axes_ == 1 || !gather_table_) return;
  check_axis_count(axes_);
  // Nor where no token is gathered: text tokens (every axis at one position) read their row in
  // place (a decode step's token, a text prompt), and tokens with a position outside the table
  // are computed. The map's runs below took a tenth of an M-RoPE decode step's apply_rope. lo and
  // hi: each axis' positions over the gathered tokens, for the prefetch below.
  std::int64_t lo[kMaxAxes], hi[kMaxAxes];
  if (!gathered_positions(table->positions(), lo, hi)) return;
  const std::vector<std::uint8_t>& slot_axis = freqs.spec.axis_map.slot_axis;
  const std::size_t n = slot_axis.size();
  // compute_frequencies validated the map and rope_token_count its axes (at most kMaxAxes);
  // Frequencies built by hand are not.
  const std::uint8_t top = n == 0 ? 0 : *std::max_element(slot_axis.begin(), slot_axis.end());
  if (n != n_ || top >= axes_) {
    throw Error("axis_map: " + str(static_cast<std::int64_t>(n)) + " slots reading axes up to " +
                str(top) + "; expected one per frequency pair (" +
                str(static_cast<std::int64_t>(n_)) + "), each below the axis count (" + str(axes_) +
                ")");
  }
  // Run by run, each found by a scan of its slots: a loop over the slots that kept the runs and
  // spans in memory took 30-38% of an M-RoPE decode step's apply_rope here (32 heads of 128,
  // f32, Zen 4), through its stores and loads from one slot to the next.
  std::size_t first[kMaxAxes], last[kMaxAxes];
  std::fill(first, first + kMaxAxes, n);
  std::fill(last, last + kMaxAxes, 0);
  for (std::size_t i = 0; i < n;) {
    const std::size_t a = slot_axis[i];
    std::size_t j = i + 1;
    while (j < n && slot_axis[j] == a) ++j;
    if (run_count_ == kMaxRuns) {
      run_count_ = 0;  // slot by slot
      break;
    }
    runs_[run_count_++] = {i, j, a};
    first[a] = std::min(first[a], i);
    last[a] = j;
    i = j;
  }
  // One span per axis for the row prefetch: its slots first to last, or (slot by slot) its row;
  // none for an axis whose rows stay cached (gather_prefetches_rows).
  for (std::size_t a = 0; a < static_cast<std::size_t>(axes_); ++a) {
    if (!gather_prefetches_rows(lo[a], hi[a], static_cast<std::int64_t>(n_))) continue;
    if (run_count_ == 0) {
      spans_[span_count_++] = {0, n, a};
    } else if (first[a] < n) {
      spans_[span_count_++] = {first[a], last[a], a};
    }
  }
}

// One pass over the positions (a visit per call, not per element): a token is gathered where its
// axes do not all share one position and every one is inside the table.
bool CosSinRows::gathered_positions(std::int64_t table_rows, std::int64_t* lo,
                                    std::int64_t* hi) const {
  std::fill(lo, lo + axes_, std::numeric_limits<std::int64_t>::max());
  std::fill(hi, hi + axes_, std::numeric_limits<std::int64_t>::min());
  return std::visit(
      [&](auto all) {
        bool any = false;
        for (std::int64_t t = 0; t < tokens_; ++t) {
          std::int64_t ap[kMaxAxes];
          for (std::int64_t a = 0; a < axes_; ++a)
            ap[a] = all[static_cast<std::size_t>(a * tokens_ + t)];
          if (table_row_of(ap, axes_, table_rows) != TableRow::kGathered) continue;
          any = true;
          for (std::int64_t a = 0; a < axes_; ++a) {
            lo[a] = std::min(lo[a], ap[a]);
            hi[a] = std::max(hi[a], ap[a]);
          }
        }
        return any;
      },
      positions_);
}

std::uint32_t CosSinRows::prefetched_axes() const {
  std::uint32_t mask = 0;
  for (std::size_t j = 0; j < span_count_; ++j) mask |= 1u << spans_[j].axis;
  return mask;
}

bool gather_prefetches_rows(std::int64_t lo, std::int64_t hi, std::int64_t pairs) {
  const std::int64_t row_bytes = 2 * pairs * static_cast<std::int64_t>(sizeof(float));
  if (lo > hi || row_bytes <= 0) return false;
  // hi - lo + 1 rows; in unsigned arithmetic, since positions may be any int64 and hi - lo may not
  // fit.
  const std::uint64_t spread = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
  return spread >= static_cast<std::uint64_t>(kCachedRowBytes / row_bytes);
}

// `precise` rows by each thread's CosSinStepper (thread_stepper), the other numerics by
// cos_sin_row_f32. Both give the same bits.
void CosSinRows::compute(std::span<const std::int64_t> ap, float* c, float* s) const {
  if (!step_) {
    if (ap.size() == 1) {
      cos_sin_row_f32(freqs_, ap[0], {c, n_}, {s, n_});
    } else {
      cos_sin_row_f32(freqs_, ap, {c, n_}, {s, n_});
    }
    return;
  }
  thread_stepper(freqs_).row(ap, c, s);
}

// Prefetches the table's entries [begin, end) of token u's row on `axis`, when u is a token and
// its position is in the table, for the multi-axis gather: without it each token waited on its
// rows' lines (in a profile of M-RoPE f16 with a table, the gather's stores, which wait on those
// loads, took 30% of apply_rope). On Zen 5, M-RoPE f16 with a table 1.07-1.12 -> 0.90-0.97 ms in
// five runs of six, bf16 1.11-1.20 -> 0.95-1.03 ms. One-axis rows, which the kernel reads in
// place, got slower with it (8 heads f16 186-195 -> 209-213 us): they go without.
void CosSinRows::prefetch_table_rows(std::int64_t u, std::size_t axis, std::int64_t begin,
                                     std::int64_t end) const {
  if (u >= tokens_) return;
  const std::int64_t p = position_at(positions_, static_cast<std::int64_t>(axis) * tokens_ + u);
  if (p < 0 || p >= table_->positions()) return;
  const auto bytes = static_cast<std::size_t>(end - begin) * sizeof(float);
  prefetch_range(reinterpret_cast<std::uintptr_t>(table_->cos_row(p).data() + begin), bytes);
  prefetch_range(reinterpret_cast<std::uintptr_t>(table_->sin_row(p).data() + begin), bytes);
}

bool CosSinRows::table_rows(std::int64_t t0, std::int64_t count, const float** c,
                            const float** s) const {
  if (!reads_table_rows()) return false;
  const std::int64_t rows = table_->positions();
  return std::visit(
      [&](auto span) {
        for (std::int64_t k = 0; k < count; ++k) {
          const auto p = static_cast<std::int64_t>(span[static_cast<std::size_t>(t0 + k)]);
          if (p < 0 || p >= rows) return false;
          c[k] = table_->cos_row(p).data();
          s[k] = table_->sin_row(p).data();
        }
        return true;
      },
      positions_);
}

Row CosSinRows::operator()(std::int64_t t, float* c, float* s) const {
  if (axes_ == 1) {
    const std::int64_t p = position_at(positions_, t);
    if (table_ && p >= 0 && p < table_->positions())
      return Row{table_->cos_row(p).data(), table_->sin_row(p).data()};
    compute(std::span<const std::int64_t>(&p, 1), c, s);
    return Row{c, s};
  }
  std::int64_t ap[kMaxAxes] = {};  // axes_ of them set (GCC cannot see that axes_ >= 1)
  axis_positions(positions_, axes_, tokens_, t, ap);
  const TableRow from =
      gather_table_ ? table_row_of(ap, axes_, table_->positions()) : TableRow::kComputed;
  if (from == TableRow::kComputed) {
    compute(std::span<const std::int64_t>(ap, static_cast<std::size_t>(axes_)), c, s);
    return Row{c, s};
  }
  // A text token's row is read in place like a one-axis row: the gather took about 45 ns a token
  // of 32 heads of 128 (f16, Zen 4; a profile put it and its prefetch at 12% of apply_rope).
  if (from == TableRow::kInPlace)
    return Row{table_->cos_row(ap[0]).data(), table_->sin_row(ap[0]).data()};
  const float* cr[kMaxAxes];
  const float* sr[kMaxAxes];
  for (std::int64_t a = 0; a < axes_; ++a) {
    cr[a] = table_->cos_row(ap[a]).data();
    sr[a] = table_->sin_row(ap[a]).data();
  }
  for (std::size_t j = 0; j < span_count_; ++j) {
    const Run& r = spans_[j];
    prefetch_table_rows(t + kRowPrefetchTokens, r.axis, static_cast<std::int64_t>(r.begin),
                        static_cast<std::int64_t>(r.end));
  }
  if (run_count_ == 0) {
    const std::uint8_t* slot_axis = freqs_.spec.axis_map.slot_axis.data();
    for (std::size_t i = 0; i < n_; ++i) {
      c[i] = cr[slot_axis[i]][i];
      s[i] = sr[slot_axis[i]][i];
    }
    return Row{c, s};
  }
  for (std::size_t j = 0; j < run_count_; ++j) {
    const Run& r = runs_[j];
    const float* rc = cr[r.axis];
    const float* rs = sr[r.axis];
    for (std::size_t i = r.begin; i < r.end; ++i) {
      c[i] = rc[i];
      s[i] = rs[i];
    }
  }
  return Row{c, s};
}

}  // namespace posenc::detail
