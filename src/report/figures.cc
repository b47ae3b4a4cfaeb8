// The figures of figures.h, drawn with svg.h. Each function computes its data with the library's
// own code paths (sinusoidal_table, compute_frequencies), so a figure shows what posenc computes.
#include "posenc/report/figures.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>
#include <string>

#include "posenc/core/error.h"
#include "posenc/report/svg.h"
#include "util/format.h"

namespace posenc::figures {
namespace {

using detail::num;
constexpr double kTwoPi = 2.0 * std::numbers::pi;

// One look per method, the same in every figure.
struct Look {
  std::string color;
  std::string dash;
  double width;
};

Look look_of(std::string_view method) {
  if (method == "default") return {"#222222", "", 3.0};
  if (method == "linear") return {"#1f77b4", "9 4", 2.0};
  if (method == "ntk") return {"#2ca02c", "", 2.0};
  if (method == "dynamic") return {"#17becf", "3 3", 2.2};
  if (method == "yarn") return {"#d62728", "", 2.2};
  if (method == "yarn-paper") return {"#ff7f0e", "8 3 2 3", 2.0};
  if (method == "llama3") return {"#9467bd", "5 2", 2.0};
  return {"#8c564b", "", 2.0};
}

svg::Series styled(const MethodVariant& v) {
  svg::Series s;
  s.name = v.label;
  const Look look = look_of(method_name(v.spec));
  s.color = look.color;
  s.dash = look.dash;
  s.width = look.width;
  return s;
}

std::string with_model(std::string_view title, std::string_view model_name) {
  return model_name.empty() ? std::string(title)
                            : std::string(title) + ": " + std::string(model_name);
}

std::string scenario_text(const RopeSpec& model, const Scenario& sc) {
  return "head_dim " + std::to_string(model.head_dim) + ", rotary_dim " +
         std::to_string(model.rotary_dim) + ", rope_theta " + num(model.rope_theta) +
         ", s = " + num(sc.factor) + ", L = " + std::to_string(sc.original_context) +
         ", extended context " + std::to_string(sc.extended_context);
}

// The decay figure evaluates the bound at every sampled distance for every pair and method.
void check_decay(const RopeSpec& model) {
  if (pair_count(model) > kMaxDecayPairs) {
    throw Error("decay figure: rotary_dim / 2 (" + std::to_string(pair_count(model)) +
                " pairs; head_dim " + std::to_string(model.head_dim) + ", rotary_dim " +
                std::to_string(model.rotary_dim) + ") must be at most " +
                std::to_string(kMaxDecayPairs) + " pairs");
  }
}

// n points from lo to hi, evenly spaced in ln.
std::vector<double> log_space(double lo, double hi, int n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    v[static_cast<std::size_t>(k)] = lo * std::pow(hi / lo, static_cast<double>(k) / (n - 1));
  }
  return v;
}

}  // namespace

Scenario scenario_of(const RopeSpec& model) {
  Scenario sc;
  const bool scaled = model.method != Method::kNone && model.factor > 1.0;
  sc.factor = scaled ? model.factor : kDefaultFigureFactor;
  sc.original_context = context_lengths(model).original;
  sc.extended_context =
      static_cast<std::int64_t>(std::llround(sc.factor * static_cast<double>(sc.original_context)));
  return sc;
}

