// The HTML report (report.h): figures.h's figures, the inspect table and verify's claims in one
// self-contained page.
#include "posenc/report/report.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>

#include "core/max_nan.h"
#include "posenc/analysis/engines.h"
#include "posenc/analysis/pairs.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/report/figures.h"
#include "posenc/report/svg.h"
#include "util/format.h"

namespace posenc {
namespace {

using detail::num;
using svg::xml_escape;

// Inline style: system fonts only (nothing is downloaded), a readable column, and print rules.
constexpr const char* kStyle = R"css(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #eef0f3; color: #1b1b1b;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif; }
main { max-width: 1000px; margin: 0 auto; padding: 28px 32px 56px; background: #ffffff; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 0 0 10px; padding-bottom: 4px; border-bottom: 2px solid #d7dbe0; }
h3 { font-size: 16px; margin: 22px 0 6px; }
p.lead { color: #444; margin-top: 0; }
section { margin-top: 36px; }
nav ol { columns: 2; margin: 8px 0 0; padding-left: 20px; }
a { color: #1f5fa8; }
figure { margin: 14px 0 26px; break-inside: avoid; page-break-inside: avoid; }
figure svg { display: block; width: 100%; max-width: 100%; height: auto; border: 1px solid #e1e4e8; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 9px; border-bottom: 1px solid #e1e4e8; vertical-align: top; }
th { background: #f4f6f8; text-align: left; font-weight: 600; }
td.num { text-align: right; white-space: nowrap; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
table.summary th { width: 16em; background: none; font-weight: 500; color: #444; }
tr.kept td.treat { color: #1f6f3a; } tr.interpolated td.treat { color: #8a3b12; } tr.blended td.treat { color: #6b4aa0; }
.verdict { font-weight: 700; white-space: nowrap; }
.pass { color: #17692c; } .fail { color: #b00020; } .measured { color: #555; }
ul.warnings li { color: #7a4b00; }
.note { color: #555; font-size: 14px; }
#selfcheck { color: #666; font-size: 12px; }
footer { margin-top: 40px; color: #666; font-size: 13px; }
@media (max-width: 700px) { main { padding: 16px 12px; } nav ol { columns: 1; } }
@media print {
  body, main, th { background: none !important; }
  main { max-width: none; padding: 0; }
  a { color: inherit; text-decoration: none; }
  nav, #selfcheck { display: none; }
  section { break-before: page; page-break-before: always; margin-top: 0; }
  figure, tr, table.summary { break-inside: avoid; page-break-inside: avoid; }
  figure svg { border: none; }
  thead { display: table-header-group; }
  .pass, .fail, .measured { color: #000; }
}
)css";

// Measures every figure once laid out; the browser test reads #selfcheck.
constexpr const char* kSelfCheck = R"js(
(function () {
  var figures = document.querySelectorAll("svg");
  var empty = [];
  for (var i = 0; i < figures.length; i++) {
    var box = figures[i].getBoundingClientRect();
    var content = figures[i].getBBox();
    if (!(box.width > 0 && box.height > 0 && content.width > 0 && content.height > 0)) empty.push(i + 1);
  }
  document.getElementById("selfcheck").textContent = "figures: " + figures.length + ", " +
      (empty.length === 0 ? "all non-zero" : "zero-size: " + empty.join(", "));
})();
)js";

void row(std::string& h, std::string_view key, const std::string& value) {
  h += "<tr><th>" + xml_escape(key) + "</th><td>" + xml_escape(value) + "</td></tr>\n";
}

std::string model_summary(const ReportOptions& o, const Frequencies& f,
                          const figures::Scenario& sc) {
  const RopeSpec& s = o.config.spec;
  std::string h = "<table class=\"summary\">\n";
  row(h, "source", o.config.source);
  row(h, "model_type", o.config.model_type.empty() ? "(not set)" : o.config.model_type);
  row(h, "rope_type", method_name(s));
  row(h, "head_dim", std::to_string(s.head_dim));
  row(h, "rotary_dim",
      std::to_string(s.rotary_dim) + " (" + std::string(layout_name(s.layout)) +
          (s.rotary_offset ? ", offset " + std::to_string(s.rotary_offset) : "") + ", " +
          std::to_string(pair_count(s)) + " pairs)");
  row(h, "rope_theta", num(s.rope_theta));
  row(h, "factor", num(s.factor));
  row(h, "original context L",
      s.original_max_position_embeddings > 0 ? std::to_string(s.original_max_position_embeddings)
                                             : "(not set)");
  row(h, "max_position_embeddings",
      s.max_position_embeddings > 0 ? std::to_string(s.max_position_embeddings) : "(not set)");
  row(h, "extended context", std::to_string(extended_context(s)));
  row(h, "attention factor", num(f.attention_factor) + " (multiplies cos and sin)");
  row(h, "softmax-scale multiplier", num(f.softmax_scale_multiplier));
  if (f.correction_low) {
    row(h, "yarn correction range",
        num(*f.correction_low) + " .. " + num(*f.correction_high) +
            " (pairs below keep ω, above get ω/s)");
  }
  if (s.method == Method::kNtk || s.method == Method::kDynamic || s.method == Method::kNtkAlpha)
    row(h, "base in effect", num(f.base));
  if (!o.config.layer_specs.empty()) {
    std::string names;
    for (const auto& [name, unused] : o.config.layer_specs)
      names += (names.empty() ? "" : ", ") + name;
    row(h, "layer types", names);
  }
  row(h, "figures compare methods at",
      "s = " + num(sc.factor) + ", L = " + std::to_string(sc.original_context) +
          ", extended context " + std::to_string(sc.extended_context));
  h += "</table>\n";
  if (o.config.warnings.empty()) {
    h += "<p class=\"note\">The config gives no warning.</p>\n";
  } else {
    h += "<h3>Warnings</h3>\n<ul class=\"warnings\">\n";
    for (const auto& w : o.config.warnings) h += "<li>" + xml_escape(w) + "</li>\n";
    h += "</ul>\n";
  }
  return h;
}

std::string pair_table(const RopeSpec& s, const Frequencies& f) {
  // r = L / lambda0 over the model's original context, by inspect's rule (context_lengths).
  const double context = static_cast<double>(context_lengths(s).original);
  std::string h =
      "<p class=\"note\">As <code>posenc inspect</code> prints it (precise numerics, at "
      "initialisation). "
      "wavelength = 2π/inv_freq in tokens; r = L/λ₀ = turns of the unscaled wavelength over L = " +
      num(context) +
      "; weight = how far the pair moved from ω towards ω/s (0 kept, 1 interpolated); ratio = "
      "inv_freq / ω.</p>\n"
      "<div class=\"table-wrap\"><table class=\"pairs\">\n<thead><tr><th>pair</th><th>inv_freq</th>"
      "<th>wavelength</th><th>r = "
      "L/λ₀</th><th>weight</th><th>ratio</th><th>treatment</th></tr></thead>\n<tbody>\n";
  auto cell = [](const std::optional<double>& v, std::string (*format)(double, int), int digits) {
    return v ? format(*v, digits) : std::string("-");
  };
  for (const PairRow& r : pair_rows(f, context)) {
    const std::string treatment(r.treatment);
    h += "<tr class=\"" + treatment + "\"><td class=\"num\">" + std::to_string(r.index) +
         "</td><td class=\"num\">" + detail::sci(r.inv_freq, 7) + "</td><td class=\"num\">" +
         cell(r.wavelength, detail::fixed, 2) + "</td><td class=\"num\">" +
         cell(r.rotations, detail::sig, 3) + "</td><td class=\"num\">" +
         detail::fixed(r.weight, 3) + "</td><td class=\"num\">" + cell(r.ratio, detail::fixed, 6) +
         "</td><td class=\"treat\">" + treatment + "</td></tr>\n";
  }
  h += "</tbody></table></div>\n";
  return h;
}

std::string compare_section(const ReportOptions& o) {
  if (!o.compare) return "<p class=\"note\">The engine comparison was not asked for.</p>\n";
  Comparison c;
  try {
    c = compare_engines(o.config.spec, 0, {}, o.config.model_type);
  } catch (const Error& e) {
    return "<p class=\"note\">The engines cannot be compared for this model: " +
           xml_escape(e.what()) + "</p>\n";
  }
  std::string positions;
  for (std::int64_t p : c.positions)
    positions += (positions.empty() ? "" : ", ") + std::to_string(p);
  std::string h =
      "<p class=\"note\">What each engine computes for this config, against the float64 formulas "
      "(<code>posenc compare</code>, at initialisation). inv_freq: the largest relative difference "
      "over pairs; "
      "cos/sin: the largest difference at positions " +
      xml_escape(positions) +
      ", attention factors included. \"agrees\" means float32 rounding explains every "
      "difference.</p>\n"
      "<div class=\"table-wrap\"><table "
      "class=\"compare\">\n<thead><tr><th>engine</th><th>verdict</th>"
      "<th>attention factor</th><th>softmax "
      "multiplier</th><th>inv_freq</th><th>cos/sin</th><th>details</th>"
      "</tr></thead>\n<tbody>\n";
  for (const EngineComparison& e : c.engines) {
    double cos_sin = 0;
    for (double d : e.cos_sin_difference) cos_sin = detail::max_nan(cos_sin, d);
    std::string details = e.verdict_text;
    for (const std::string& note : e.view.notes) details += "; " + note;
    const std::string verdict(verdict_name(e.verdict));
    const char* cls = e.verdict == Verdict::kAgrees    ? "pass"
                      : e.verdict == Verdict::kDiffers ? "fail"
                                                       : "measured";
    h += "<tr><td>" + xml_escape(engine_name(e.view.engine)) + "</td><td class=\"verdict " + cls +
         "\">" + xml_escape(verdict) + "</td><td class=\"num\">" +
         detail::sig(e.view.attention_factor, 10) + "</td><td class=\"num\">" +
         detail::sig(e.view.softmax_scale_multiplier, 10) + "</td><td class=\"num\">" +
         (e.view.engine == Engine::kPrecise ? std::string("reference")
                                            : detail::sci(e.max_relative_difference, 2)) +
         "</td><td class=\"num\">" +
         (e.view.engine == Engine::kPrecise ? std::string("reference") : detail::sci(cos_sin, 2)) +
         "</td><td>" + xml_escape(details) + "</td></tr>\n";
  }
  h += "</tbody></table></div>\n";
  return h;
}

std::string verify_section(const std::vector<ClaimResult>& results, const VerifyOptions& v) {
  int failed = 0;
  for (const auto& r : results) failed += !r.pass;
  std::string h =
      "<p class=\"note\">The seed document's claims and open questions, each measured by "
      "<code>posenc verify</code> (sinusoidal encoding d_model " +
      std::to_string(v.d_model) + ", " + std::to_string(v.positions) +
      " positions): " + std::to_string(results.size()) + " rows, " + std::to_string(failed) +
      " failed.</p>\n";
  h += "<div class=\"table-wrap\"><table class=\"verify\" "
       "id=\"verify-table\">\n<thead><tr><th>claim</th>"
       "<th>measured</th><th>result</th></tr></thead>\n<tbody>\n";
  for (const auto& r : results) {
    const char* verdict = r.question ? "MEASURED" : r.pass ? "PASS" : "FAIL";
    const char* cls = r.question ? "measured" : r.pass ? "pass" : "fail";
    h += "<tr><td>" + xml_escape(r.claim) + "</td><td>" + xml_escape(r.measured) +
         "</td><td class=\"verdict " + cls + "\">" + verdict + "</td></tr>\n";
  }
  h += "</tbody></table></div>\n";
  return h;
}

}  // namespace

std::string html_report(const ReportOptions& o) {
  auto progress = [&](std::string_view what) {
    if (o.progress) o.progress(what);
  };
  const RopeSpec& spec = o.config.spec;
  validate(spec);
  if (pair_count(spec) >
      figures::kMaxDecayPairs) {  // before any work: the decay figure would refuse it
    throw Error("report: rotary_dim / 2 (" + std::to_string(pair_count(spec)) +
                " pairs; head_dim " + std::to_string(spec.head_dim) + ", rotary_dim " +
                std::to_string(spec.rotary_dim) + ") must be at most " +
                std::to_string(figures::kMaxDecayPairs) + " pairs, the decay figure's limit");
  }
  const Frequencies f = compute_frequencies(spec, Numerics::kPrecise);
  const figures::Scenario sc = figures::scenario_of(spec);

  struct Fig {
    std::string id;
    std::string heading;
    std::string note;
    std::string svg;
  };
  std::vector<Fig> figs;
  std::size_t sinusoidal_count = 0;  // the sinusoidal kinds come first in figure_kinds()
  for (const figures::FigureKind& kind : figures::figure_kinds()) {
    if (!kind.is_sinusoidal() && !kind.applies_to(spec)) continue;  // M-RoPE kinds: VL models
    const std::string name(kind.name);
    if (kind.name == "sinusoidal") {
      // The seed document's two examples: 50 inputs x 128 dims and 200 inputs x 150 dims.
      for (const auto& [positions, d_model, which] :
           {std::tuple{std::int64_t{50}, std::int64_t{128}, "first"},
            std::tuple{std::int64_t{200}, std::int64_t{150}, "second"}}) {
        const std::string size = std::to_string(positions) + " x " + std::to_string(d_model);
        progress("figure: " + name + " " + size);
        figs.push_back({"fig-" + name + "-" + std::to_string(positions),
                        std::string(kind.heading) + ", " + std::to_string(positions) +
                            " positions × " + std::to_string(d_model) + " dims",
                        std::string("The seed document's ") + which +
                            " example: " + std::to_string(positions) + " inputs (positions), " +
                            std::to_string(d_model) + " dimensions.",
                        kind.sinusoidal(SinusoidalSpec{d_model}, positions)});
      }
    } else {
      progress("figure: " + name);
      figs.push_back({"fig-" + name, std::string(kind.heading), "",
                      kind.is_sinusoidal()
                          ? kind.sinusoidal(SinusoidalSpec{128}, kind.default_positions)
                          : kind.model(spec, o.model_name)});
    }
    if (kind.is_sinusoidal()) sinusoidal_count = figs.size();
  }
  progress("verify: measuring the seed's claims");
  const std::vector<ClaimResult> claims = verify_claims(o.verify);

  std::string h;
  h.reserve(1 << 20);
  const std::string title = "posenc report: " + o.model_name;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
       xml_escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<main>\n";
  h += "<header>\n<h1>" + xml_escape(title) + "</h1>\n<p class=\"lead\">" +
       xml_escape(method_name(spec)) + " RoPE from " + xml_escape(o.config.source) +
       ": what it does to each rotated pair, how it compares with the other scaling methods, and "
       "the seed "
       "document's claims about positional encodings, measured.</p>\n"
       "<p id=\"selfcheck\">figures: not measured (the page's script did not run)</p>\n"
       "<nav><strong>Contents</strong><ol>\n"
       "<li><a href=\"#model\">Model</a></li>\n<li><a href=\"#figures-sinusoidal\">Sinusoidal "
       "encoding</a></li>\n"
       "<li><a href=\"#figures-rope\">RoPE and its scaling methods</a></li>\n"
       "<li><a href=\"#pairs\">Per-pair table</a></li>\n<li><a href=\"#compare\">Engines "
       "compared</a></li>\n"
       "<li><a href=\"#verify\">The seed's claims, verified</a></li>\n</ol></nav>\n</header>\n";
  h += "<section id=\"model\">\n<h2>Model</h2>\n" + model_summary(o, f, sc) + "</section>\n";
  auto emit = [&](std::size_t first, std::size_t last) {
    for (std::size_t k = first; k < last; ++k) {
      if (!figs[k].note.empty()) h += "<p class=\"note\">" + xml_escape(figs[k].note) + "</p>\n";
      h += "<figure id=\"" + figs[k].id + "\" aria-label=\"" + xml_escape(figs[k].heading) +
           "\">\n" + figs[k].svg + "</figure>\n";
    }
  };
  h += "<section id=\"figures-sinusoidal\">\n<h2>The sinusoidal encoding</h2>\n";
  emit(0, sinusoidal_count);
  h += "</section>\n<section id=\"figures-rope\">\n<h2>RoPE and its scaling methods</h2>\n";
  emit(sinusoidal_count, figs.size());
  h += "</section>\n";
  progress("table: per-pair frequencies");
  h += "<section id=\"pairs\">\n<h2>Per-pair table</h2>\n" + pair_table(spec, f) + "</section>\n";
  h +=
      "<section id=\"compare\">\n<h2>Engines compared</h2>\n" + compare_section(o) + "</section>\n";
  h += "<section id=\"verify\">\n<h2>The seed's claims, verified</h2>\n" +
       verify_section(claims, o.verify) + "</section>\n";
  h += "<footer>Generated by " + xml_escape(o.generator) +
       ". Self-contained: inline styles and figures, no external "
       "resources.</footer>\n</main>\n<script>" +
       kSelfCheck + "</script>\n</body>\n</html>\n";
  return h;
}

}  // namespace posenc
