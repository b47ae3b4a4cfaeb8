// Figures (figures.h) and the SVG writer (svg.h): every figure is well-formed XML, checked by a
// small strict parser (no shared code with src/), and holds what a reader needs:
// title, axis labels, tick labels, one legend entry per method, a colour bar for heatmaps, the
// L marker line. (The checker is in tests/support/xml_checker.h.)
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/io/config.h"
#include "posenc/io/presets.h"
#include "posenc/report/figures.h"
#include "posenc/report/svg.h"
#include "support/xml_checker.h"

namespace {

using posenc::testing::all;
using posenc::testing::Node;
using posenc::testing::XmlChecker;

// A figure parsed and indexed: its visible texts, and helpers to ask for them.
struct Parsed {
  std::unique_ptr<Node> root;
  std::vector<std::string> texts;

  bool has_text(std::string_view t) const {
    for (const auto& s : texts) {
      if (s == t) return true;
    }
    return false;
  }
  // Searches the texts joined by spaces, so that a phrase wrapped over two caption lines counts.
  bool has_text_containing(std::string_view t) const {
    std::string joined;
    for (const auto& s : texts) joined += s + " ";
    return joined.find(t) != std::string::npos;
  }
  const Node* group(std::string_view cls) const {
    for (const Node* g : all(*root, "g")) {
      auto it = g->attrs.find("class");
      if (it != g->attrs.end() && it->second == cls) return g;
    }
    return nullptr;
  }
};

Parsed parse_figure(const std::string& svg) {
  XmlChecker checker(svg);
  Parsed p;
  p.root = checker.parse();
  EXPECT_NE(p.root, nullptr) << "not well-formed: " << checker.error();
  if (!p.root) return p;
  for (const Node* t : all(*p.root, "text")) p.texts.push_back(t->text);
  return p;
}

// Every figure: an <svg> root in the SVG namespace with a viewBox and explicit width and height
// that agree with it, a <title>, and no ids or external references.
void expect_svg_basics(const Parsed& p, std::string_view title_prefix) {
  ASSERT_NE(p.root, nullptr);
  const Node& svg = *p.root;
  EXPECT_EQ(svg.name, "svg");
  EXPECT_EQ(svg.attrs.at("xmlns"), "http://www.w3.org/2000/svg");
  ASSERT_TRUE(svg.attrs.count("viewBox") && svg.attrs.count("width") && svg.attrs.count("height"));
  EXPECT_EQ(svg.attrs.at("viewBox"), "0 0 " + svg.attrs.at("width") + " " + svg.attrs.at("height"));
  EXPECT_GT(std::stod(svg.attrs.at("width")), 100);
  EXPECT_GT(std::stod(svg.attrs.at("height")), 100);
  const auto titles = all(svg, "title");
  ASSERT_EQ(titles.size(), 1u);
  EXPECT_EQ(titles[0]->text.rfind(title_prefix, 0), 0u) << titles[0]->text;
  EXPECT_TRUE(p.has_text_containing(title_prefix)) << "visible title";
  std::vector<const Node*> nodes;
  std::vector<const Node*> stack = {&svg};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    EXPECT_EQ(n->attrs.count("id"), 0u) << "ids clash when figures share a page";
    EXPECT_EQ(n->attrs.count("href"), 0u);
    for (const auto& c : n->children) stack.push_back(c.get());
  }
}

// A heatmap's colour bar: the "colorbar" group with its colour steps, tick labels and label.
void expect_colorbar(const Parsed& p, const std::vector<std::string>& labels,
                     std::string_view caption) {
  const Node* bar = p.group("colorbar");
  ASSERT_NE(bar, nullptr) << "no colour bar";
  EXPECT_GE(all(*bar, "rect").size(), 64u);
  std::vector<std::string> bar_texts;
  for (const Node* t : all(*bar, "text")) bar_texts.push_back(t->text);
  for (const auto& l : labels) {
    EXPECT_NE(std::find(bar_texts.begin(), bar_texts.end(), l), bar_texts.end())
        << "colour bar tick " << l;
  }
  EXPECT_NE(std::find(bar_texts.begin(), bar_texts.end(), std::string(caption)), bar_texts.end());
}

