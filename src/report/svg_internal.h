// src/report/svg_internal.h: what the SVG writer's files share: text metrics (svg_text.cc), the
// drawing of panels, colour bars and legends (svg_draw.cc), and render's layout (svg.cc).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "posenc/report/svg.h"

namespace posenc::svg::detail {

inline constexpr double kPad = 12.0;           // outer margin
inline constexpr double kTitleSize = 16.0;     // figure title font size
inline constexpr double kFontSize = 12.0;      // labels, legend, caption
inline constexpr double kTickFontSize = 11.0;  // tick labels
inline constexpr double kCharWidth =
    0.56;  // average glyph width in em: DejaVu Sans measures 0.5 to
           // 0.53 on our labels; Arial and Helvetica are narrower
inline constexpr double kTickLength = 5.0;
inline constexpr double kLegendRow = 18.0;
inline constexpr double kLegendSample = 28.0;  // length of the line sample in a legend entry
inline constexpr double kColorbarWidth = 16.0;
inline constexpr const char* kFontFamily = "DejaVu Sans, Helvetica, Arial, sans-serif";

// UTF-8 code points, the estimated width in px of `s` at `font_size`, and a greedy word wrap
// to `width` px (explicit '\n' starts a new line).
std::size_t code_points(std::string_view s);
double text_width(std::string_view s, double font_size);
std::vector<std::string> wrap(std::string_view text, double width, double font_size);

// --- the output buffer ---

class Writer {
 public:
  std::string& out() { return out_; }
  void text(double x, double y, std::string_view s, double size, std::string_view anchor = "start",
            std::string_view extra = "") {
    out_ += "<text x=\"" + fixed(x) + "\" y=\"" + fixed(y) + "\" font-size=\"" + fixed(size) + "\"";
    if (anchor != "start") out_ += " text-anchor=\"" + std::string(anchor) + "\"";
    if (!extra.empty()) out_ += " " + std::string(extra);
    out_ += ">" + xml_escape(s) + "</text>\n";
  }
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
            std::string_view dash = "") {
    out_ += "<line x1=\"" + fixed(x1) + "\" y1=\"" + fixed(y1) + "\" x2=\"" + fixed(x2) +
            "\" y2=\"" + fixed(y2) + "\" stroke=\"" + std::string(stroke) + "\" stroke-width=\"" +
            fixed(width) + "\"";
    if (!dash.empty()) out_ += " stroke-dasharray=\"" + std::string(dash) + "\"";
    out_ += "/>\n";
  }
  void rect(double x, double y, double w, double h, std::string_view fill,
            std::string_view extra = "") {
    out_ += "<rect x=\"" + fixed(x) + "\" y=\"" + fixed(y) + "\" width=\"" + fixed(w) +
            "\" height=\"" + fixed(h) + "\" fill=\"" + std::string(fill) + "\"";
    if (!extra.empty()) out_ += " " + std::string(extra);
    out_ += "/>\n";
  }

 private:
  std::string out_;
};

// The style of each named series, with palette colours handed out in order of appearance.
struct ResolvedSeries {
  const Series* series;
  std::string color;
};

struct ColorbarLayout {
  std::vector<double> ticks;
  std::vector<std::string> labels;
  double width = 0;  // bar, ticks, labels and the rotated caption
};

// Where a panel goes: its share of the figure's width and the plot area's top and height.
struct PanelSlot {
  double left, width, plot_top, plot_height, bottom_margin;
};

// One panel (axes, grid, heatmap, series, reference lines, title) in its slot.
std::string draw_panel(const Panel& p, const std::vector<std::string>& colors,
                       const PanelSlot& slot);

// The colour bar: 64 steps from vmin (bottom) to vmax (top), ticks, and the rotated caption.
std::string draw_colorbar(const Heatmap& h, const ColorbarLayout& c, double left, double top,
                          double height);

double legend_entry_width(const ResolvedSeries& r);

// The legend, as a column from (left, top) or, when `flow_width` > 0, as rows that wrap at
// left + flow_width. Returns the y below the last entry.
double draw_legend(std::string& out, const std::vector<ResolvedSeries>& legend, double left,
                   double top, double flow_width);

}  // namespace posenc::svg::detail
