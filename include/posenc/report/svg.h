// posenc/report/svg.h: a small SVG figure writer for posenc's plots and HTML report.
//
// A Figure is a title, an optional caption, and one or more Panels side by side. Each panel has
// two axes (linear or log, with "nice" ticks), line series, reference lines and optionally a
// heatmap; the figure's right column holds the legend (one entry per named series, shared by the
// panels) and, for heatmaps, a colour bar.
//
//   ┌──────────────────── title ─────────────────────────┐
//   │ caption                                            │
//   │ ┌ panel title ┐  ┌ panel title ┐   ── legend      │
//   │ │   plot      │  │   plot      │   ▇ colour bar   │
//   │ └─────────────┘  └─────────────┘                  │
//   │  x label          x label                          │
//   └────────────────────────────────────────────────────┘
//
// The output is one self-contained <svg> element (no ids, no external references, no scripts):
// a viewBox plus explicit width and height, so it scales inside HTML (max-width: 100%) and in
// print. Every number is written in fixed notation with a "." decimal point whatever the locale;
// every text is XML-escaped. Lines are clipped to the plot area in code rather than with
// clipPath, so several figures can live in one HTML page without id clashes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::svg {

enum class Scale { kLinear, kLog };

struct Axis {
  std::string label;
  Scale scale = Scale::kLinear;
  std::optional<double> min;  // unset: from the data (linear: widened to nice ticks)
  std::optional<double> max;
  bool reverse = false;  // x: max on the left; y: max at the bottom
};

struct Series {
  std::string name;       // legend entry; empty: not listed
  std::vector<double> x;  // same length as y; a non-finite value (or <= 0 on a log axis)
  std::vector<double> y;  // breaks the line
  std::string color;      // "#rrggbb"; empty: the next colour of the palette
  std::string dash;       // stroke-dasharray ("6 3"); empty: solid
  double width = 2.0;     // stroke width in px
  bool line = true;       // draw the polyline
  bool markers = false;   // a dot at each point
  double marker_radius = 2.5;
};

struct ReferenceLine {
  bool vertical = true;  // vertical: at x = value; horizontal: at y = value
  double value = 0.0;
  std::string label;  // drawn beside the line, inside the plot
  std::string color = "#444444";
  std::string dash = "6 4";
};

enum class Colormap {
  kViridis,    // perceptually uniform, dark blue (low) to yellow (high)
  kDiverging,  // blue (low) - white (middle) - red (high), for data centred on 0 such as [-1, 1]
};

// Cell (r, c) of a rows x cols grid covers x in [x0 + c dx, x0 + (c+1) dx] and y in
// [y0 + r dy, y0 + (r+1) dy] in data coordinates.
struct Heatmap {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> values;  // row-major [rows, cols]
  double x0 = 0.0, dx = 1.0, y0 = 0.0, dy = 1.0;
  double vmin = 0.0, vmax = 1.0;  // colour bar range; values outside are clamped
  Colormap colormap = Colormap::kViridis;
  std::string colorbar_label;
  int levels = 64;  // colours are quantised to this many steps (file size; invisible at 64)
};

struct Panel {
  std::string title;  // above the plot area; may be empty
  Axis x;
  Axis y;
  std::vector<Series> series;
  std::vector<ReferenceLine> references;
  std::optional<Heatmap> heatmap;  // drawn under the series
};

struct Figure {
  std::string title;
  std::string caption;         // one or more lines under the title, wrapped to the width
  double width = 760.0;        // px
  double plot_height = 340.0;  // height of each panel's plot area, px
  std::vector<Panel> panels;   // side by side
};

// The figure as one <svg> element. Throws posenc::Error when a series' x and y differ in length,
// a heatmap's values do not hold rows * cols entries, or there are no panels.
std::string render(const Figure& figure);

// --- building blocks, public for tests and for the HTML report ---

// Escapes & < > " ' as the five predefined XML entities; drops control characters XML 1.0 does
// not allow.
std::string xml_escape(std::string_view text);

// Fixed notation with `decimals` digits after the point, trailing zeros removed ("12.5", "3",
// "-0.25"); "-0" is written "0". Locale-independent.
std::string fixed(double value, int decimals = 2);

// Ticks of a linear axis: multiples of 1, 2 or 5 x 10^k, about `target` of them, inside [lo, hi].
std::vector<double> linear_ticks(double lo, double hi, int target = 6);

// lo and hi widened outwards to the nearest tick of linear_ticks' step.
std::array<double, 2> nice_range(double lo, double hi, int target = 6);

// Ticks of a log axis inside [lo, hi] (lo > 0): powers of 10, with 2x and 5x multiples when the
// range spans fewer than three decades, and every k x 10^j when it spans less than one.
std::vector<double> log_ticks(double lo, double hi);

// Tick label: linear ticks with the decimals their step needs; log ticks as plain numbers from
// 0.01 to 1000 and as 10^k (with superscript digits) beyond: 1000, 10⁴, 10⁵.
std::string tick_label(double value, Scale scale, double step = 0.0);

// The colour of t in [0, 1] (clamped), as "#rrggbb".
std::string color_at(Colormap map, double t);

// The line palette (10 colours that stay apart for common colour-vision deficiencies).
const std::vector<std::string>& palette();

}  // namespace posenc::svg