std::vector<MethodVariant> method_variants(const RopeSpec& model) {
  validate(model);
  const Scenario sc = scenario_of(model);
  const std::string times = "×" + num(sc.factor);
  std::vector<MethodVariant> out;
  auto add = [&](std::string label, Method method, YarnRamp ramp, std::int64_t seq_len) {
    RopeSpec s = model;
    const bool is_model =
        model.method == method && (method != Method::kYarn || model.yarn.ramp == ramp);
    if (!method_reads(model, kParamYarn)) s.yarn = YarnParams{};
    if (!method_reads(model, kParamLlama3)) s.llama3 = Llama3Params{};
    s.method = method;
    s.yarn.ramp = ramp;
    s.freq_factors.clear();  // a GGUF's rope_freqs are the model's own scaling, not the method's
    s.factor = method == Method::kNone ? 1.0 : sc.factor;
    s.original_max_position_embeddings = sc.original_context;
    // Dynamic NTK grows the base once the sequence passes L' (transformers uses the config's
    // max_position_embeddings, the original context, as L').
    s.max_position_embeddings = method_info(method).reads_param(kParamMaxContext)
                                    ? sc.original_context
                                    : sc.extended_context;
    if (method == Method::kLongrope || method == Method::kProportional) s = model;
    MethodVariant v;
    v.label = label + (is_model ? " (model)" : "");
    v.spec = s;
    v.seq_len = seq_len;
    v.frequencies = compute_frequencies(s, Numerics::kPrecise, seq_len);
    v.is_model = is_model;
    out.push_back(std::move(v));
  };
  add("original RoPE (no scaling)", Method::kNone, YarnRamp::kPairIndex, 0);
  add("linear (PI) " + times, Method::kLinear, YarnRamp::kPairIndex, 0);
  add("NTK-aware " + times, Method::kNtk, YarnRamp::kPairIndex, 0);
  add("dynamic NTK at " + std::to_string(sc.extended_context), Method::kDynamic,
      YarnRamp::kPairIndex, sc.extended_context);
  add("yarn " + times, Method::kYarn, YarnRamp::kPairIndex, 0);
  add("yarn-paper " + times, Method::kYarn, YarnRamp::kPaper, 0);
  add("llama3 " + times, Method::kLlama3, YarnRamp::kPairIndex, 0);
  if (model.method == Method::kLongrope) {
    add("longrope at " + std::to_string(sc.extended_context), Method::kLongrope, model.yarn.ramp,
        sc.extended_context);
  } else if (model.method == Method::kProportional) {
    add("proportional " + times, Method::kProportional, model.yarn.ramp, 0);
  } else if (model.method == Method::kDynamicYarn) {
    add("dynamic-yarn at " + std::to_string(sc.extended_context), Method::kDynamicYarn,
        model.yarn.ramp, sc.extended_context);
  }
  return out;
}

double relative_upper_bound(std::span<const double> inv_freq, double delta) {
  if (inv_freq.empty()) return 0.0;
  std::complex<double> partial = 0.0;
  double sum = 0.0;
  for (double w : inv_freq) {
    partial += std::polar(1.0, delta * w);  // S_j after adding term j - 1
    sum += std::abs(partial);
  }
  return sum / static_cast<double>(inv_freq.size());
}

std::string wavelength_figure(const RopeSpec& model, std::string_view model_name) {
  const Scenario sc = scenario_of(model);
  const auto variants = method_variants(model);
  svg::Panel p;
  p.x.label = "pair index i (0 = highest frequency)";
  p.x.min = 0;
  p.x.max = static_cast<double>(std::max<std::int64_t>(1, pair_count(model) - 1));
  p.y.label = "wavelength λ_i = 2π / ω_i (tokens, log scale)";
  p.y.scale = svg::Scale::kLog;
  for (const auto& v : variants) {
    svg::Series s = styled(v);
    for (std::size_t i = 0; i < v.frequencies.inv_freq.size(); ++i) {
      const double w = v.frequencies.inv_freq[i];
      s.x.push_back(static_cast<double>(i));
      s.y.push_back(w > 0 ? kTwoPi / w : std::numeric_limits<double>::quiet_NaN());
    }
    p.series.push_back(std::move(s));
  }
  p.references.push_back({false, static_cast<double>(sc.original_context),
                          "original context L = " + std::to_string(sc.original_context), "#444444",
                          "6 4"});
  p.references.push_back({false, static_cast<double>(sc.extended_context),
                          "extended context s·L = " + std::to_string(sc.extended_context),
                          "#888888", "2 3"});
  svg::Figure f;
  f.title = with_model(kWavelengthTitle, model_name);
  f.caption =
      "Tokens per full turn of each pair, " + scenario_text(model, sc) +
      ". Pairs whose wavelength is far below L turn many times within the trained context and are "
      "kept by yarn and llama3; pairs above L never completed a turn in training and are "
      "interpolated "
      "(divided by s). Linear divides every pair; NTK and dynamic NTK raise the base.";
  f.panels.push_back(std::move(p));
  return svg::render(f);
}

