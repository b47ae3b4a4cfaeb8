// Drawing for the SVG writer (svg_internal.h): axis ranges and ticks, series paths, heatmaps,
// panels, the colour bar and the legend.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "report/svg_internal.h"

namespace posenc::svg::detail {
namespace {

// --- data ranges and coordinate mapping ---

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v, Scale scale) {
    if (!std::isfinite(v) || (scale == Scale::kLog && v <= 0)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

struct Mapper {
  Scale scale = Scale::kLinear;
  double lo = 0, hi = 1;  // data range
  double p0 = 0, p1 = 1;  // pixel range: lo maps to p0, hi to p1
  double t(double v) const {
    if (scale == Scale::kLog) return (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo));
    return (v - lo) / (hi - lo);
  }
  bool valid(double v) const { return std::isfinite(v) && (scale == Scale::kLinear || v > 0); }
  double operator()(double v) const { return p0 + t(v) * (p1 - p0); }
};

Range resolve_range(const Axis& axis, Range data, bool exact) {
  if (data.empty()) data = axis.scale == Scale::kLog ? Range{1, 10} : Range{0, 1};
  if (axis.min) data.lo = *axis.min;
  if (axis.max) data.hi = *axis.max;
  if (data.lo == data.hi) {
    if (axis.scale == Scale::kLog) {
      data.lo /= 10;
      data.hi *= 10;
    } else {
      const double d = data.lo == 0 ? 1.0 : std::abs(data.lo) * 0.1;
      data.lo -= d;
      data.hi += d;
    }
  }
  if (data.lo > data.hi) std::swap(data.lo, data.hi);
  if (!exact) {
    if (axis.scale == Scale::kLinear) {
      const auto r = nice_range(data.lo, data.hi);
      if (!axis.min) data.lo = r[0];
      if (!axis.max) data.hi = r[1];
    } else if (std::log10(data.hi / data.lo) >= 1.0) {
      if (!axis.min) data.lo = std::pow(10.0, std::floor(std::log10(data.lo) + 1e-9));
      if (!axis.max) data.hi = std::pow(10.0, std::ceil(std::log10(data.hi) - 1e-9));
    }
  }
  return data;
}

// Liang-Barsky: clips the segment to [x0, x1] x [y0, y1]; false when nothing is left.
bool clip_segment(double& ax, double& ay, double& bx, double& by, double x0, double y0, double x1,
                  double y1) {
  double t0 = 0, t1 = 1;
  const double dx = bx - ax, dy = by - ay;
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {ax - x0, x1 - ax, ay - y0, y1 - ay};
  for (int k = 0; k < 4; ++k) {
    if (p[k] == 0) {
      if (q[k] < 0) return false;
    } else {
      const double r = q[k] / p[k];
      if (p[k] < 0) {
        t0 = std::max(t0, r);
      } else {
        t1 = std::min(t1, r);
      }
      if (t0 > t1) return false;
    }
  }
  const double sx = ax + t0 * dx, sy = ay + t0 * dy;
  bx = ax + t1 * dx;
  by = ay + t1 * dy;
  ax = sx;
  ay = sy;
  return true;
}

struct PlotBox {
  double left, top, width, height;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

std::string path_of_series(const Series& s, const Mapper& mx, const Mapper& my,
                           const PlotBox& box) {
  std::string d;
  bool have_prev = false;
  double px = 0, py = 0;
  double end_x = std::numeric_limits<double>::quiet_NaN(), end_y = end_x;  // where the path pen is
  for (std::size_t k = 0; k < s.x.size(); ++k) {
    if (!mx.valid(s.x[k]) || !my.valid(s.y[k])) {
      have_prev = false;
      continue;
    }
    const double qx = mx(s.x[k]), qy = my(s.y[k]);
    if (have_prev) {
      double ax = px, ay = py, bx = qx, by = qy;
      if (clip_segment(ax, ay, bx, by, box.left, box.top, box.right(), box.bottom())) {
        if (!(ax == end_x && ay == end_y)) d += "M" + fixed(ax) + " " + fixed(ay);
        d += "L" + fixed(bx) + " " + fixed(by);
        end_x = bx;
        end_y = by;
        // A clipped end leaves the pen away from the next segment's start: move there next time.
        if (bx != qx || by != qy) end_x = std::numeric_limits<double>::quiet_NaN();
      }
    }
    px = qx;
    py = qy;
    have_prev = true;
  }
  return d;
}

// Heatmap cells, one path per quantised colour, in cell units under a transform. Runs of equal
// colour along rows or along columns (whichever is shorter) merge into one rectangle.
void draw_heatmap(Writer& w, const Heatmap& h, const Mapper& mx, const Mapper& my) {
  const auto rows = static_cast<std::size_t>(h.rows), cols = static_cast<std::size_t>(h.cols);
  const int levels = std::max(2, h.levels);
  std::vector<int> level(rows * cols);
  for (std::size_t k = 0; k < level.size(); ++k) {
    double t = (h.values[k] - h.vmin) / (h.vmax - h.vmin);
    if (!std::isfinite(t)) t = 0.5;
    level[k] = std::clamp(static_cast<int>(std::floor(t * levels)), 0, levels - 1);
  }
  auto build = [&](bool along_rows) {
    std::vector<std::string> paths(static_cast<std::size_t>(levels));
    const std::size_t outer = along_rows ? rows : cols, inner = along_rows ? cols : rows;
    for (std::size_t a = 0; a < outer; ++a) {
      std::size_t b = 0;
      while (b < inner) {
        auto at = [&](std::size_t j) {
          return along_rows ? level[a * cols + j] : level[j * cols + a];
        };
        const int lv = at(b);
        std::size_t e = b + 1;
        while (e < inner && at(e) == lv) ++e;
        const std::string run = std::to_string(e - b);
        std::string& p = paths[static_cast<std::size_t>(lv)];
        if (along_rows) {
          p += "M" + std::to_string(b) + " " + std::to_string(a) + "h" + run + "v1h-" + run + "z";
        } else {
          p += "M" + std::to_string(a) + " " + std::to_string(b) + "v" + run + "h1v-" + run + "z";
        }
        b = e;
      }
    }
    return paths;
  };
  auto by_rows = build(true), by_cols = build(false);
  std::size_t size_rows = 0, size_cols = 0;
  for (const auto& p : by_rows) size_rows += p.size();
  for (const auto& p : by_cols) size_cols += p.size();
  const auto& paths = size_rows <= size_cols ? by_rows : by_cols;
  // Cell (c, r) in units maps to data (x0 + c dx, y0 + r dy), then to px (both scales linear).
  const double sx = mx(h.x0 + h.dx) - mx(h.x0), tx = mx(h.x0);
  const double sy = my(h.y0 + h.dy) - my(h.y0), ty = my(h.y0);
  w.out() += "<g transform=\"matrix(" + fixed(sx, 6) + " 0 0 " + fixed(sy, 6) + " " + fixed(tx, 3) +
             " " + fixed(ty, 3) + ")\" shape-rendering=\"crispEdges\">\n";
  for (std::size_t lv = 0; lv < paths.size(); ++lv) {
    if (paths[lv].empty()) continue;
    const double t = (static_cast<double>(lv) + 0.5) / levels;
    w.out() += "<path fill=\"" + color_at(h.colormap, t) + "\" d=\"" + paths[lv] + "\"/>\n";
  }
  w.out() += "</g>\n";
}

struct AxisTicks {
  std::vector<double> major;
  std::vector<double> minor;  // log axes: unlabelled k x 10^j
  double step = 0;            // linear
};

AxisTicks ticks_for(Scale scale, double lo, double hi, double length_px) {
  AxisTicks t;
  if (scale == Scale::kLinear) {
    const int target = std::max(4, static_cast<int>(length_px / 70.0));
    t.major = linear_ticks(lo, hi, target);
    t.step = t.major.size() >= 2 ? t.major[1] - t.major[0] : 0;
  } else {
    t.major = log_ticks(lo, hi);
    if (std::log10(hi / lo) >= 3) {
      for (int e = static_cast<int>(std::floor(std::log10(lo)));
           e <= static_cast<int>(std::ceil(std::log10(hi))); ++e) {
        for (int k = 2; k <= 9; ++k) {
          const double v = k * std::pow(10.0, e);
          if (v >= lo && v <= hi) t.minor.push_back(v);
        }
      }
    }
  }
  return t;
}

double max_label_width(const AxisTicks& t, Scale scale) {
  double w = 0;
  for (double v : t.major) w = std::max(w, text_width(tick_label(v, scale, t.step), kTickFontSize));
  return w;
}

// Data ranges of a panel: series, reference lines and heatmap extents, then the axes' settings.
void panel_ranges(const Panel& p, Range& xr, Range& yr) {
  for (const Series& s : p.series) {
    for (std::size_t k = 0; k < s.x.size(); ++k) {
      if (!std::isfinite(s.x[k]) || !std::isfinite(s.y[k])) continue;
      if ((p.x.scale == Scale::kLog && s.x[k] <= 0) || (p.y.scale == Scale::kLog && s.y[k] <= 0))
        continue;
      xr.add(s.x[k], p.x.scale);
      yr.add(s.y[k], p.y.scale);
    }
  }
  for (const ReferenceLine& r : p.references)
    (r.vertical ? xr : yr).add(r.value, r.vertical ? p.x.scale : p.y.scale);
  if (p.heatmap) {
    const Heatmap& h = *p.heatmap;
    xr.add(h.x0, p.x.scale);
    xr.add(h.x0 + static_cast<double>(h.cols) * h.dx, p.x.scale);
    yr.add(h.y0, p.y.scale);
    yr.add(h.y0 + static_cast<double>(h.rows) * h.dy, p.y.scale);
  }
  const bool exact = p.heatmap.has_value();  // a heatmap fills its plot edge to edge
  xr = resolve_range(p.x, xr, exact);
  yr = resolve_range(p.y, yr, exact);
}

}  // namespace

std::string draw_panel(const Panel& p, const std::vector<std::string>& colors,
                       const PanelSlot& slot) {
  Range xr, yr;
  panel_ranges(p, xr, yr);
  const AxisTicks yt = ticks_for(p.y.scale, yr.lo, yr.hi, slot.plot_height);
  const double left_margin = 6 + kFontSize + 8 + max_label_width(yt, p.y.scale) + kTickLength + 4;
  const PlotBox box{slot.left + left_margin, slot.plot_top, slot.width - left_margin - 14,
                    slot.plot_height};
  const AxisTicks xt = ticks_for(p.x.scale, xr.lo, xr.hi, box.width);
  Mapper mx{p.x.scale, xr.lo, xr.hi, box.left, box.right()};
  Mapper my{p.y.scale, yr.lo, yr.hi, box.bottom(), box.top};
  if (p.x.reverse) std::swap(mx.p0, mx.p1);
  if (p.y.reverse) std::swap(my.p0, my.p1);
  auto inside_x = [&](double px) { return px >= box.left - 0.5 && px <= box.right() + 0.5; };
  auto inside_y = [&](double py) { return py >= box.top - 0.5 && py <= box.bottom() + 0.5; };

  Writer pw;
  pw.rect(box.left, box.top, box.width, box.height, "#ffffff");
  if (!p.heatmap) {  // grid
    for (double v : xt.major) pw.line(mx(v), box.top, mx(v), box.bottom(), "#e5e5e5", 1);
    for (double v : yt.major) pw.line(box.left, my(v), box.right(), my(v), "#e5e5e5", 1);
  } else {
    draw_heatmap(pw, *p.heatmap, mx, my);
  }
  for (const ReferenceLine& r : p.references) {
    if (!(r.vertical ? mx.valid(r.value) : my.valid(r.value))) continue;
    const double at = r.vertical ? mx(r.value) : my(r.value);
    if (r.vertical && inside_x(at)) pw.line(at, box.top, at, box.bottom(), r.color, 1.3, r.dash);
    if (!r.vertical && inside_y(at)) pw.line(box.left, at, box.right(), at, r.color, 1.3, r.dash);
  }
  for (std::size_t si = 0; si < p.series.size(); ++si) {
    const Series& s = p.series[si];
    const std::string& color = colors[si];
    if (s.line) {
      const std::string d = path_of_series(s, mx, my, box);
      if (!d.empty()) {
        pw.out() += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" +
                    fixed(s.width) + "\" stroke-linejoin=\"round\" stroke-linecap=\"round\"";
        if (!s.dash.empty()) pw.out() += " stroke-dasharray=\"" + s.dash + "\"";
        pw.out() += "/>\n";
      }
    }
    if (s.markers) {
      for (std::size_t k = 0; k < s.x.size(); ++k) {
        if (!mx.valid(s.x[k]) || !my.valid(s.y[k])) continue;
        const double cx = mx(s.x[k]), cy = my(s.y[k]);
        if (!inside_x(cx) || !inside_y(cy)) continue;
        pw.out() += "<circle cx=\"" + fixed(cx) + "\" cy=\"" + fixed(cy) + "\" r=\"" +
                    fixed(s.marker_radius) + "\" fill=\"" + color +
                    "\" stroke=\"#ffffff\" stroke-width=\"0.8\"/>\n";
      }
    }
  }
  // Frame, ticks, tick labels.
  pw.rect(box.left, box.top, box.width, box.height, "none",
          "stroke=\"#333333\" stroke-width=\"1\"");
  for (double v : xt.minor)
    pw.line(mx(v), box.bottom(), mx(v), box.bottom() + kTickLength * 0.6, "#333333", 0.8);
  for (double v : yt.minor)
    pw.line(box.left - kTickLength * 0.6, my(v), box.left, my(v), "#333333", 0.8);
  for (double v : xt.major) {
    pw.line(mx(v), box.bottom(), mx(v), box.bottom() + kTickLength, "#333333", 1);
    pw.text(mx(v), box.bottom() + kTickLength + 3 + kTickFontSize,
            tick_label(v, p.x.scale, xt.step), kTickFontSize, "middle", "fill=\"#222222\"");
  }
  for (double v : yt.major) {
    pw.line(box.left - kTickLength, my(v), box.left, my(v), "#333333", 1);
    pw.text(box.left - kTickLength - 3, my(v) + kTickFontSize * 0.35,
            tick_label(v, p.y.scale, yt.step), kTickFontSize, "end", "fill=\"#222222\"");
  }
  // Reference labels, with a white halo so they stay readable over lines and cells; labels of
  // vertical lines are stacked so that neighbours do not overlap.
  const std::string halo =
      "fill=\"#222222\" stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\"";
  int vertical_index = 0;
  for (const ReferenceLine& r : p.references) {
    if (r.label.empty() || !(r.vertical ? mx.valid(r.value) : my.valid(r.value))) continue;
    const double at = r.vertical ? mx(r.value) : my(r.value);
    if (r.vertical && inside_x(at)) {
      const double ly = box.top + 14 + 16.0 * vertical_index++;
      // Right of the line when the label fits there, else left of it.
      const bool fits_right = at + 4 + text_width(r.label, kTickFontSize) <= box.right() - 2;
      pw.text(fits_right ? at + 4 : at - 4, ly, r.label, kTickFontSize,
              fits_right ? "start" : "end", halo);
    } else if (!r.vertical && inside_y(at)) {
      const double ly = at - box.top < 16 ? at + 14 : at - 5;
      pw.text(box.left + 6, ly, r.label, kTickFontSize, "start", halo);
    }
  }
  // Axis labels and the panel title.
  if (!p.x.label.empty()) {
    pw.text(box.left + box.width / 2, box.bottom() + slot.bottom_margin - 6, p.x.label, kFontSize,
            "middle", "fill=\"#111111\"");
  }
  if (!p.y.label.empty()) {
    const double lx = slot.left + 6 + kFontSize;
    const double ly = box.top + box.height / 2;
    pw.text(lx, ly, p.y.label, kFontSize, "middle",
            "fill=\"#111111\" transform=\"rotate(-90 " + fixed(lx) + " " + fixed(ly) + ")\"");
  }
  if (!p.title.empty()) {
    pw.text(box.left + box.width / 2, box.top - 8, p.title, kFontSize + 1, "middle",
            "font-weight=\"bold\" fill=\"#222222\"");
  }
  return "<g>\n" + pw.out() + "</g>\n";
}

std::string draw_colorbar(const Heatmap& h, const ColorbarLayout& c, double left, double top,
                          double height) {
  Writer cw;
  constexpr int kSteps = 64;
  const double seg = height / kSteps;
  for (int k = 0; k < kSteps; ++k) {
    // Each step overlaps the next by 0.3 px so that no seam shows between them.
    cw.rect(left, top + height - (k + 1) * seg, kColorbarWidth, seg + 0.3,
            color_at(h.colormap, (k + 0.5) / kSteps), "shape-rendering=\"crispEdges\"");
  }
  cw.rect(left, top, kColorbarWidth, height, "none", "stroke=\"#333333\" stroke-width=\"1\"");
  for (std::size_t k = 0; k < c.ticks.size(); ++k) {
    const double ty = top + height * (1 - (c.ticks[k] - h.vmin) / (h.vmax - h.vmin));
    cw.line(left + kColorbarWidth, ty, left + kColorbarWidth + kTickLength, ty, "#333333", 1);
    cw.text(left + kColorbarWidth + kTickLength + 3, ty + kTickFontSize * 0.35, c.labels[k],
            kTickFontSize, "start", "fill=\"#222222\"");
  }
  if (!h.colorbar_label.empty()) {
    const double lx = left + c.width - 4;
    const double ly = top + height / 2;
    cw.text(lx, ly, h.colorbar_label, kFontSize, "middle",
            "fill=\"#111111\" transform=\"rotate(-90 " + fixed(lx) + " " + fixed(ly) + ")\"");
  }
  return "<g class=\"colorbar\">\n" + cw.out() + "</g>\n";
}

double legend_entry_width(const ResolvedSeries& r) {
  return kLegendSample + 8 + text_width(r.series->name, kFontSize);
}

double draw_legend(std::string& out, const std::vector<ResolvedSeries>& legend, double left,
                   double top, double flow_width) {
  Writer lw;
  auto entry = [&](const ResolvedSeries& r, double x, double cy) {
    const Series& s = *r.series;
    if (s.line) lw.line(x, cy, x + kLegendSample, cy, r.color, std::max(s.width, 2.0), s.dash);
    if (s.markers || !s.line) {
      lw.out() += "<circle cx=\"" + fixed(x + kLegendSample / 2) + "\" cy=\"" + fixed(cy) +
                  "\" r=\"" + fixed(std::max(s.marker_radius, 3.0)) + "\" fill=\"" + r.color +
                  "\"/>\n";
    }
    lw.text(x + kLegendSample + 8, cy + kFontSize * 0.35, s.name, kFontSize, "start",
            "fill=\"#111111\"");
  };
  double x = left, y = top;
  for (const auto& r : legend) {
    if (flow_width > 0) {
      const double w = legend_entry_width(r) + 24;
      if (x > left && x + w > left + flow_width) {
        x = left;
        y += kLegendRow;
      }
      entry(r, x, y + kLegendRow / 2);
      x += w;
    } else {
      entry(r, x, y + kLegendRow / 2);
      y += kLegendRow;
    }
  }
  out += "<g class=\"legend\">\n" + lw.out() + "</g>\n";
  return flow_width > 0 ? y + kLegendRow : y;
}

}  // namespace posenc::svg::detail
