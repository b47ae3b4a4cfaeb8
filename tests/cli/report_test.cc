// `posenc report` and `posenc plot` end to end: the report is one self-contained HTML file (no
// external resource of any kind), holds every figure, the per-pair table and the verify table;
// errors go to stderr with status 1.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/io/config.h"
#include "posenc/report/figures.h"
#include "support/cli_runner.h"

namespace {

using posenc_cli::CliRun;
using posenc_cli::slurp;

std::filesystem::path work_dir() {
  const auto dir =
      std::filesystem::temp_directory_path() / ("posenc_report_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "posenc_report_test");
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

// The default report, written once per test process.
const std::string& default_report() {
  static const std::string html = [] {
    const auto file = work_dir() / "report.html";
    const CliRun r = posenc("report -o " + file.string());
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("report: wrote"), std::string::npos)
        << "progress goes to stderr: " << r.err;
    EXPECT_EQ(r.out, "") << "nothing on stdout when writing a file";
    return slurp(file);
  }();
  return html;
}

TEST(Report, IsOneHtmlPage) {
  const std::string& h = default_report();
  ASSERT_FALSE(h.empty());
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count(h, "<html"), 1u);
  EXPECT_EQ(count(h, "</html>"), 1u);
  EXPECT_NE(h.find("<meta charset=\"utf-8\">"), std::string::npos);
}

TEST(Report, ReferencesNothingOutside) {
  const std::string& h = default_report();
  // The only URL is the SVG namespace name, which is an identifier, not a resource.
  const std::regex url("(https?:)?//[A-Za-z0-9.-]+\\.[A-Za-z]{2,}[^\"' <>)]*", std::regex::icase);
  for (auto it = std::sregex_iterator(h.begin(), h.end(), url); it != std::sregex_iterator();
       ++it) {
    EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg") << "external reference: " << it->str();
  }
  std::string lower = h;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* banned :
       {"<link", "<img", "<iframe", "<object", "<embed", "<script src", " src=", "@import",
        "@font-face", "url(", "href=\"http", "xlink:href", "<image"}) {
    EXPECT_EQ(lower.find(banned), std::string::npos) << banned;
  }
  // Every <script> is inline.
  EXPECT_EQ(count(lower, "<script>"), count(lower, "<script"));
  // Internal links only.
  const std::regex href("href=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(h.begin(), h.end(), href); it != std::sregex_iterator();
       ++it) {
    EXPECT_EQ((*it)[1].str().rfind("#", 0), 0u) << (*it)[1].str();
  }
}

TEST(Report, HasEveryFigure) {
  const std::string& h = default_report();
  namespace f = posenc::figures;
  for (std::string_view title : {f::kSinusoidalTitle, f::kSimilarityTitle, f::kWavelengthTitle,
                                 f::kYarnRampTitle, f::kDecayTitle, f::kAttentionFactorTitle}) {
    EXPECT_NE(h.find("<title>" + std::string(title)), std::string::npos) << title;
  }
  // The seed's two examples.
  EXPECT_NE(h.find("Sinusoidal positional encoding: 50 positions × 128 dims"), std::string::npos);
  EXPECT_NE(h.find("Sinusoidal positional encoding: 200 positions × 150 dims"), std::string::npos);
  EXPECT_NE(h.find("Wavelength per rotated pair: Llama 2 7B + YaRN ×16"), std::string::npos);
  EXPECT_EQ(count(h, "<svg "), 7u);
  EXPECT_EQ(count(h, "</svg>"), 7u);
  // Figures scale: each <svg> has a viewBox, and the stylesheet lets it shrink.
  EXPECT_EQ(count(h, "viewBox=\""), 7u);
  EXPECT_NE(h.find("max-width: 100%"), std::string::npos);
}