std::string yarn_ramp_figure(const RopeSpec& model, std::string_view model_name) {
  validate(model);
  const Scenario sc = scenario_of(model);
  RopeSpec yarn = model;
  if (!method_reads(model, kParamYarn)) yarn.yarn = YarnParams{};
  yarn.method = Method::kYarn;
  yarn.freq_factors.clear();
  yarn.factor = sc.factor;
  yarn.original_max_position_embeddings = sc.original_context;
  yarn.max_position_embeddings = sc.extended_context;
  yarn.yarn.ramp = YarnRamp::kPairIndex;
  const Frequencies by_index = compute_frequencies(yarn, Numerics::kPrecise);
  yarn.yarn.ramp = YarnRamp::kPaper;
  const Frequencies by_r = compute_frequencies(yarn, Numerics::kPrecise);
  const double L = static_cast<double>(sc.original_context);

  svg::Series index_ramp;
  index_ramp.name = "yarn: ramp over pair index (transformers, llama.cpp, vLLM)";
  index_ramp.color = look_of("yarn").color;
  index_ramp.markers = true;
  svg::Series paper_ramp;
  paper_ramp.name = "yarn-paper: ramp over r = L/λ (paper eq. 18)";
  paper_ramp.color = look_of("yarn-paper").color;
  paper_ramp.dash = "6 3";
  paper_ramp.markers = true;
  paper_ramp.marker_radius = 2.0;
  svg::Series index_ramp_r = index_ramp, paper_ramp_r = paper_ramp;
  for (std::size_t i = 0; i < by_index.inv_freq.size(); ++i) {
    const double r = L * by_index.unscaled_inv_freq[i] / kTwoPi;
    index_ramp.x.push_back(static_cast<double>(i));
    index_ramp.y.push_back(by_index.interpolation_weight[i]);
    paper_ramp.x.push_back(static_cast<double>(i));
    paper_ramp.y.push_back(by_r.interpolation_weight[i]);
    index_ramp_r.x.push_back(r);
    index_ramp_r.y.push_back(by_index.interpolation_weight[i]);
    paper_ramp_r.x.push_back(r);
    paper_ramp_r.y.push_back(by_r.interpolation_weight[i]);
  }
  const std::string y_label = "interpolation weight (0: keep ω, 1: ω/s)";
  svg::Panel left;
  left.title = "over the pair index i";
  left.x.label = "pair index i";
  left.x.min = 0;
  left.x.max = static_cast<double>(std::max<std::int64_t>(1, pair_count(yarn) - 1));
  left.y.label = y_label;
  left.y.min = -0.05;
  left.y.max = 1.05;
  left.series = {index_ramp, paper_ramp};
  if (by_index.correction_low) {
    left.references.push_back(
        {true, *by_index.correction_low, "lo = " + svg::fixed(*by_index.correction_low, 2)});
    left.references.push_back(
        {true, *by_index.correction_high, "hi = " + svg::fixed(*by_index.correction_high, 2)});
  }
  svg::Panel right;
  right.title = "over r = L/λ (rotations in L)";
  right.x.label = "r = L / λ_i (log scale, reversed)";
  right.x.scale = svg::Scale::kLog;
  right.x.reverse = true;  // large r (high frequency) on the left, as pair 0 is
  right.y.label = y_label;
  right.y.min = -0.05;
  right.y.max = 1.05;
  right.series = {index_ramp_r, paper_ramp_r};
  right.references.push_back(
      {true, yarn.yarn.beta_fast, "β = beta_fast = " + num(yarn.yarn.beta_fast)});
  right.references.push_back(
      {true, yarn.yarn.beta_slow, "α = beta_slow = " + num(yarn.yarn.beta_slow)});
  svg::Figure f;
  f.title = with_model(kYarnRampTitle, model_name);
  f.width = 900;
  f.plot_height = 300;
  f.caption =
      "How far each pair moves from ω towards ω/s, " + scenario_text(model, sc) +
      ". Implementations ramp linearly over the pair index between the correction dims lo and hi "
      "(where a pair turns beta_fast and beta_slow times over L); the paper ramps linearly in r "
      "itself. "
      "Both keep high-frequency pairs and interpolate low-frequency ones; they differ in between.";
  f.panels = {std::move(left), std::move(right)};
  // One legend: the right panel's series repeat the left panel's names.
  return svg::render(f);
}