std::vector<std::string> legend_texts(const Parsed& p) {
  std::vector<std::string> out;
  const Node* legend = p.group("legend");
  if (!legend) return out;
  for (const Node* t : all(*legend, "text")) out.push_back(t->text);
  return out;
}

// Qwen/Qwen2.5-VL-7B-Instruct config.json (its RoPE keys).
posenc::RopeSpec qwen25_vl() {
  return posenc::parse_hf_config(R"({"model_type": "qwen2_5_vl", "hidden_size": 3584,
      "num_attention_heads": 28, "max_position_embeddings": 128000, "rope_theta": 1000000.0,
      "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})")
      .spec;
}

posenc::RopeSpec llama2_yarn16() {
  // Llama 2 7B (head_dim 4096 / 32 = 128, theta 10000) with YaRN x16 over L = 4096.
  return posenc::parse_hf_config(
             R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "max_position_embeddings": 65536, "rope_theta": 10000.0,
    "rope_scaling": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096}})")
      .spec;
}

// ---------------------------------------------------------------------------------------------

TEST(XmlChecker, AcceptsWellFormed) {
  for (const char* ok : {"<a/>", "<a b=\"1\" c='2'>x &amp; &lt;y&gt; &#65; &#x41;<d/></a>",
                         "<?xml version=\"1.0\"?>\n<!-- c -->\n<a>\n</a>\n<!-- d -->"}) {
    XmlChecker c(ok);
    EXPECT_NE(c.parse(), nullptr) << ok << ": " << c.error();
  }
}

TEST(XmlChecker, RejectsMalformed) {
  for (const char* bad : {"<a>", "<a></b>", "<a b=1/>", "<a b=\"1\" b=\"2\"/>", "<a>&nbsp;</a>",
                          "<a>&amp</a>", "<a/><b/>", "text<a/>", "<a>x < y</a>", "<a b=\"<\"/>",
                          "<a b=\"1\"c=\"2\"/>", "<a><b></a></b>", "<a>&#xZZ;</a>", "<1a/>", ""}) {
    XmlChecker c(bad);
    EXPECT_EQ(c.parse(), nullptr) << "accepted: " << bad;
  }
}

