// Per-pair rows (pairs.h).
#include "posenc/analysis/pairs.h"

#include <numbers>

namespace posenc {

std::vector<PairRow> pair_rows(const Frequencies& f, double context) {
  std::vector<PairRow> rows;
  rows.reserve(static_cast<std::size_t>(f.pair_count()));
  for (std::int64_t i = 0; i < f.pair_count(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    PairRow row;
    row.index = i;
    row.inv_freq = f.inv_freq[k];
    row.weight = f.interpolation_weight[k];
    row.treatment = pair_treatment(f, i);
    row.axis = axis_name(f.spec.axis_map, slot_axis(f.spec.axis_map, i));
    const double w0 = f.unscaled_inv_freq[k];
    if (row.inv_freq > 0) row.wavelength = 2.0 * std::numbers::pi / row.inv_freq;
    // The YaRN paper's r(d) = L / lambda_d is taken over the unscaled wavelength: it is what
    // decides how each method treats the pair.
    if (w0 > 0 && context > 0) row.rotations = context * w0 / (2.0 * std::numbers::pi);
    if (w0 > 0) row.ratio = row.inv_freq / w0;
    rows.push_back(row);
  }
  return rows;
}

std::vector<PairRow> pair_rows(const Frequencies& f) {
  return pair_rows(f, static_cast<double>(context_lengths(f.spec).original));
}

}  // namespace posenc
