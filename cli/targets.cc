// `posenc targets`: the SIMD targets the kernels were compiled for, and which one runs.
#include <cstdlib>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "posenc/rope/targets.h"

namespace posenc::cli {
namespace {

constexpr const char* kEnv = "POSENC_SIMD_TARGET";

void run_targets(bool json) {
  const std::vector<SimdTarget> targets =
      simd_targets();  // throws when the variable names no target
  const std::string active = active_simd_target();
  const char* forced = std::getenv(kEnv);
  const bool is_forced = forced != nullptr && *forced != '\0';
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const SimdTarget& t : targets) {
      list.push_back({{"name", t.name}, {"supported", t.supported}, {"active", t.active}});
    }
    nlohmann::json j{{"targets", std::move(list)}, {"active", active}};
    j["forced_by"] =
        is_forced ? nlohmann::json(std::string(kEnv) + "=" + forced) : nlohmann::json(nullptr);
    std::cout << j.dump(2) << "\n";
    return;
  }
  fmt::print("{:<10} {:<10} {}\n", "target", "supported", "active");
  for (const SimdTarget& t : targets) {
    fmt::print("{:<10} {:<10} {}\n", t.name, t.supported ? "yes" : "no", t.active ? "*" : "");
  }
  fmt::print("\nthe kernels run on {} ({})\n", active,
             is_forced ? fmt::format("forced by {}={}", kEnv, forced)
                       : fmt::format("the best this CPU supports; {}=NAME picks another", kEnv));
}

}  // namespace

void add_targets(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "targets",
      "List the SIMD targets the kernels were compiled for (best first), whether this CPU supports "
      "each, and "
      "which one runs. Set the environment variable POSENC_SIMD_TARGET=NAME (e.g. "
      "POSENC_SIMD_TARGET=AVX2) to "
      "run a specific supported target instead of the best one, in any posenc command.");
  cmd->add_flag("--json", *json, "Print one JSON object instead of the table");
  cmd->callback([json] { run_targets(*json); });
}

}  // namespace posenc::cli