std::string decay_figure(const RopeSpec& model, std::string_view model_name) {
  validate(model);
  check_decay(model);
  const Scenario sc = scenario_of(model);
  const auto variants = method_variants(model);
  // The bound oscillates from one distance to the next; what matters is its trend. Sample about
  // 4000 integer distances evenly in ln, and draw the mean over a window of +-kHalfWindow decades
  // around each of 300 points (near 1 the window holds a single integer: the exact value).
  constexpr double kHalfWindow = 0.08;  // decades: the window spans distances x 0.83 .. x 1.2
  std::vector<double> samples;
  for (double d : log_space(1.0, static_cast<double>(sc.extended_context), 4000)) {
    const double r = std::round(d);
    if (samples.empty() || r > samples.back()) samples.push_back(r);
  }
  const std::vector<double> centres = log_space(1.0, static_cast<double>(sc.extended_context), 300);
  svg::Panel p;
  p.x.label = "relative distance Δ = n − m (tokens, log scale)";
  p.y.label = "relative upper bound (1/n) Σ_j |S_j|, windowed mean";
  p.x.scale = svg::Scale::kLog;
  p.y.min = 0;
  for (const auto& v : variants) {
    std::vector<double> raw(samples.size());
    for (std::size_t k = 0; k < samples.size(); ++k)
      raw[k] = relative_upper_bound(v.frequencies.inv_freq, samples[k]);
    svg::Series s = styled(v);
    std::size_t lo = 0;
    for (double c : centres) {
      const double a = c * std::pow(10.0, -kHalfWindow), b = c * std::pow(10.0, kHalfWindow);
      while (lo < samples.size() && samples[lo] < a) ++lo;
      double sum = 0;
      int n = 0;
      for (std::size_t k = lo; k < samples.size() && samples[k] <= b; ++k, ++n) sum += raw[k];
      if (n == 0) continue;
      s.x.push_back(c);
      s.y.push_back(sum / n);
    }
    p.series.push_back(std::move(s));
  }
  p.references.push_back({true, static_cast<double>(sc.original_context),
                          "L = " + std::to_string(sc.original_context), "#444444", "6 4"});
  p.references.push_back({true, static_cast<double>(sc.extended_context),
                          "s·L = " + std::to_string(sc.extended_context), "#888888", "2 3"});
  svg::Figure f;
  f.title = with_model(kDecayTitle, model_name);
  f.caption =
      "RoFormer §3.4.3: after rotation |q·k| is at most max|h(i+1) − h(i)| · Σ_j |S_j| with "
      "S_j = Σ_(k<j) exp(i·Δ·ω_k), and this bound falls as the distance Δ grows. Drawn: (1/n) Σ_j "
      "|S_j|, "
      "n = " +
      std::to_string(pair_count(model)) +
      " pairs, averaged over distances within ×/÷ 1.2 of Δ "
      "(the raw bound oscillates). " +
      scenario_text(model, sc) +
      ". Interpolation stretches the curve to the right: attention keeps telling distances apart "
      "farther out. The attention factor (a constant) is left out.";
  f.panels.push_back(std::move(p));
  return svg::render(f);
}