TEST(Report, ModelSummaryAndPairTable) {
  const std::string& h = default_report();
  EXPECT_NE(h.find("<th>rope_type</th><td>yarn</td>"), std::string::npos);
  EXPECT_NE(h.find("<th>factor</th><td>16</td>"), std::string::npos);
  EXPECT_NE(h.find("<th>original context L</th><td>4096</td>"), std::string::npos);
  EXPECT_NE(h.find("<th>attention factor</th><td>1.27725887222397"), std::string::npos);
  EXPECT_NE(h.find("<th>yarn correction range</th><td>20 .. 46"), std::string::npos);
  // Same columns as `posenc inspect`, one row per pair (64 for head_dim 128).
  EXPECT_NE(
      h.find("<th>pair</th><th>inv_freq</th><th>wavelength</th><th>r = L/λ₀</th><th>weight</th>"
             "<th>ratio</th><th>treatment</th>"),
      std::string::npos);
  const auto start = h.find("<table class=\"pairs\">");
  const auto end = h.find("</table>", start);
  ASSERT_NE(start, std::string::npos);
  const std::string table = h.substr(start, end - start);
  EXPECT_EQ(count(table, "<tr class="), 64u);
  // Pair 0 as inspect prints it: inv_freq 1, wavelength 2 pi, r = 4096 / 2 pi, kept.
  EXPECT_NE(
      table.find(
          "<td class=\"num\">0</td><td class=\"num\">1.0000000e+00</td><td class=\"num\">6.28</td>"
          "<td class=\"num\">652</td><td class=\"num\">0.000</td><td class=\"num\">1.000000</td>"
          "<td class=\"treat\">kept</td>"),
      std::string::npos);
  EXPECT_NE(table.find(">interpolated</td>"), std::string::npos);
  EXPECT_NE(table.find(">blended</td>"), std::string::npos);
}

TEST(Report, VerifyAndCompareSections) {
  const std::string& h = default_report();
  const auto start = h.find("<table class=\"verify\" id=\"verify-table\">");
  ASSERT_NE(start, std::string::npos);
  const std::string table = h.substr(start, h.find("</table>", start) - start);
  EXPECT_NE(table.find("<th>claim</th><th>measured</th><th>result</th>"), std::string::npos);
  EXPECT_GE(count(table, "<tr>"), 6u);
  EXPECT_GE(count(table, ">PASS</td>"), 5u);
  // The engines of engines.h, each with a verdict; Llama 2 + YaRN x16 is read alike by all.
  const auto cstart = h.find("<table class=\"compare\">");
  ASSERT_NE(cstart, std::string::npos);
  const std::string compare = h.substr(cstart, h.find("</table>", cstart) - cstart);
  for (const char* engine : {"transformers", "llama.cpp", "vllm", "precise"}) {
    EXPECT_NE(compare.find("<tr><td>" + std::string(engine) +
                           "</td><td class=\"verdict pass\">agrees</td>"),
              std::string::npos)
        << engine;
  }
}

TEST(Report, PrintAndSelfCheck) {
  const std::string& h = default_report();
  EXPECT_NE(h.find("@media print"), std::string::npos);
  EXPECT_NE(h.find("break-inside: avoid"), std::string::npos);
  EXPECT_NE(h.find("id=\"selfcheck\""), std::string::npos);
  EXPECT_NE(h.find("getBBox"), std::string::npos);
}

TEST(Report, Preset) {
  const auto file = work_dir() / "llama31.html";
  const CliRun r = posenc("report --preset llama-3.1-8b -o " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string h = slurp(file);
  EXPECT_NE(h.find("<title>posenc report: llama-3.1-8b</title>"), std::string::npos);
  EXPECT_NE(h.find("<th>rope_type</th><td>llama3</td>"), std::string::npos);
  EXPECT_NE(h.find("llama3 ×8 (model)"), std::string::npos);
}

// A config with no context at all: the pair table counts r over the context inspect assumes
// (kAssumedContext, 4096), as inspect does; it used to print "L = 0" and no r.
TEST(Report, PairTableContextAsInspect) {
  const auto config = work_dir() / "no_context.json";
  {
    std::ofstream(config)
        << R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32})";
  }
  const auto file = work_dir() / "no_context.html";
  const CliRun r = posenc("report " + config.string() + " -o " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string h = slurp(file);
  EXPECT_NE(h.find("over L = 4096;"), std::string::npos);
  const CliRun inspect = posenc("inspect " + config.string());
  ASSERT_EQ(inspect.status, 0) << inspect.err;
  // Pair 0: r = 4096 / 2 pi = 652 in both.
  EXPECT_NE(h.find("<td class=\"num\">652</td>"), std::string::npos);
  EXPECT_NE(inspect.out.find("652"), std::string::npos) << inspect.out;
}

