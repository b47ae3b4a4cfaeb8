// The M-RoPE figures of figures.h: the axis map (which slot reads t, h, w) and the t/h/w ids of an
// image inside a text, computed with the library's own axis map and position rule.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "posenc/core/error.h"
#include "posenc/core/mrope_positions.h"
#include "posenc/report/figures.h"
#include "posenc/report/svg.h"
#include "util/format.h"

namespace posenc::figures {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

std::string with_model(std::string_view title, std::string_view model_name) {
  return model_name.empty() ? std::string(title)
                            : std::string(title) + ": " + std::string(model_name);
}

// One colour per axis, the same in the strip, its colour bar and the series: the colour the
// heatmap gives level `axis` of `axes` levels (svg_draw.cc: the middle of the level).
std::string axis_color(std::int64_t axis, std::int64_t axes) {
  return svg::color_at(svg::Colormap::kViridis,
                       (static_cast<double>(axis) + 0.5) / static_cast<double>(axes));
}

void check_axis_map(const RopeSpec& model, std::string_view figure) {
  validate(model);
  if (axis_count(model) <= 1) {
    throw Error(std::string(figure) + " figure: the model has one position axis (axis rule " +
                std::string(axis_rule_name(model.axis_map.rule)) +
                "); it is drawn for M-RoPE models (mrope_section in the config)");
  }
}

std::string axes_text(const RopeSpec& model) {
  std::string s;
  for (std::int64_t a = 0; a < axis_count(model); ++a) {
    s += std::string(s.empty() ? "" : ", ") + std::to_string(a) + " = " +
         std::string(axis_name(model.axis_map, a));
  }
  return s;
}

}  // namespace

bool multi_axis_only(const RopeSpec& model) { return axis_count(model) > 1; }

std::string axis_map_figure(const RopeSpec& model, std::string_view model_name) {
  check_axis_map(model, "axis-map");
  const Frequencies f = compute_frequencies(model, Numerics::kPrecise);
  const std::int64_t n = pair_count(model);
  const std::int64_t axes = axis_count(model);
  const double x_max = static_cast<double>(n);

  svg::Panel strip;
  strip.title = "slot j → axis (" + axes_text(model) + ")";
  strip.x = {"frequency slot j (0 = highest frequency)", svg::Scale::kLinear, 0.0, x_max, false};
  strip.y = {"", svg::Scale::kLinear, 0.0, 1.0, false};
  svg::Heatmap h;
  h.rows = 1;
  h.cols = n;
  for (std::int64_t j = 0; j < n; ++j)
    h.values.push_back(static_cast<double>(slot_axis(model.axis_map, j)));
  h.vmin = 0;
  h.vmax = static_cast<double>(axes - 1);
  h.levels = static_cast<int>(axes);
  h.colorbar_label = "position axis (" + axes_text(model) + ")";
  strip.heatmap = std::move(h);

  svg::Panel waves;
  waves.title = "wavelength of each slot, by the axis it reads";
  waves.x = {"frequency slot j", svg::Scale::kLinear, 0.0, x_max, false};
  waves.y = {"wavelength 2π / ω_j (tokens, log scale)", svg::Scale::kLog, std::nullopt,
             std::nullopt, false};
  for (std::int64_t a = 0; a < axes; ++a) {
    svg::Series s;
    s.color = axis_color(a, axes);
    s.line = false;
    s.markers = true;
    s.marker_radius = 3.5;
    for (std::int64_t j = 0; j < n; ++j) {
      if (slot_axis(model.axis_map, j) != a) continue;
      const double w = f.inv_freq[static_cast<std::size_t>(j)];
      s.x.push_back(static_cast<double>(j) + 0.5);
      s.y.push_back(w > 0 ? kTwoPi / w : std::numeric_limits<double>::quiet_NaN());
    }
    s.name =
        std::string(axis_name(model.axis_map, a)) + ": " + std::to_string(s.x.size()) + " slots";
    waves.series.push_back(std::move(s));
  }
  const ContextLengths ctx = context_lengths(model);
  waves.references.push_back({false, static_cast<double>(ctx.original),
                              "context L = " + std::to_string(ctx.original), "#444444", "6 4"});

  std::string sections;
  for (const std::int64_t v : model.axis_map.sections) {
    sections += (sections.empty() ? "" : ", ") + std::to_string(v);
  }
  svg::Figure fig;
  fig.title = with_model(kAxisMapTitle, model_name);
  fig.caption = "Axis rule " + std::string(axis_rule_name(model.axis_map.rule)) + ", sections [" +
                sections + "], " + std::to_string(n) + " slots (rotary_dim " +
                std::to_string(model.rotary_dim) + ", rope_theta " + detail::num(model.rope_theta) +
                ", " + std::string(layout_name(model.layout)) +
                "). Each slot rotates by its axis' position id times ω_j: every axis walks the "
                "same frequency ladder, so the axis that holds the high slots (long wavelengths) "
                "only sees coarse position, and one that holds the low slots only fine position.";
  fig.width = 1000;
  fig.plot_height = 300;
  fig.panels.push_back(std::move(strip));
  fig.panels.push_back(std::move(waves));
  return svg::render(fig);
}

