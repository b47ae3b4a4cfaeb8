// `posenc doctor MODEL`: the known pitfalls of a model's RoPE across engines
// (posenc/analysis/doctor.h). Findings are advice, not failures: the exit status is 0 whatever they
// say, 1 on bad input.
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "model_source.h"
#include "posenc/analysis/doctor.h"
#include "posenc/io/config.h"
#include "posenc/report/json.h"

namespace posenc::cli {
namespace {

struct DoctorOptions {
  ModelSourceOptions model;
  bool json = false;
};

void run_doctor(const DoctorOptions& o) {
  const ModelConfig config = load_model_source(o.model);
  if (o.json) {
    std::cout << doctor_json(config) << "\n";
    return;
  }
  const std::vector<Finding> findings = diagnose(config);
  const auto [errors, warnings, infos] = count_findings(findings);
  fmt::print("{}  ({}, {})\n", config.source,
             config.model_type.empty() ? "unknown model_type" : config.model_type,
             method_name(config.spec));
  for (const Finding& f : findings) {
    fmt::print("\n[{}] {}: {}\n  {}\n  what to do: {}\n", f.severity, f.id, f.title, f.detail,
               f.advice);
  }
  fmt::print("\n{} error{}, {} warning{}, {} info\n", errors, errors == 1 ? "" : "s", warnings,
             warnings == 1 ? "" : "s", infos);
}

}  // namespace

void add_doctor(CLI::App& app) {
  auto opts = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check a model's RoPE against the known pitfalls across transformers, llama.cpp and vLLM "
      "(integer or inconsistent factor, missing original context, attention factor rules, "
      "truncate, "
      "partial rotary dims, dynamic methods under a KV cache, LongRoPE's switch, fp16/bf16 "
      "cos/sin), "
      "each with the numbers for this model and what to do. Exit status 0 even with findings; 1 on "
      "bad input.");
  add_model_source_options(cmd, opts->model);
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of text");
  cmd->callback([opts] { run_doctor(*opts); });
}

}  // namespace posenc::cli
