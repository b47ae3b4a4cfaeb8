// `posenc presets [--json]`: the built-in models (presets.h), with what each one's RoPE does.
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "posenc/io/extend.h"
#include "posenc/io/presets.h"

namespace posenc::cli {
namespace {

void run_presets(bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Preset& p : presets()) {
      const ModelConfig c = load_preset(p.name);
      const RopeSpec& s = c.spec;
      out.push_back({{"name", p.name},
                     {"model_type", c.model_type},
                     {"rope_type", method_name(s)},
                     {"factor", s.factor},
                     {"context", reachable_context(s)},
                     {"original_max_position_embeddings", s.original_max_position_embeddings},
                     {"max_position_embeddings", s.max_position_embeddings},
                     {"head_dim", s.head_dim},
                     {"rotary_dim", s.rotary_dim},
                     {"layout", std::string(layout_name(s.layout))},
                     {"rope_theta", s.rope_theta},
                     {"source", p.source},
                     {"description", p.description},
                     {"note", p.note},
                     {"warnings", c.warnings},
                     {"config", nlohmann::json::parse(p.json)}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{:<26} {:<12} {:>6} {:>8}  {}\n", "name", "rope_type", "factor", "context", "source");
  for (const Preset& p : presets()) {
    const RopeSpec s = load_preset(p.name).spec;
    fmt::print("{:<26} {:<12} {:>6} {:>8}  {}\n", p.name, method_name(s),
               fmt::format("{:g}", s.factor), reachable_context(s), p.source);
  }
  fmt::print(
      "\ncontext: max_position_embeddings, or factor × original context where that is larger and "
      "the\n"
      "factor is the extension ratio (the Qwen cards' YaRN blocks leave max_position_embeddings "
      "low).\n"
      "Use a preset with --preset NAME; `posenc presets --json` adds each one's config, how its "
      "values\n"
      "were checked, and the warnings it gives.\n");
}

}  // namespace

void add_presets(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "presets",
      "List the built-in models (--preset NAME): RoPE method, factor, context, and the published "
      "config.json each one copies.");
  cmd->add_flag("--json", *json,
                "Print a JSON array with each preset's config, source notes and warnings");
  cmd->callback([json] { run_presets(*json); });
}

}  // namespace posenc::cli