TEST(Report, Errors) {
  const CliRun missing =
      posenc("report /nonexistent/config.json -o " + (work_dir() / "x.html").string());
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("posenc: error:"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.out, "");
  const CliRun no_output = posenc("report");
  EXPECT_EQ(no_output.status, 1);
  EXPECT_NE(no_output.err.find("-o"), std::string::npos) << no_output.err;
}

TEST(Plot, EveryKindWritesAnSvgFile) {
  for (const char* kind :
       {"sinusoidal", "similarity", "wavelengths", "yarn-ramp", "decay", "attention-factor"}) {
    const auto file = work_dir() / (std::string(kind) + ".svg");
    const CliRun r = posenc(std::string("plot ") + kind + " -o " + file.string());
    EXPECT_EQ(r.status, 0) << kind << ": " << r.err;
    const std::string svg = slurp(file);
    EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << kind;
  }
  const CliRun out = posenc("plot sinusoidal --positions 200 --d-model 150 -o -");
  EXPECT_EQ(out.status, 0) << out.err;
  EXPECT_NE(out.out.find("200 positions × 150 dims"), std::string::npos);
  const CliRun preset = posenc("plot wavelengths --preset llama-3.1-8b -o -");
  EXPECT_EQ(preset.status, 0) << preset.err;
  EXPECT_NE(preset.out.find("Wavelength per rotated pair: llama-3.1-8b"), std::string::npos);
}

TEST(Plot, HelpListsKinds) {
  const CliRun r = posenc("plot --help");
  EXPECT_EQ(r.status, 0);
  for (const char* kind :
       {"sinusoidal", "similarity", "wavelengths", "yarn-ramp", "decay", "attention-factor"}) {
    EXPECT_NE(r.out.find(kind), std::string::npos) << kind;
  }
}

// The kinds `posenc plot --help` lists and the figures of the report are figure_kinds().
TEST(Plot, HelpAndReportShowTheRegistry) {
  const CliRun r = posenc("plot --help");
  ASSERT_EQ(r.status, 0);
  const auto start = r.out.find("KIND is one of:\n");
  ASSERT_NE(start, std::string::npos) << r.out;
  std::istringstream lines(r.out.substr(start + 16));
  std::vector<std::string> listed;
  for (std::string line; std::getline(lines, line) && line.rfind("  ", 0) == 0 && line.size() > 2 &&
                         line[2] != ' ';) {
    listed.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  std::vector<std::string> registry, in_report;
  for (const posenc::figures::FigureKind& k : posenc::figures::figure_kinds()) {
    registry.emplace_back(k.name);
    // The default model (Llama 2 + YaRN) has one position axis: no M-RoPE figures.
    if (k.applies == nullptr) in_report.emplace_back(k.name);
    EXPECT_NE(r.out.find(std::string(k.name) + std::string(18 - k.name.size(), ' ') +
                         std::string(k.help)),
              std::string::npos)
        << k.name;
  }
  EXPECT_EQ(listed, registry) << r.out;
  const std::string& h = default_report();
  std::vector<std::string> ids;
  const std::regex figure_id("<figure id=\"fig-([a-z-]+?)(-50|-200)?\"");
  for (auto it = std::sregex_iterator(h.begin(), h.end(), figure_id); it != std::sregex_iterator();
       ++it) {
    if (ids.empty() || ids.back() != (*it)[1].str()) ids.push_back((*it)[1].str());
  }
  EXPECT_EQ(ids, in_report);
  for (const posenc::figures::FigureKind& k : posenc::figures::figure_kinds()) {
    if (k.applies != nullptr) continue;
    std::string heading(k.heading);
    for (auto at = heading.find('\''); at != std::string::npos; at = heading.find('\'', at))
      heading.replace(at, 1, "&apos;");
    EXPECT_NE(h.find("aria-label=\"" + heading), std::string::npos) << k.heading;
  }
}

// Qwen/Qwen2.5-VL-7B-Instruct config.json (its RoPE and vision keys).
std::string qwen25_vl_config() {
  const auto file = work_dir() / "qwen2.5-vl-7b.json";
  std::ofstream(file) << R"({"model_type": "qwen2_5_vl", "hidden_size": 3584,
      "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 128000,
      "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
      "vision_config": {"spatial_merge_size": 2, "tokens_per_second": 2}})";
  return file.string();
}