std::string mrope_positions_figure(const RopeSpec& model, std::string_view model_name) {
  check_axis_map(model, "mrope-positions");
  // An image gets the same ids in every family under hf-4.5 (a still image has one temporal
  // group), so the spec alone decides the picture.
  const std::vector<MropeSegment> layout = parse_mrope_layout(kFigureMropeLayout);
  MropeVision vision;
  vision.model = MropeModel::kQwen2Vl;
  vision.spatial_merge_size = 2;
  const MropePositions p = mrope_positions(layout, vision, MropeRule::kHf45);
  svg::Panel panel;
  panel.x = {"token index", svg::Scale::kLinear, 0.0, static_cast<double>(p.tokens() - 1), false};
  panel.y = {"position id", svg::Scale::kLinear, std::nullopt, std::nullopt, false};
  const char* dashes[3] = {"", "6 3", "2 2"};
  for (std::int64_t a = 0; a < 3; ++a) {
    svg::Series s;
    s.name = std::string(axis_name(model.axis_map, a)) + " id";
    s.color = axis_color(a, 3);
    s.dash = dashes[a];
    s.markers = true;
    s.marker_radius = 2.0;
    for (std::int64_t j = 0; j < p.tokens(); ++j) {
      s.x.push_back(static_cast<double>(j));
      s.y.push_back(
          static_cast<double>(p.ids[static_cast<std::size_t>(a)][static_cast<std::size_t>(j)]));
    }
    panel.series.push_back(std::move(s));
  }
  const std::int64_t begin = layout[0].tokens;
  const std::int64_t end = begin + layout[1].t * (layout[1].h / 2) * (layout[1].w / 2);
  panel.references.push_back({true, static_cast<double>(begin), "image starts", "#444444", "6 4"});
  panel.references.push_back({true, static_cast<double>(end), "text resumes", "#888888", "2 3"});
  svg::Figure fig;
  fig.title = with_model(kMropePositionsTitle, model_name);
  fig.caption =
      "Layout " + std::string(kFigureMropeLayout) +
      " (spatial_merge_size 2: the 12 x 16 patch grid is 6 x 8 tokens, row-major), rule "
      "hf-4.5 (transformers <= 4.57, vLLM, llama.cpp). Text tokens have t = h = w; the "
      "image block starts at the next id, holds t, steps h by row and w by column, and the "
      "text after it resumes at the block's largest id + 1 (rope_deltas " +
      std::to_string(p.rope_deltas) +
      "). posenc mrope-positions prints the ids of any layout and rule.";
  fig.width = 860;
  fig.panels.push_back(std::move(panel));
  return svg::render(fig);
}

}  // namespace posenc::figures
