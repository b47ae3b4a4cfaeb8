// CosSinTable and the on-the-fly row: cos/sin in the Frequencies' convention, rounded once.
#include "posenc/rope/table.h"

#include <string>
#include <vector>

#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"

namespace posenc {

void cos_sin_row_f32(const Frequencies& freqs, std::int64_t position, std::span<float> cos_out,
                     std::span<float> sin_out) {
  const std::size_t n = freqs.inv_freq.size();
  if (cos_out.size() < n || sin_out.size() < n) {
    throw Error("cos_sin_row_f32: output spans must hold pair_count (" + std::to_string(n) +
                ") entries");
  }
  // Stack buffers for the common head dims; the double values round once to float32 below.
  constexpr std::size_t kStack = 256;
  double c_stack[kStack], s_stack[kStack];
  std::vector<double> c_heap, s_heap;
  double* c = c_stack;
  double* s = s_stack;
  if (n > kStack) {
    c_heap.resize(n);
    s_heap.resize(n);
    c = c_heap.data();
    s = s_heap.data();
  }
  cos_sin_at(freqs, position, {c, n}, {s, n});
  for (std::size_t i = 0; i < n; ++i) {
    cos_out[i] = static_cast<float>(c[i]);
    sin_out[i] = static_cast<float>(s[i]);
  }
}

void cos_sin_row_f32(const Frequencies& freqs, std::span<const std::int64_t> axis_positions,
                     std::span<float> cos_out, std::span<float> sin_out) {
  const std::size_t n = freqs.inv_freq.size();
  if (cos_out.size() < n || sin_out.size() < n) {
    throw Error("cos_sin_row_f32: output spans must hold pair_count (" + std::to_string(n) +
                ") entries");
  }
  constexpr std::size_t kStack = 256;
  double c_stack[kStack], s_stack[kStack];
  std::vector<double> c_heap, s_heap;
  double* c = c_stack;
  double* s = s_stack;
  if (n > kStack) {
    c_heap.resize(n);
    s_heap.resize(n);
    c = c_heap.data();
    s = s_heap.data();
  }
  cos_sin_at(freqs, axis_positions, {c, n}, {s, n});
  for (std::size_t i = 0; i < n; ++i) {
    cos_out[i] = static_cast<float>(c[i]);
    sin_out[i] = static_cast<float>(s[i]);
  }
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
  for (std::int64_t p = 0; p < positions; ++p) {
    const auto at = static_cast<std::size_t>(p) * n;
    cos_sin_row_f32(freqs_, p, {cos_.data() + at, n}, {sin_.data() + at, n});
  }
}

}  // namespace posenc