// The M-RoPE kinds: drawn for a VL model (in plot and in its report), refused for a one-axis one.
TEST(Plot, MropeFiguresForAVlModelOnly) {
  namespace f = posenc::figures;
  const std::string vl = qwen25_vl_config();
  for (const char* kind : {"axis-map", "mrope-positions"}) {
    const CliRun r = posenc(std::string("plot ") + kind + " " + vl + " -o -");
    EXPECT_EQ(r.status, 0) << kind << ": " << r.err;
    EXPECT_EQ(r.out.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << kind;
    const CliRun llama = posenc(std::string("plot ") + kind + " --preset llama-2-7b -o -");
    EXPECT_EQ(llama.status, 1) << kind;
    EXPECT_NE(llama.err.find("one position axis"), std::string::npos) << llama.err;
    EXPECT_NE(llama.err.find(kind), std::string::npos) << llama.err;
  }
  const auto file = work_dir() / "vl-report.html";
  const CliRun r = posenc("report " + vl + " -o " + file.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string h = slurp(file);
  for (std::string_view title : {f::kAxisMapTitle, f::kMropePositionsTitle}) {
    EXPECT_NE(h.find("<title>" + std::string(title)), std::string::npos) << title;
  }
  EXPECT_EQ(default_report().find("<title>" + std::string(f::kAxisMapTitle)), std::string::npos);
}

TEST(Plot, Errors) {
  const auto file = (work_dir() / "e.svg").string();
  const CliRun unknown = posenc("plot heatmap -o " + file);
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("KIND (\"heatmap\") must be one of sinusoidal, similarity"),
            std::string::npos)
      << unknown.err;
  const CliRun wrong_flag = posenc("plot wavelengths --positions 10 -o " + file);
  EXPECT_EQ(wrong_flag.status, 1);
  EXPECT_NE(wrong_flag.err.find("--positions"), std::string::npos) << wrong_flag.err;
  const CliRun model_for_sinusoidal = posenc("plot sinusoidal --preset llama-2-7b -o " + file);
  EXPECT_EQ(model_for_sinusoidal.status, 1);
  const CliRun odd = posenc("plot sinusoidal --d-model 7 -o " + file);
  EXPECT_EQ(odd.status, 1);
  EXPECT_NE(odd.err.find("d_model (7)"), std::string::npos) << odd.err;
  const CliRun no_output = posenc("plot decay");
  EXPECT_EQ(no_output.status, 1);
  const CliRun no_kind = posenc("plot -o " + file);
  EXPECT_EQ(no_kind.status, 1);
}

TEST(Plot, ExampleConfigIsTheDefaultModel) {
  // examples/configs/llama-2-7b-yarn16.json is the model plot and report use by default.
  const auto spec = posenc::load_hf_config(std::string(POSENC_SOURCE_DIR) +
                                           "/examples/configs/llama-2-7b-yarn16.json")
                        .spec;
  EXPECT_EQ(spec.method, posenc::Method::kYarn);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.rotary_dim, 128);
  EXPECT_EQ(spec.rope_theta, 10000.0);
  EXPECT_EQ(spec.factor, 16.0);
  EXPECT_EQ(spec.original_max_position_embeddings, 4096);
  EXPECT_EQ(spec.max_position_embeddings, 65536);
  const std::string file =
      std::string(POSENC_SOURCE_DIR) + "/examples/configs/llama-2-7b-yarn16.json";
  const CliRun from_file = posenc("plot yarn-ramp " + file + " -o -");
  const CliRun by_default = posenc("plot yarn-ramp -o -");
  ASSERT_EQ(from_file.status, 0) << from_file.err;
  ASSERT_EQ(by_default.status, 0) << by_default.err;
  // The same figure but for the name in the title.
  auto strip_title = [](std::string s) {
    s = std::regex_replace(s, std::regex("YaRN interpolation weight: [^<]*"), "");
    return s;
  };
  EXPECT_EQ(strip_title(from_file.out), strip_title(by_default.out));
}

}  // namespace