std::string attention_factor_figure(const RopeSpec& model, std::string_view model_name) {
  validate(model);
  const Scenario sc = scenario_of(model);
  const double L = static_cast<double>(sc.original_context);
  const auto s_values = log_space(1.0, 64.0, 200);
  auto curve = [&](std::string name, std::string color, std::string dash, auto fn) {
    svg::Series s;
    s.name = std::move(name);
    s.color = std::move(color);
    s.dash = std::move(dash);
    for (double s_val : s_values) {
      s.x.push_back(s_val);
      s.y.push_back(fn(s_val));
    }
    return s;
  };
  svg::Panel p;
  p.x.label = "scale factor s (log scale)";
  p.y.label = "factor";
  p.x.scale = svg::Scale::kLog;
  p.x.min = 1;
  p.x.max = 64;
  p.y.min = 0.9;
  p.series.push_back(curve("YaRN: 0.1 ln s + 1 (multiplies cos and sin)", "#d62728", "",
                           [](double s) { return yarn_mscale(s); }));
  p.series.push_back(
      curve("(0.1 ln s + 1)²: YaRN on q·k, and DeepSeek-V3's softmax multiplier g(s, 1)²",
            "#d62728", "3 3", [](double s) { return yarn_mscale(s) * yarn_mscale(s); }));
  // DeepSeek-V2/V3 configs set mscale = mscale_all_dim (0.707 in V2, 1 in V3): the cos/sin
  // factor g(s, mscale) / g(s, mscale_all_dim) is 1, and the scaling moves into the softmax.
  p.series.push_back(curve("DeepSeek-V2/V3: g(s, mscale) / g(s, mscale_all_dim) = 1", "#1f77b4", "",
                           [](double s) { return yarn_mscale(s, 1.0) / yarn_mscale(s, 1.0); }));
  p.series.push_back(curve("DeepSeek-V2 softmax: g(s, 0.707)²", "#2ca02c", "8 4",
                           [](double s) { return std::pow(yarn_mscale(s, 0.707), 2); }));
  if (model.yarn.mscale_all_dim && *model.yarn.mscale_all_dim != 0.707 &&
      *model.yarn.mscale_all_dim != 1.0) {
    const double m = *model.yarn.mscale_all_dim;
    p.series.push_back(curve("this model's softmax: g(s, " + num(m) + ")²", "#17becf", "4 2",
                             [m](double s) { return std::pow(yarn_mscale(s, m), 2); }));
  }
  p.series.push_back(
      curve("LongRoPE: √(1 + ln s / ln L), L = " + std::to_string(sc.original_context), "#9467bd",
            "", [L](double s) { return std::sqrt(1.0 + std::log(s) / std::log(L)); }));
  // The model's own point(s): its attention factor and, for DeepSeek, its softmax multiplier.
  const auto variants = method_variants(model);
  double model_factor = 1.0, model_softmax = 1.0;
  for (const auto& v : variants) {
    if (v.is_model) {
      model_factor = v.frequencies.attention_factor;
      model_softmax = v.frequencies.softmax_scale_multiplier;
    }
  }
  const bool scaled = model.method != Method::kNone;
  if (scaled) {
    svg::Series point;
    point.name =
        "this model: s = " + num(sc.factor) + ", attention factor " + svg::fixed(model_factor, 4);
    point.color = "#000000";
    point.line = false;
    point.markers = true;
    point.marker_radius = 4.5;
    point.x = {sc.factor};
    point.y = {model_factor};
    p.series.push_back(std::move(point));
    if (model_softmax != 1.0) {
      svg::Series softmax;
      softmax.name = "this model: softmax multiplier " + svg::fixed(model_softmax, 4);
      softmax.color = "#555555";
      softmax.line = false;
      softmax.markers = true;
      softmax.marker_radius = 4.5;
      softmax.x = {sc.factor};
      softmax.y = {model_softmax};
      p.series.push_back(std::move(softmax));
    }
  }
  p.references.push_back(
      {true, sc.factor,
       scaled ? "s = " + num(sc.factor)
              : "s = " + num(sc.factor) + " (the figures' default; the model has no scaling)",
       "#666666", "6 4"});
  svg::Figure f;
  f.title = with_model(kAttentionFactorTitle, model_name);
  f.caption =
      "g(s, m) = 0.1·m·ln s + 1 (YaRN eq. 22). The attention factor multiplies cos and sin, so it "
      "multiplies q·k by its square; DeepSeek instead multiplies the softmax scale by "
      "g(s, mscale_all_dim)² (the DeepSeek-V3 multiplier g(s, 1)² is YaRN's q·k curve). LongRoPE's "
      "factor uses the original context L.";
  f.width = 860;
  f.panels.push_back(std::move(p));
  return svg::render(f);
}