TEST(Svg, XmlEscape) {
  EXPECT_EQ(posenc::svg::xml_escape("a<b>&\"c\"'d'"), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
  EXPECT_EQ(posenc::svg::xml_escape(std::string("x\x01y\tz")), "xy\tz");
  EXPECT_EQ(posenc::svg::xml_escape("λ × ω"), "λ × ω");  // UTF-8 passes through
}

TEST(Svg, FixedNumbers) {
  using posenc::svg::fixed;
  EXPECT_EQ(fixed(12.5), "12.5");
  EXPECT_EQ(fixed(3.0), "3");
  EXPECT_EQ(fixed(-0.0001), "0");  // never "-0"
  EXPECT_EQ(fixed(-0.25), "-0.25");
  EXPECT_EQ(fixed(1.0 / 3.0, 4), "0.3333");
  EXPECT_EQ(fixed(1e7), "10000000");  // never exponent notation
  EXPECT_EQ(fixed(std::nan("")), "0");
}

TEST(Svg, NiceTicks) {
  using posenc::svg::linear_ticks;
  using posenc::svg::log_ticks;
  EXPECT_EQ(linear_ticks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  EXPECT_EQ(linear_ticks(-0.5, 49.5, 5), (std::vector<double>{0, 10, 20, 30, 40}));
  EXPECT_EQ(linear_ticks(0, 64, 6), (std::vector<double>{0, 10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(posenc::svg::nice_range(0.3, 9.2, 5), (std::array<double, 2>{0, 10}));
  EXPECT_EQ(log_ticks(1, 64), (std::vector<double>{1, 2, 5, 10, 20, 50}));
  EXPECT_EQ(log_ticks(1, 1e5), (std::vector<double>{1, 10, 100, 1000, 1e4, 1e5}));
  EXPECT_EQ(log_ticks(0.05, 0.5),
            (std::vector<double>{0.05, 0.1, 0.2, 0.5}));  // one decade: 1, 2, 5
  EXPECT_EQ(log_ticks(2, 9), (std::vector<double>{2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Svg, TickLabels) {
  using posenc::svg::Scale;
  using posenc::svg::tick_label;
  EXPECT_EQ(tick_label(0.6000000000000001, Scale::kLinear, 0.2), "0.6");
  EXPECT_EQ(tick_label(40, Scale::kLinear, 10), "40");
  EXPECT_EQ(tick_label(1000, Scale::kLog), "1000");
  EXPECT_EQ(tick_label(1e4, Scale::kLog), "10⁴");
  EXPECT_EQ(tick_label(1e5, Scale::kLog), "10⁵");
  EXPECT_EQ(tick_label(0.1, Scale::kLog), "0.1");
  EXPECT_EQ(tick_label(1e-3, Scale::kLog), "10⁻³");
  EXPECT_EQ(tick_label(20, Scale::kLog), "20");
}

TEST(Svg, Colormaps) {
  using posenc::svg::color_at;
  using posenc::svg::Colormap;
  // matplotlib's viridis ends; ColorBrewer RdBu's ends and middle.
  EXPECT_EQ(color_at(Colormap::kViridis, 0), "#440154");
  EXPECT_EQ(color_at(Colormap::kViridis, 1), "#fde725");
  EXPECT_EQ(color_at(Colormap::kViridis, 2), "#fde725");  // clamped
  EXPECT_EQ(color_at(Colormap::kDiverging, 0), "#053061");
  EXPECT_EQ(color_at(Colormap::kDiverging, 0.5), "#f7f7f7");
  EXPECT_EQ(color_at(Colormap::kDiverging, 1), "#67001f");
}

TEST(Svg, RejectsMismatchedSeries) {
  posenc::svg::Figure f;
  f.title = "t";
  posenc::svg::Panel p;
  posenc::svg::Series s;
  s.x = {1, 2};
  s.y = {1};
  p.series.push_back(s);
  f.panels.push_back(p);
  EXPECT_THROW(posenc::svg::render(f), posenc::Error);
  EXPECT_THROW(posenc::svg::render(posenc::svg::Figure{}), posenc::Error);
}

TEST(Svg, EscapesTextAndClipsLines) {
  posenc::svg::Figure f;
  f.title = "a <b> & \"c\"";
  posenc::svg::Panel p;
  p.x.min = 0;
  p.x.max = 10;
  p.y.min = 0;
  p.y.max = 10;
  posenc::svg::Series s;
  s.name = "x < y & z";
  s.x = {-100, 5, 100};
  s.y = {5, 5, 5};
  p.series.push_back(s);
  f.panels.push_back(p);
  const std::string svg = posenc::svg::render(f);
  const Parsed parsed = parse_figure(svg);
  ASSERT_NE(parsed.root, nullptr);
  EXPECT_TRUE(parsed.has_text("a <b> & \"c\""));
  EXPECT_TRUE(parsed.has_text("x < y & z"));
  // The line is clipped to the plot area: no coordinate far outside the figure.
  for (const Node* path : all(*parsed.root, "path")) {
    std::string d = path->attrs.at("d");
    for (char& c : d) {
      if (c == 'M' || c == 'L') c = ' ';
    }
    std::istringstream in(d);
    double v;
    while (in >> v) {
      EXPECT_GE(v, 0);
      EXPECT_LE(v, 760);
    }
  }
}

TEST(Figures, SinusoidalHeatmapsOfTheSeed) {
  // The seed's two examples: "128维50输入" (50 positions x 128 dims), "150维200输入" (200 x 150).
  for (auto [positions, d_model] : {std::pair<std::int64_t, std::int64_t>{50, 128}, {200, 150}}) {
    posenc::SinusoidalSpec spec;
    spec.d_model = d_model;
    const std::string svg = posenc::figures::sinusoidal_figure(spec, positions);
    const Parsed p = parse_figure(svg);
    expect_svg_basics(p, posenc::figures::kSinusoidalTitle);
    EXPECT_TRUE(p.has_text_containing(std::to_string(positions) + " positions × " +
                                      std::to_string(d_model) + " dims"));
    EXPECT_TRUE(p.has_text("dimension j (even j: sin, odd j: cos)"));
    EXPECT_TRUE(p.has_text("position p"));
    EXPECT_TRUE(p.has_text("0"));
    EXPECT_TRUE(p.has_text(positions == 50 ? "40" : "150"));  // y ticks
    EXPECT_TRUE(p.has_text(d_model == 128 ? "120" : "140"));  // x ticks
    expect_colorbar(p, {"-1", "0", "1"}, "PE(p, j)");
    // The cells: a transformed group of paths in the diverging colours.
    EXPECT_GE(all(*p.root, "path").size(), 32u);
    EXPECT_LT(svg.size(), 2'000'000u);
  }
}

TEST(Figures, SinusoidalConcatenatedLayoutSaysSo) {
  posenc::SinusoidalSpec spec;
  spec.d_model = 64;
  spec.layout = posenc::SinusoidalLayout::kConcatenated;
  const Parsed p = parse_figure(posenc::figures::sinusoidal_figure(spec, 20));
  EXPECT_TRUE(p.has_text("dimension j (j < d/2: sin, j ≥ d/2: cos)"));
}

TEST(Figures, Similarity) {
  posenc::SinusoidalSpec spec;
  spec.d_model = 128;
  const Parsed p = parse_figure(posenc::figures::similarity_figure(spec, 100));
  expect_svg_basics(p, posenc::figures::kSimilarityTitle);
  EXPECT_TRUE(p.has_text("position q"));
  EXPECT_TRUE(p.has_text("position p"));
  EXPECT_TRUE(p.has_text("80"));
  expect_colorbar(p, {"30", "60"}, "PE(p) · PE(q)");
  // The diagonal is |PE(p)|^2 = d/2 = 64, the top of the colour bar.
  EXPECT_TRUE(p.has_text_containing("d/2 = 64 on the diagonal"));
}

TEST(Figures, SinusoidalRejectsBadSizes) {
  posenc::SinusoidalSpec spec;
  spec.d_model = 128;
  try {
    posenc::figures::sinusoidal_figure(spec, 0);
    FAIL();
  } catch (const posenc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("positions (0)"), std::string::npos) << e.what();
  }
  spec.d_model = 7;
  EXPECT_THROW(posenc::figures::similarity_figure(spec, 10), posenc::Error);
  spec.d_model = 4096;
  EXPECT_THROW(posenc::figures::sinusoidal_figure(spec, 4000), posenc::Error);  // 16M cells
}

TEST(Figures, MethodVariantsOfLlama2Yarn16) {
  const auto variants = posenc::figures::method_variants(llama2_yarn16());
  std::vector<std::string> labels;
  for (const auto& v : variants) labels.push_back(v.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"original RoPE (no scaling)", "linear (PI) ×16",
                                              "NTK-aware ×16", "dynamic NTK at 65536",
                                              "yarn ×16 (model)", "yarn-paper ×16", "llama3 ×16"}));
  // Spot values: linear divides every frequency by s; yarn keeps pair 0 and divides the last.
  EXPECT_DOUBLE_EQ(variants[1].frequencies.inv_freq[5], variants[0].frequencies.inv_freq[5] / 16);
  EXPECT_DOUBLE_EQ(variants[4].frequencies.inv_freq[0], 1.0);
  EXPECT_DOUBLE_EQ(variants[4].frequencies.inv_freq[63], variants[0].frequencies.inv_freq[63] / 16);
  EXPECT_TRUE(variants[4].is_model);
  const auto sc = posenc::figures::scenario_of(llama2_yarn16());
  EXPECT_EQ(sc.factor, 16);
  EXPECT_EQ(sc.original_context, 4096);
  EXPECT_EQ(sc.extended_context, 65536);
}

TEST(Figures, RelativeUpperBound) {
  // At distance 0 every S_j = j, so the mean of |S_j| over j = 1..n is (n + 1) / 2.
  const std::vector<double> w = {1.0, 0.1, 0.01, 0.001};
  EXPECT_DOUBLE_EQ(posenc::figures::relative_upper_bound(w, 0), 2.5);
  // One pair: |S_1| = |e^{i delta w}| = 1 at any distance.
  EXPECT_NEAR(posenc::figures::relative_upper_bound(std::vector<double>{0.3}, 1234), 1.0, 1e-15);
  // Two pairs with w = (pi, 0) at delta 1: S_1 = -1, S_2 = -1 + 1 = 0, mean 0.5.
  EXPECT_NEAR(posenc::figures::relative_upper_bound(std::vector<double>{std::acos(-1.0), 0.0}, 1),
              0.5, 1e-15);
}

TEST(Figures, Wavelengths) {
  const auto spec = llama2_yarn16();
  const Parsed p = parse_figure(posenc::figures::wavelength_figure(spec, "Llama 2 7B + YaRN ×16"));
  expect_svg_basics(p, posenc::figures::kWavelengthTitle);
  EXPECT_TRUE(p.has_text_containing("Llama 2 7B + YaRN ×16"));
  EXPECT_TRUE(p.has_text("pair index i (0 = highest frequency)"));
  EXPECT_TRUE(p.has_text("wavelength λ_i = 2π / ω_i (tokens, log scale)"));
  for (const char* tick : {"10", "100", "1000", "10⁴", "10⁵", "0", "60"})
    EXPECT_TRUE(p.has_text(tick)) << tick;
  const auto legend = legend_texts(p);
  for (const auto& v : posenc::figures::method_variants(spec)) {
    EXPECT_NE(std::find(legend.begin(), legend.end(), v.label), legend.end()) << v.label;
  }
  // L marked by a horizontal dashed line with its label.
  EXPECT_TRUE(p.has_text("original context L = 4096"));
  EXPECT_TRUE(p.has_text("extended context s·L = 65536"));
  bool dashed = false;
  for (const Node* l : all(*p.root, "line")) {
    if (l->attrs.count("stroke-dasharray") && l->attrs.at("y1") == l->attrs.at("y2")) dashed = true;
  }
  EXPECT_TRUE(dashed);
}

TEST(Figures, WavelengthsOfAnUnscaledModelUseTheDefaultFactor) {
  const auto spec = posenc::load_preset("llama-2-7b").spec;
  const Parsed p = parse_figure(posenc::figures::wavelength_figure(spec, "llama-2-7b"));
  expect_svg_basics(p, posenc::figures::kWavelengthTitle);
  const auto legend = legend_texts(p);
  EXPECT_NE(std::find(legend.begin(), legend.end(), "original RoPE (no scaling) (model)"),
            legend.end());
  EXPECT_NE(std::find(legend.begin(), legend.end(), "yarn ×8"), legend.end());
}

TEST(Figures, LongropeModelAddsItsOwnCurve) {
  const auto spec = posenc::load_preset("phi-3-mini-128k").spec;
  const Parsed p = parse_figure(posenc::figures::decay_figure(spec, "phi-3-mini-128k"));
  expect_svg_basics(p, posenc::figures::kDecayTitle);
  const auto legend = legend_texts(p);
  bool longrope = false;
  for (const auto& l : legend)
    longrope |= l.rfind("longrope at ", 0) == 0 && l.find("(model)") != std::string::npos;
  EXPECT_TRUE(longrope);
}

TEST(Figures, YarnRamp) {
  const Parsed p = parse_figure(posenc::figures::yarn_ramp_figure(llama2_yarn16(), "m"));
  expect_svg_basics(p, posenc::figures::kYarnRampTitle);
  EXPECT_TRUE(p.has_text("over the pair index i"));
  EXPECT_TRUE(p.has_text("over r = L/λ (rotations in L)"));
  EXPECT_TRUE(p.has_text("pair index i"));
  EXPECT_TRUE(p.has_text("r = L / λ_i (log scale, reversed)"));
  EXPECT_TRUE(p.has_text("interpolation weight (0: keep ω, 1: ω/s)"));
  // The correction dims of Llama 2 + YaRN x16 (frequencies.h: 20 and 46) and the paper's bounds.
  EXPECT_TRUE(p.has_text("lo = 20"));
  EXPECT_TRUE(p.has_text("hi = 46"));
  EXPECT_TRUE(p.has_text("β = beta_fast = 32"));
  EXPECT_TRUE(p.has_text("α = beta_slow = 1"));
  for (const char* tick : {"0", "0.2", "1", "0.1", "10", "100"})
    EXPECT_TRUE(p.has_text(tick)) << tick;
  const auto legend = legend_texts(p);
  EXPECT_EQ(legend.size(), 2u);  // one legend for both panels
}

TEST(Figures, Decay) {
  const auto spec = llama2_yarn16();
  const Parsed p = parse_figure(posenc::figures::decay_figure(spec));
  expect_svg_basics(p, posenc::figures::kDecayTitle);
  EXPECT_TRUE(p.has_text("relative distance Δ = n − m (tokens, log scale)"));
  EXPECT_TRUE(p.has_text("relative upper bound (1/n) Σ_j |S_j|, windowed mean"));
  EXPECT_TRUE(p.has_text("L = 4096"));
  EXPECT_TRUE(p.has_text("s·L = 65536"));
  for (const char* tick : {"1", "10", "100", "1000", "10⁴", "0", "30"})
    EXPECT_TRUE(p.has_text(tick)) << tick;
  EXPECT_EQ(legend_texts(p).size(), posenc::figures::method_variants(spec).size());
}

TEST(Figures, AttentionFactor) {
  const Parsed p = parse_figure(posenc::figures::attention_factor_figure(llama2_yarn16()));
  expect_svg_basics(p, posenc::figures::kAttentionFactorTitle);
  EXPECT_TRUE(p.has_text("scale factor s (log scale)"));
  EXPECT_TRUE(p.has_text("factor"));
  for (const char* tick : {"1", "2", "5", "10", "20", "50"}) EXPECT_TRUE(p.has_text(tick)) << tick;
  const auto legend = legend_texts(p);
  auto has = [&](std::string_view prefix) {
    return std::any_of(legend.begin(), legend.end(),
                       [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(has("YaRN: 0.1 ln s + 1"));
  EXPECT_TRUE(has("DeepSeek-V2/V3: g(s, mscale) / g(s, mscale_all_dim)"));
  EXPECT_TRUE(has("DeepSeek-V2 softmax: g(s, 0.707)²"));
  EXPECT_TRUE(has("LongRoPE: √(1 + ln s / ln L), L = 4096"));
  EXPECT_TRUE(has("this model: s = 16, attention factor 1.2773"));
  EXPECT_TRUE(p.has_text("s = 16"));
}

TEST(Figures, AttentionFactorOfDeepseekMarksTheSoftmaxMultiplier) {
  // DeepSeek-V3: yarn x40, mscale = mscale_all_dim = 1: attention factor 1, softmax multiplier
  // g(40, 1)^2 = (0.1 ln 40 + 1)^2 = 1.36889^2 = 1.87386
  const Parsed p = parse_figure(
      posenc::figures::attention_factor_figure(posenc::load_preset("deepseek-v3").spec));
  const auto legend = legend_texts(p);
  EXPECT_NE(std::find(legend.begin(), legend.end(), "this model: s = 40, attention factor 1"),
            legend.end());
  const double m = std::pow(0.1 * std::log(40.0) + 1, 2);
  EXPECT_NE(std::find(legend.begin(), legend.end(),
                      "this model: softmax multiplier " + posenc::svg::fixed(m, 4)),
            legend.end());
  EXPECT_EQ(posenc::svg::fixed(m, 4), "1.8739");
}

TEST(Figures, InvalidModelIsRefused) {
  auto spec = llama2_yarn16();
  spec.yarn.beta_fast = 0.5;
  EXPECT_THROW(posenc::figures::wavelength_figure(spec), posenc::Error);
  EXPECT_THROW(posenc::figures::yarn_ramp_figure(spec), posenc::Error);
}

TEST(Figures, KindsRegistry) {
  namespace f = posenc::figures;
  std::vector<std::string> names;
  for (const f::FigureKind& k : f::figure_kinds()) {
    names.emplace_back(k.name);
    EXPECT_NE(k.sinusoidal == nullptr, k.model == nullptr)
        << k.name << ": exactly one way to draw it";
    EXPECT_EQ(k.is_sinusoidal(), k.default_positions > 0) << k.name;
    EXPECT_EQ(f::find_figure_kind(k.name), &k);
    EXPECT_FALSE(k.help.empty() || k.heading.empty()) << k.name;
    // Drawn with its defaults, the figure's title starts with the kind's title.
    // The M-RoPE kinds apply to a VL model only.
    const posenc::RopeSpec model = k.applies_to(llama2_yarn16()) ? llama2_yarn16() : qwen25_vl();
    EXPECT_TRUE(k.is_sinusoidal() || k.applies_to(model)) << k.name;
    const std::string svg = k.is_sinusoidal()
                                ? k.sinusoidal(posenc::SinusoidalSpec{128}, k.default_positions)
                                : k.model(model, "m");
    expect_svg_basics(parse_figure(svg), k.title);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"sinusoidal", "similarity", "wavelengths", "yarn-ramp",
                                      "decay", "attention-factor", "axis-map", "mrope-positions"}));
  EXPECT_EQ(f::find_figure_kind("heatmap"), nullptr);
}

// Qwen2.5-VL-7B's axis map: mrope_section [16, 24, 24] contiguous over 64 slots.
TEST(Figures, AxisMapOfQwen25Vl) {
  namespace f = posenc::figures;
  const Parsed p = parse_figure(f::axis_map_figure(qwen25_vl(), "Qwen2.5-VL-7B"));
  expect_svg_basics(p, f::kAxisMapTitle);
  EXPECT_TRUE(p.has_text_containing("Qwen2.5-VL-7B"));
  const auto legend = legend_texts(p);
  for (const char* entry : {"t: 16 slots", "h: 24 slots", "w: 24 slots"}) {
    EXPECT_NE(std::find(legend.begin(), legend.end(), entry), legend.end()) << entry;
  }
  EXPECT_TRUE(p.has_text_containing("sections [16, 24, 24]"));
  EXPECT_TRUE(p.has_text("wavelength 2π / ω_j (tokens, log scale)"));
  EXPECT_TRUE(p.has_text("position axis (0 = t, 1 = h, 2 = w)"));
  // The strip: one fill per axis, each the colour of that axis' series.
  std::vector<std::string> fills;
  for (const Node* g : all(*p.root, "g")) {
    if (!g->attrs.count("shape-rendering")) continue;
    for (const Node* path : all(*g, "path")) fills.push_back(path->attrs.at("fill"));
  }
  ASSERT_EQ(fills.size(), 3u);
  for (const std::string& fill : fills) {
    bool used = false;
    for (const Node* c : all(*p.root, "circle"))
      used = used || (c->attrs.count("fill") && c->attrs.at("fill") == fill);
    EXPECT_TRUE(used) << fill << ": no series marker has the strip's colour";
  }
}

// Qwen3-VL interleaves: slots 1, 4, ... read h and 2, 5, ... read w up to 3 x 20; t keeps 24.
TEST(Figures, AxisMapOfQwen3VlInterleaved) {
  namespace f = posenc::figures;
  const posenc::RopeSpec spec = posenc::parse_hf_config(R"({"model_type": "qwen3_vl",
      "text_config": {"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
        "max_position_embeddings": 262144, "rope_theta": 5000000,
        "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20],
                         "mrope_interleaved": true}}})")
                                    .spec;
  const Parsed p = parse_figure(f::axis_map_figure(spec));
  const auto legend = legend_texts(p);
  for (const char* entry : {"t: 24 slots", "h: 20 slots", "w: 20 slots"}) {
    EXPECT_NE(std::find(legend.begin(), legend.end(), entry), legend.end()) << entry;
  }
  EXPECT_TRUE(p.has_text_containing("Axis rule interleaved"));
}

// text:6,image:1x12x16,text:6 with merge 2: the image is 6 x 8 = 48 tokens at 6 (h 6..11, w
// 6..13), the text resumes at 14 and ends at 19: 60 tokens, rope_deltas 19 + 1 - 60 = -40.
TEST(Figures, MropePositionsOfAnImage) {
  namespace f = posenc::figures;
  const Parsed p = parse_figure(f::mrope_positions_figure(qwen25_vl(), "Qwen2.5-VL-7B"));
  expect_svg_basics(p, f::kMropePositionsTitle);
  const auto legend = legend_texts(p);
  for (const char* entry : {"t id", "h id", "w id"}) {
    EXPECT_NE(std::find(legend.begin(), legend.end(), entry), legend.end()) << entry;
  }
  EXPECT_TRUE(p.has_text_containing("rope_deltas -40"));
  EXPECT_TRUE(p.has_text("image starts"));
  EXPECT_TRUE(p.has_text("text resumes"));
  EXPECT_TRUE(p.has_text("token index"));
}

TEST(Figures, MropeKindsRefuseOneAxisModels) {
  namespace f = posenc::figures;
  for (auto draw : {&f::axis_map_figure, &f::mrope_positions_figure}) {
    try {
      draw(llama2_yarn16(), "");
      ADD_FAILURE() << "no error";
    } catch (const posenc::Error& e) {
      EXPECT_NE(std::string(e.what()).find("one position axis"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(f::find_figure_kind("axis-map")->applies_to(llama2_yarn16()));
  EXPECT_TRUE(f::find_figure_kind("axis-map")->applies_to(qwen25_vl()));
  EXPECT_TRUE(f::find_figure_kind("wavelengths")->applies_to(llama2_yarn16()));
}

TEST(Figures, Perplexity) {
  const std::vector<std::string> methods = {"none", "yarn", "yarn-paper"};
  const std::vector<std::int64_t> contexts = {512, 1024, 2048};
  std::vector<posenc::figures::PerplexityPoint> points;
  for (const std::string& m : methods) {
    for (std::int64_t c : contexts)
      points.push_back(
          {m, c, m == "none" && c == 2048 ? NAN : 10.0 + static_cast<double>(c) / 512});
  }
  const std::string svg =
      posenc::figures::perplexity_figure("stories: perplexity on t.txt against context",
                                         "windows of ctx tokens", methods, contexts, points, 512);
  const Parsed p = parse_figure(svg);
  expect_svg_basics(p, "stories: perplexity on t.txt against context");
  EXPECT_TRUE(p.has_text_containing("windows of ctx tokens. Trained context 512 (dashed line)."));
  EXPECT_EQ(legend_texts(p), methods);
  EXPECT_TRUE(p.has_text("context (tokens)"));
  EXPECT_TRUE(p.has_text("perplexity"));
  EXPECT_NE(svg.find("stroke-dasharray=\"7 4\""), std::string::npos) << "yarn-paper is dashed";
  EXPECT_TRUE(p.has_text_containing("trained context"));
}

}  // namespace
