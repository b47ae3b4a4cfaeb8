// `posenc compare MODEL`: one model's RoPE as transformers, llama.cpp and vLLM compute it, each
// set against the float64 formulas (posenc/analysis/engines.h, docs/engines.md).
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "model_source.h"
#include "options.h"
#include "posenc/analysis/engines.h"
#include "posenc/io/config.h"
#include "posenc/report/json.h"

namespace posenc::cli {
namespace {

struct CompareOptions {
  ModelSourceOptions model;
  std::vector<std::int64_t> positions;  // empty: the defaults of compare_engines
  std::int64_t seq_len = 0;
  bool json = false;
};

std::string cell(const EngineComparison& e, std::size_t i) {
  if (i >= e.view.freqs.inv_freq.size()) return fmt::format("{:>14} {:>8}", "-", "");
  const double d = i < e.relative_difference.size() ? e.relative_difference[i] : 0.0;
  const bool beyond = i < e.budget.size() && !(d <= e.budget[i]);  // NaN is beyond any budget
  return fmt::format("{:>14.7e} {:>8}", e.view.freqs.inv_freq[i],
                     e.view.engine == Engine::kPrecise
                         ? std::string()
                         : fmt::format("{:.1e}{}", d, beyond ? "*" : " "));
}

void print_table(const ModelConfig& config, const Comparison& c) {
  fmt::print("{}  ({}{})\n", config.source,
             config.model_type.empty() ? "unknown model_type" : config.model_type,
             ", " + method_name(c.spec));
  const ContextLengths ctx = context_lengths(c.spec);
  fmt::print("rope_theta {}  factor {}  rotary_dim {}  original context {}{}  seq_len {}\n\n",
             c.spec.rope_theta, c.spec.factor, c.spec.rotary_dim, ctx.original,
             ctx.assumed ? " (assumed: the config sets none)" : "",
             c.seq_len > 0 ? std::to_string(c.seq_len) : std::string("0 (at initialisation)"));
  fmt::print("{:>5}", "pair");
  for (const EngineComparison& e : c.engines)
    fmt::print(" {:>14} {:>8}", engine_name(e.view.engine), "rel.diff");
  fmt::print("\n");
  const std::size_t n = c.at(Engine::kPrecise).view.freqs.inv_freq.size();
  for (std::size_t i = 0; i < n; ++i) {
    fmt::print("{:>5}", i);
    for (const EngineComparison& e : c.engines) fmt::print(" {}", cell(e, i));
    fmt::print("\n");
  }
  fmt::print(
      "\nrel.diff = |inv_freq - precise| / precise; * = beyond the float32 rounding budget of that "
      "engine's arithmetic\n");
  for (const EngineComparison& e : c.engines) {
    fmt::print("\n{}{}\n", engine_name(e.view.engine),
               e.view.freqs.inv_freq.empty()
                   ? std::string()
                   : fmt::format(" ({} numerics)", numerics_name(e.view.freqs.numerics)));
    if (!e.view.freqs.inv_freq.empty()) {
      fmt::print("  attention factor          {:.10g}\n", e.view.attention_factor);
      fmt::print("  softmax-scale multiplier  {:.10g}\n", e.view.softmax_scale_multiplier);
      for (std::size_t k = 0; k < e.cos_sin_difference.size(); ++k) {
        fmt::print("  max |cos/sin - precise| at position {:>9}: {:.3e}\n", c.positions[k],
                   e.cos_sin_difference[k]);
      }
    }
    if (!e.view.supported) fmt::print("  not supported: {}\n", e.view.unsupported_reason);
    for (const auto& note : e.view.notes) fmt::print("  note: {}\n", note);
  }
  fmt::print("\nverdicts (against precise):\n");
  for (const EngineComparison& e : c.engines) {
    if (e.view.engine == Engine::kPrecise) continue;
    fmt::print("  {:<13} {}\n", engine_name(e.view.engine), e.verdict_text);
  }
}

void run_compare(const CompareOptions& o) {
  const ModelConfig config = load_model_source(o.model);
  check_seq_len_covers(o.seq_len, o.positions, "--seq-len", "--positions");
  if (o.json) {
    std::cout << compare_json(config, o.seq_len, o.positions) << "\n";
    return;
  }
  print_table(config, compare_engines(config.spec, o.seq_len, o.positions, config.model_type));
}

}  // namespace

void add_compare(CLI::App& app) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "One model's RoPE as transformers, llama.cpp and vLLM compute it: per-pair inv_freq and its "
      "difference from float64, attention factor, softmax multiplier, cos/sin differences at "
      "chosen "
      "positions, what each engine drops, and a verdict per engine.");
  add_model_source_options(cmd, opts->model);
  add_integers(cmd, "--positions", opts->positions, std::int64_t{0},
               std::numeric_limits<std::int64_t>::max(),
               "Comma-separated positions to compare cos/sin at (default: L-1, L, 4L, extended "
               "context - 1)");
  add_integer(cmd, "--seq-len", opts->seq_len, std::int64_t{0},
              std::numeric_limits<std::int64_t>::max(),
              "Sequence length (largest position + 1; for llama.cpp also the context size); 0 = at "
              "initialisation")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
  cmd->callback([opts] { run_compare(*opts); });
}

}  // namespace posenc::cli