std::string perplexity_figure(std::string_view title, std::string_view caption,
                              std::span<const std::string> methods,
                              std::span<const std::int64_t> contexts,
                              std::span<const PerplexityPoint> points,
                              std::int64_t trained_context) {
  svg::Figure f;
  f.title = std::string(title);
  f.caption = std::string(caption) + ". Trained context " + std::to_string(trained_context) +
              " (dashed line).";
  // Axes hug the data (log ticks otherwise widen to whole decades).
  double lo = INFINITY, hi = 0;
  for (const PerplexityPoint& c : points) {
    if (std::isfinite(c.perplexity))
      lo = std::min(lo, c.perplexity), hi = std::max(hi, c.perplexity);
  }
  svg::Panel p;
  if (!contexts.empty()) {
    const auto [cmin, cmax] = std::minmax_element(contexts.begin(), contexts.end());
    p.x = {"context (tokens)", svg::Scale::kLog, static_cast<double>(*cmin) / 1.25,
           static_cast<double>(*cmax) * 1.25, false};
  } else {
    p.x = {"context (tokens)", svg::Scale::kLog, std::nullopt, std::nullopt, false};
  }
  p.y = {"perplexity", svg::Scale::kLog, std::nullopt, std::nullopt, false};
  if (hi > 0) p.y.min = lo / 1.25, p.y.max = hi * 1.25;
  for (const std::string& m : methods) {
    svg::Series s;
    s.name = m;
    s.markers = true;
    // The second of each pair (yarn / yarn-paper, dynamic / dynamic-yarn) dashed.
    if (m == "yarn-paper" || m == "dynamic-yarn") s.dash = "7 4";
    for (const PerplexityPoint& c : points) {
      if (c.method != m) continue;
      s.x.push_back(static_cast<double>(c.context));
      s.y.push_back(c.perplexity);
    }
    p.series.push_back(std::move(s));
  }
  p.references.push_back(
      {true, static_cast<double>(trained_context), "trained context", "#444444", "6 4"});
  f.panels.push_back(std::move(p));
  return svg::render(f);
}

namespace {

constexpr FigureKind kKinds[] = {
    {"sinusoidal", kSinusoidalTitle, "Sinusoidal encoding",
     "heatmap of PE(p, j), positions x dims (default 50 x 128; the seed's other example: "
     "--positions 200 --d-model 150)",
     50, sinusoidal_figure, nullptr},
    {"similarity", kSimilarityTitle, "Similarity between positions",
     "heatmap of PE(p) . PE(q) for every pair of positions (default 100 positions, d 128)", 100,
     similarity_figure, nullptr},
    {"wavelengths", kWavelengthTitle, "Wavelength per pair",
     "wavelength per pair (log) for plain RoPE and each scaling method, L marked", 0, nullptr,
     wavelength_figure},
    {"yarn-ramp", kYarnRampTitle, "YaRN's interpolation weight",
     "YaRN's interpolation weight: ramp over the pair index vs the paper's ramp over r = L/λ", 0,
     nullptr, yarn_ramp_figure},
    {"decay", kDecayTitle, "Long-term decay",
     "RoFormer §3.4.3 long-term decay bound vs relative distance, one curve per method (models of "
     "at most 2048 "
     "rotated pairs)",
     0, nullptr, decay_figure},
    {"attention-factor", kAttentionFactorTitle, "Attention factor",
     "attention factor vs scale factor s in [1, 64]: YaRN, DeepSeek, LongRoPE", 0, nullptr,
     attention_factor_figure},
    {"axis-map", kAxisMapTitle, "M-RoPE axis map",
     "M-RoPE models: which position axis (t, h, w) each frequency slot reads, with each slot's "
     "wavelength",
     0, nullptr, axis_map_figure, multi_axis_only},
    {"mrope-positions", kMropePositionsTitle, "M-RoPE positions of an image",
     "M-RoPE models: the t/h/w position ids of an image inside a text against the token index", 0,
     nullptr, mrope_positions_figure, multi_axis_only},
};

}  // namespace

std::span<const FigureKind> figure_kinds() { return kKinds; }

const FigureKind* find_figure_kind(std::string_view name) {
  for (const FigureKind& k : kKinds) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

}  // namespace posenc::figures
