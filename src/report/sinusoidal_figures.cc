// The sinusoidal encoding's figures of figures.h (the encoding and its dot-product similarity),
// drawn with svg.h from sinusoidal_table, so a figure shows what posenc computes.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/core/sinusoidal.h"
#include "posenc/report/figures.h"
#include "posenc/report/svg.h"
#include "util/format.h"

namespace posenc::figures {
namespace {

using detail::num;

void check_sinusoidal(const SinusoidalSpec& spec, std::int64_t positions) {
  validate(spec);
  if (positions < 1 || positions > kMaxFigurePositions) {
    throw Error("figure: positions (" + std::to_string(positions) + ") must be in [1, " +
                std::to_string(kMaxFigurePositions) + "]");
  }
  if (spec.d_model > kMaxFigureCells / positions) {  // positions * d_model, without overflow
    throw Error("figure: positions * d_model (" + std::to_string(positions) + " * " +
                std::to_string(spec.d_model) + ") must not exceed " +
                std::to_string(kMaxFigureCells) + " cells");
  }
}

// The similarity heatmap has positions x positions cells.
void check_similarity(const SinusoidalSpec& spec, std::int64_t positions) {
  check_sinusoidal(spec, positions);
  if (positions > kMaxSimilarityPositions) {
    throw Error("similarity figure: positions (" + std::to_string(positions) +
                ") must be at most " + std::to_string(kMaxSimilarityPositions) +
                ": the heatmap has positions² cells, at most " + std::to_string(kMaxFigureCells));
  }
}

}  // namespace

std::string sinusoidal_figure(const SinusoidalSpec& spec, std::int64_t positions) {
  check_sinusoidal(spec, positions);
  svg::Heatmap h;
  h.rows = positions;
  h.cols = spec.d_model;
  h.values = sinusoidal_table(spec, positions);
  h.x0 = -0.5;
  h.y0 = -0.5;
  h.vmin = -1;
  h.vmax = 1;
  h.colormap = svg::Colormap::kDiverging;
  h.colorbar_label = "PE(p, j)";
  const bool interleaved = spec.layout == SinusoidalLayout::kInterleaved;
  svg::Panel p;
  p.x.label = interleaved ? "dimension j (even j: sin, odd j: cos)"
                          : "dimension j (j < d/2: sin, j ≥ d/2: cos)";
  p.y.label = "position p";
  p.y.reverse = true;  // position 0 at the top, as the seed draws it
  p.heatmap = std::move(h);
  svg::Figure f;
  f.title = std::string(kSinusoidalTitle) + ": " + std::to_string(positions) + " positions × " +
            std::to_string(spec.d_model) + " dims";
  f.caption = (interleaved ? std::string("PE(p, 2k) = sin(p·ω_k), PE(p, 2k+1) = cos(p·ω_k)")
                           : std::string("PE(p, k) = sin(p·ω_k), PE(p, d/2+k) = cos(p·ω_k)")) +
              ", ω_k = " + num(spec.base) + "^(−2k/" + std::to_string(spec.d_model) +
              "). Low dimensions turn fast (wavelength 2π ≈ 6.3 positions); high dimensions barely "
              "move over " +
              std::to_string(positions) +
              " positions, so their sines stay near 0 and cosines near 1.";
  f.panels.push_back(std::move(p));
  return svg::render(f);
}

std::string similarity_figure(const SinusoidalSpec& spec, std::int64_t positions) {
  check_similarity(spec, positions);
  const std::vector<double> table = sinusoidal_table(spec, positions);
  const auto n = static_cast<std::size_t>(positions), d = static_cast<std::size_t>(spec.d_model);
  svg::Heatmap h;
  h.rows = positions;
  h.cols = positions;
  h.values.resize(n * n);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      double dot = 0;
      for (std::size_t j = 0; j < d; ++j) dot += table[a * d + j] * table[b * d + j];
      h.values[a * n + b] = dot;
      lo = std::min(lo, dot);
      hi = std::max(hi, dot);
    }
  }
  h.x0 = -0.5;
  h.y0 = -0.5;
  // |PE(p)|^2 = d/2 (one sin^2 + cos^2 per frequency): the diagonal, and the top of the scale.
  h.vmax = static_cast<double>(spec.d_model) / 2;
  h.vmin = std::min(svg::nice_range(lo, h.vmax, 5)[0], h.vmax - 1);
  h.colormap = svg::Colormap::kViridis;
  h.colorbar_label = "PE(p) · PE(q)";
  svg::Panel p;
  p.x.label = "position q";
  p.y.label = "position p";
  p.y.reverse = true;
  p.heatmap = std::move(h);
  svg::Figure f;
  f.title = std::string(kSimilarityTitle) + ": PE(p)·PE(q), " + std::to_string(positions) +
            " positions, d = " + std::to_string(spec.d_model);
  f.width = 700;
  f.plot_height = 420;
  f.caption =
      "PE(p)·PE(q) = Σ_k cos((p − q)·ω_k) depends only on p − q: every diagonal is constant. "
      "It is d/2 = " +
      std::to_string(spec.d_model / 2) +
      " on the diagonal and falls off, in waves, with distance "
      "(minimum " +
      svg::fixed(lo, 1) + " here): neighbouring positions are the most alike.";
  f.panels.push_back(std::move(p));
  return svg::render(f);
}

}  // namespace posenc::figures
