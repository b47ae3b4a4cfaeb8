// `posenc doctor MODEL`: the known pitfalls of a model's RoPE across engines
// (posenc/analysis/doctor.h). Findings are advice, not failures: the exit status is 0 whatever they
// say, 1 on bad input.
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "model_source.h"
#include "options.h"
#include "output.h"
#include "posenc/analysis/doctor.h"
#include "posenc/core/mrope_positions.h"
#include "posenc/io/config.h"
#include "posenc/io/presets.h"
#include "posenc/io/vision_config.h"
#include "posenc/report/json.h"

namespace posenc::cli {
namespace {

struct CliDoctorOptions {
  ModelSourceOptions model;
  std::string layout;
  bool json = false;
};

// The M-RoPE checks read the vision settings of a VL config.json or preset (its vision_config); a
// GGUF file gets transformers' defaults for its model_type.
DoctorOptions doctor_options(const CliDoctorOptions& o, const ModelConfig& config) {
  DoctorOptions d;
  if (!o.layout.empty()) d.layout = parse_mrope_layout(o.layout);
  if (!mrope_model_for_type(config.model_type)) return d;
  const std::filesystem::path path(o.model.path);
  std::optional<VisionConfig> vision;
  if (const Preset* preset = o.model.preset.empty() ? nullptr : find_preset(o.model.preset)) {
    vision = parse_vision_config(preset->json, "preset " + preset->name);
  } else if (!o.model.path.empty() && path.extension() == ".json") {
    vision = load_vision_config(path);
  }
  if (vision) {
    warn_all(vision->warnings);
    d.vision = vision->vision;
  }
  return d;
}

void run_doctor(const CliDoctorOptions& o) {
  const ModelConfig config = load_model_source(o.model);
  const DoctorOptions options = doctor_options(o, config);
  if (o.json) {
    std::cout << doctor_json(config, options) << "\n";
    return;
  }
  const std::vector<Finding> findings = diagnose(config, options);
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
  auto opts = std::make_shared<CliDoctorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check a model's RoPE against the known pitfalls across transformers, llama.cpp and vLLM "
      "(integer or inconsistent factor, missing original context, attention factor rules, "
      "truncate, "
      "partial rotary dims, dynamic methods under a KV cache, LongRoPE's switch, fp16/bf16 "
      "cos/sin; for M-RoPE models the bf16 cos/sin cache, the hf-4.5 / hf-5.3 position rules, "
      "truncated second_per_grid_ts, YaRN with M-RoPE and llama.cpp's IMROPE fourth axis), "
      "each with the numbers for this model and what to do. Exit status 0 even with findings; 1 on "
      "bad input.");
  add_model_source_options(cmd, opts->model);
  add_text(cmd, "--layout", opts->layout,
           "For a VL model: the prompt the M-RoPE position checks use, as mrope-positions takes "
           "it (default text:16,image:1x28x28,text:8,video:16x28x28@2,text:8)",
           "LAYOUT");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of text");
  cmd->callback([opts] { run_doctor(*opts); });
}

}  // namespace posenc::cli
