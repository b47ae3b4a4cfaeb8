// `posenc plot KIND [MODEL] -o FILE.svg`: one figure of figures.h as an SVG file.
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "commands.h"
#include "default_model.h"
#include "options.h"
#include "output.h"
#include "posenc/core/error.h"
#include "posenc/core/sinusoidal.h"
#include "posenc/report/figures.h"

namespace posenc::cli {
namespace {

struct PlotOptions {
  std::string kind;
  ModelSourceOptions model;
  std::optional<std::int64_t> positions;
  std::optional<std::int64_t> d_model;
  std::optional<double> base;
  std::optional<std::string> layout;
  std::string output;
};

const figures::FigureKind& find_kind(std::string_view name) {
  if (const figures::FigureKind* kind = figures::find_figure_kind(name)) return *kind;
  std::string known;
  for (const figures::FigureKind& k : figures::figure_kinds())
    known += (known.empty() ? "" : ", ") + std::string(k.name);
  throw Error("plot: KIND (\"" + std::string(name) + "\") must be one of " + known);
}

std::string figure_for(const figures::FigureKind& kind, const PlotOptions& o) {
  const bool model_given = !o.model.path.empty() || !o.model.preset.empty() ||
                           !o.model.layer_type.empty() || !o.model.extend.empty();
  if (kind.is_sinusoidal()) {
    if (model_given) {
      throw Error(
          "plot " + std::string(kind.name) +
          ": the sinusoidal encoding takes no model; use --positions, --d-model, --base, --layout");
    }
    SinusoidalSpec spec;
    spec.d_model = o.d_model.value_or(128);
    spec.base = o.base.value_or(kDefaultRopeTheta);
    if (o.layout) spec.layout = parse_sinusoidal_layout(*o.layout, "--layout");
    return kind.sinusoidal(spec, o.positions.value_or(kind.default_positions));
  }
  for (const auto& [given, flag] :
       {std::pair{o.positions.has_value(), "--positions"},
        std::pair{o.d_model.has_value(), "--d-model"}, std::pair{o.base.has_value(), "--base"},
        std::pair{o.layout.has_value(), "--layout"}}) {
    if (given) {
      throw Error("plot " + std::string(kind.name) + ": " + flag +
                  " applies to the sinusoidal kinds only; this figure takes a model (CONFIG, GGUF "
                  "or --preset)");
    }
  }
  const ModelConfig config = load_model_or_default(o.model);
  warn_all(config.warnings);
  const std::string name = model_display_name(o.model, config);
  return kind.model(config.spec, name);
}

void run_plot(const PlotOptions& o) {
  if (o.kind.empty()) throw Error("plot: KIND is required (see `posenc plot --help`)");
  const figures::FigureKind& kind = find_kind(o.kind);
  if (o.output.empty()) throw Error("plot: -o FILE.svg is required (\"-o -\" writes to stdout)");
  const std::string svg = figure_for(kind, o);
  if (!write_output("-o", o.output, svg)) return;
  std::cerr << "posenc: wrote " << o.output << " (" << svg.size() << " bytes)\n";
}

}  // namespace

void add_plot(CLI::App& app) {
  auto opts = std::make_shared<PlotOptions>();
  std::string kinds = "KIND is one of:";
  for (const figures::FigureKind& k : figures::figure_kinds())
    kinds +=
        "\n  " + std::string(k.name) + std::string(18 - k.name.size(), ' ') + std::string(k.help);
  CLI::App* cmd = app.add_subcommand(
      "plot", "Draw one figure as an SVG file.\n" + kinds +
                  "\nThe model kinds default to Llama 2 7B extended 16x with YaRN "
                  "(examples/configs/llama-2-7b-yarn16.json).");
  add_text(cmd, "kind", opts->kind, "What to draw (see above)", "KIND");
  add_model_source_options(cmd, opts->model);
  add_text(cmd, "-o,--output", opts->output, "The SVG file to write (\"-\": stdout)", "PATH");
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min(),
                         kMax = std::numeric_limits<std::int64_t>::max();
  add_integer(
      cmd, "--positions", opts->positions, kMin, kMax,
      "sinusoidal, similarity: number of positions (default 50; 100 for similarity); at most " +
          std::to_string(figures::kMaxFigurePositions) +
          " (similarity: " + std::to_string(figures::kMaxSimilarityPositions) +
          "), and positions x d-model at most " + std::to_string(figures::kMaxFigureCells));
  add_integer(cmd, "--d-model", opts->d_model, kMin, kMax,
              "sinusoidal, similarity: encoding width, even (default 128)");
  add_number(cmd, "--base", opts->base, "sinusoidal, similarity: frequency base (default 10000)");
  add_text(cmd, "--layout", opts->layout,
           "sinusoidal, similarity: interleaved (the paper) or concatenated");
  cmd->callback([opts] { run_plot(*opts); });
}

}  // namespace posenc::cli
