// `posenc report [MODEL] -o report.html`: the HTML report of report.h for one model.
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "default_model.h"
#include "options.h"
#include "output.h"
#include "posenc/core/error.h"
#include "posenc/report/report.h"
#include "posenc/version.h"

namespace posenc::cli {
namespace {

struct ReportCliOptions {
  ModelSourceOptions model;
  std::string output;
};

void run_report(const ReportCliOptions& o) {
  if (o.output.empty()) throw Error("report: -o FILE.html is required (\"-o -\" writes to stdout)");
  ReportOptions r;
  r.config = load_model_or_default(o.model);
  r.model_name = model_display_name(o.model, r.config);
  r.generator = std::string("posenc ") + POSENC_VERSION_STRING;
  r.progress = [](std::string_view what) { std::cerr << "report: " << what << "\n"; };
  std::cerr << "report: model " << r.model_name << " (" << r.config.source << ")\n";
  warn_all(r.config.warnings);
  const std::string html = html_report(r);
  if (!write_output("-o", o.output, html)) return;
  std::cerr << "report: wrote " << o.output << " (" << html.size() << " bytes)\n";
}

}  // namespace

void add_report(CLI::App& app) {
  auto opts = std::make_shared<ReportCliOptions>();
  CLI::App* cmd =
      app.add_subcommand("report",
                         "Write one self-contained HTML page about a model's positional encoding: "
                         "the model summary, every "
                         "figure of `posenc plot`, the per-pair table of `posenc inspect`, the "
                         "engine comparison and the "
                         "results of `posenc verify`. Without a model: Llama 2 7B extended 16x "
                         "with YaRN. Models of at most "
                         "2048 rotated pairs (rotary_dim 4096), the decay figure's limit.");
  add_model_source_options(cmd, opts->model);
  add_text(cmd, "-o,--output", opts->output, "The HTML file to write (\"-\": stdout)", "PATH");
  cmd->callback([opts] { run_report(*opts); });
}

}  // namespace posenc::cli
