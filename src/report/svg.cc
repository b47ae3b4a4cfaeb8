// The SVG figure writer (svg.h): checks, series styles and render's layout. Layout is computed
// in px from estimated text widths (svg_text.cc); panels, colour bars and legends are drawn by
// svg_draw.cc.
#include "posenc/report/svg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "posenc/core/error.h"

#include "report/svg_internal.h"

namespace posenc::svg {
namespace {

using namespace detail;

void check(const Figure& figure) {
  if (figure.panels.empty()) throw Error("svg: figure \"" + figure.title + "\" has no panels");
  for (const Panel& p : figure.panels) {
    for (const Series& s : p.series) {
      if (s.x.size() != s.y.size()) {
        throw Error("svg: series \"" + s.name + "\" has " + std::to_string(s.x.size()) +
                    " x values and " + std::to_string(s.y.size()) + " y values");
      }
    }
    if (p.heatmap) {
      const Heatmap& h = *p.heatmap;
      if (h.rows <= 0 || h.cols <= 0 ||
          h.values.size() != static_cast<std::size_t>(h.rows * h.cols)) {
        throw Error("svg: heatmap has " + std::to_string(h.values.size()) +
                    " values; expected rows (" + std::to_string(h.rows) + ") * cols (" +
                    std::to_string(h.cols) + ")");
      }
      if (p.x.scale != Scale::kLinear || p.y.scale != Scale::kLinear) {
        throw Error("svg: a heatmap needs linear axes");
      }
      if (!(h.vmax > h.vmin)) throw Error("svg: heatmap vmax must be greater than vmin");
    }
  }
}

// Series colours (palette colours handed out in order of appearance, one per distinct name) and
// the legend: one entry per distinct name, in order of appearance.
struct Styles {
  std::vector<std::vector<std::string>> colors;  // [panel][series]
  std::vector<ResolvedSeries> legend;
};

Styles resolve_styles(const Figure& figure) {
  Styles st;
  std::map<std::string, std::string> color_of;
  std::size_t next_color = 0;
  auto resolve = [&](const Series& s) {
    if (!s.color.empty()) return s.color;
    if (!s.name.empty()) {
      auto it = color_of.find(s.name);
      if (it != color_of.end()) return it->second;
    }
    const std::string c = palette()[next_color++ % palette().size()];
    if (!s.name.empty()) color_of[s.name] = c;
    return c;
  };
  st.colors.resize(figure.panels.size());
  for (std::size_t p = 0; p < figure.panels.size(); ++p) {
    for (const Series& s : figure.panels[p].series) {
      const bool seen =
          std::any_of(st.legend.begin(), st.legend.end(),
                      [&](const ResolvedSeries& r) { return r.series->name == s.name; });
      st.colors[p].push_back(resolve(s));
      if (!s.name.empty() && !seen) st.legend.push_back({&s, st.colors[p].back()});
    }
  }
  return st;
}

ColorbarLayout colorbar_layout(const Heatmap& h) {
  ColorbarLayout c;
  c.ticks = linear_ticks(h.vmin, h.vmax, 5);
  const double step = c.ticks.size() >= 2 ? c.ticks[1] - c.ticks[0] : 0;
  double label_w = 0;
  for (double v : c.ticks) {
    c.labels.push_back(tick_label(v, Scale::kLinear, step));
    label_w = std::max(label_w, text_width(c.labels.back(), kTickFontSize));
  }
  c.width = kColorbarWidth + kTickLength + 4 + label_w + 8 + kFontSize + 4;
  return c;
}

}  // namespace

std::string render(const Figure& figure) {
  check(figure);
  const Styles styles = resolve_styles(figure);
  const Heatmap* colorbar = nullptr;
  for (const Panel& p : figure.panels) {
    if (p.heatmap && !colorbar) colorbar = &*p.heatmap;
  }

  // Right column: the colour bar and the legend; a wide legend (long names) goes under the plots
  // instead, so that the plots keep their width.
  double legend_width = 0;
  for (const auto& r : styles.legend) legend_width = std::max(legend_width, legend_entry_width(r));
  const ColorbarLayout bar = colorbar ? colorbar_layout(*colorbar) : ColorbarLayout{};
  const bool legend_below = legend_width > 0.3 * figure.width;
  const double right_width = std::max(legend_below ? 0.0 : legend_width, bar.width);
  const double right_column = right_width > 0 ? right_width + 2 * kPad : kPad;

  // Title and caption.
  Writer head;
  const double inner = figure.width - 2 * kPad;
  double y = kPad;
  for (const auto& line : wrap(figure.title, inner, kTitleSize)) {
    y += kTitleSize + 4;
    head.text(kPad, y - 4, line, kTitleSize, "start", "font-weight=\"bold\" fill=\"#111111\"");
  }
  for (const auto& line : wrap(figure.caption, inner, kFontSize)) {
    y += kFontSize + 4;
    head.text(kPad, y - 3, line, kFontSize, "start", "fill=\"#444444\"");
  }
  y += 10;

  // Panels: each gets an equal share of the width left of the right column.
  const bool any_panel_title = std::any_of(figure.panels.begin(), figure.panels.end(),
                                           [](const Panel& p) { return !p.title.empty(); });
  const double panel_width =
      (figure.width - kPad - right_column) / static_cast<double>(figure.panels.size());
  const double plot_top = y + (any_panel_title ? kFontSize + 10 : 0);
  const double bottom_margin = kTickLength + 4 + kTickFontSize + 8 + kFontSize + 6;
  std::string body;
  for (std::size_t pi = 0; pi < figure.panels.size(); ++pi) {
    const PanelSlot slot{kPad + panel_width * static_cast<double>(pi), panel_width, plot_top,
                         figure.plot_height, bottom_margin};
    body += draw_panel(figure.panels[pi], styles.colors[pi], slot);
  }

  const double column_left = figure.width - right_column + kPad;
  double column_y = plot_top;
  if (colorbar) {
    body += draw_colorbar(*colorbar, bar, column_left, column_y, figure.plot_height);
    column_y += figure.plot_height + 16;
  }
  double bottom = plot_top + figure.plot_height + bottom_margin;
  if (!styles.legend.empty()) {
    if (legend_below) {
      bottom = draw_legend(body, styles.legend, kPad + 8, bottom + 2, figure.width - 2 * kPad - 8);
    } else {
      column_y = draw_legend(body, styles.legend, column_left, column_y, 0);
    }
  }

  const double height = std::ceil(std::max(bottom, column_y) + kPad);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
                    fixed(figure.width) + " " + fixed(height) + "\" width=\"" +
                    fixed(figure.width) + "\" height=\"" + fixed(height) + "\" font-family=\"" +
                    kFontFamily + "\" role=\"img\">\n";
  svg += "<title>" + xml_escape(figure.title) + "</title>\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + fixed(figure.width) + "\" height=\"" + fixed(height) +
         "\" fill=\"#ffffff\"/>\n";
  svg += head.out() + body + "</svg>\n";
  return svg;
}

}  // namespace posenc::svg
