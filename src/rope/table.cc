// CosSinTable and the on-the-fly row: cos/sin in the Frequencies' convention, rounded once.
#include "posenc/rope/table.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "rope/cos_sin_fast.h"

namespace posenc {

namespace {

// cos_sin_at's doubles rounded once to float32, through stack rows for the common head dims.
// `at` fills the double rows (one position, or one per axis).
template <typename At>
void rounded_row(const Frequencies& freqs, std::span<float> cos_out, std::span<float> sin_out,
                 const At& at) {
  const std::size_t n = freqs.inv_freq.size();
  if (cos_out.size() < n || sin_out.size() < n) {
    throw Error("cos_sin_row_f32: output spans must hold pair_count (" + std::to_string(n) +
                ") entries");
  }
  constexpr std::size_t kStack = 256;
  double c_stack[kStack], s_stack[kStack];
  std::vector<double> heap(n > kStack ? 2 * n : 0);
  double* c = n > kStack ? heap.data() : c_stack;
  double* s = n > kStack ? heap.data() + n : s_stack;
  at(std::span<double>(c, n), std::span<double>(s, n));
  for (std::size_t i = 0; i < n; ++i) {
    cos_out[i] = static_cast<float>(c[i]);
    sin_out[i] = static_cast<float>(s[i]);
  }
}

}  // namespace

void cos_sin_row_f32(const Frequencies& freqs, std::int64_t position, std::span<float> cos_out,
                     std::span<float> sin_out) {
  rounded_row(freqs, cos_out, sin_out,
              [&](std::span<double> c, std::span<double> s) { cos_sin_at(freqs, position, c, s); });
}

void cos_sin_row_f32(const Frequencies& freqs, std::span<const std::int64_t> axis_positions,
                     std::span<float> cos_out, std::span<float> sin_out) {
  rounded_row(freqs, cos_out, sin_out, [&](std::span<double> c, std::span<double> s) {
    cos_sin_at(freqs, axis_positions, c, s);
  });
}

CosSinTable::CosSinTable(const Frequencies& freqs, std::int64_t positions)
    : freqs_(freqs), positions_(positions), pairs_(freqs.pair_count()) {
  if (positions < 0)
    throw Error("CosSinTable: positions (" + std::to_string(positions) + ") must not be negative");
  constexpr std::int64_t kMaxEntries = std::int64_t{1} << 34;  // 64 GiB per array: surely a mistake
  if (pairs_ > 0 && positions > kMaxEntries / pairs_) {
    throw Error("CosSinTable: positions (" + std::to_string(positions) + ") x pairs (" +
                std::to_string(pairs_) + ") is too large a table");
  }
  const auto n = static_cast<std::size_t>(pairs_);
  cos_.resize(static_cast<std::size_t>(positions) * n);
  sin_.resize(cos_.size());
  if (!detail::CosSinStepper::applies(freqs_)) {
    for (std::int64_t p = 0; p < positions; ++p) {
      const auto at = static_cast<std::size_t>(p) * n;
      cos_sin_row_f32(freqs_, p, {cos_.data() + at, n}, {sin_.data() + at, n});
    }
    return;
  }
  // Consecutive positions: `precise` rows by the stepper (the same bits, far fewer exact calls),
  // in blocks stepped in one kernel call each. Row p holds position p on every axis of the map.
  detail::CosSinStepper stepper(freqs_);
  const auto axes = static_cast<std::size_t>(std::max<std::int64_t>(1, axis_count(freqs_.spec)));
  constexpr std::int64_t kBlock = 64;
  std::vector<std::int64_t> block(axes * kBlock);
  for (std::int64_t p0 = 0; p0 < positions; p0 += kBlock) {
    const std::int64_t m = std::min(kBlock, positions - p0);
    for (std::size_t a = 0; a < axes; ++a) {
      for (std::int64_t k = 0; k < m; ++k)
        block[a * static_cast<std::size_t>(m) + static_cast<std::size_t>(k)] = p0 + k;
    }
    const auto at = static_cast<std::size_t>(p0) * n;
    stepper.rows_by_axis(block.data(), m, cos_.data() + at, sin_.data() + at,
                         static_cast<std::int64_t>(n));
  }
}

}  // namespace posenc
