// `posenc verify`: the seed document's claims, one line each, measured.
#include <iostream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "options.h"
#include "posenc/analysis/verify.h"

namespace posenc::cli {
namespace {

struct VerifyCliOptions {
  VerifyOptions verify;
  bool json = false;
};

int run_verify(const VerifyCliOptions& o) {
  std::cerr << "verify: measuring "
            << "the seed's claims (d_model " << o.verify.d_model << ", " << o.verify.positions
            << " positions)...\n";
  const std::vector<ClaimResult> results = verify_claims(o.verify);
  int failed = 0;
  for (const ClaimResult& r : results) failed += !r.pass;
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const ClaimResult& r : results) {
      j.push_back({{"id", r.id},
                   {"claim", r.claim},
                   {"measured", r.measured},
                   {"value", r.value},
                   {"result", r.question ? "MEASURED" : (r.pass ? "PASS" : "FAIL")}});
    }
    std::cout << nlohmann::json{{"d_model", o.verify.d_model},
                                {"positions", o.verify.positions},
                                {"claims", j},
                                {"failed", failed}}
                     .dump(2)
              << "\n";
  } else {
    for (const ClaimResult& r : results) {
      fmt::print("{:<8} {}\n         {}\n", r.question ? "MEASURED" : (r.pass ? "PASS" : "FAIL"),
                 r.claim, r.measured);
    }
    fmt::print("\n{} claims checked, {} failed\n", results.size(), failed);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

void add_verify(CLI::App& app) {
  auto opts = std::make_shared<VerifyCliOptions>();
  CLI::App* cmd = app.add_subcommand("verify",
                                     "Measure each claim of the seed document about positional "
                                     "encodings (unique codes, distances, bounds, "
                                     "determinism, generalisation, wavelengths, the shift matrix "
                                     "T(Δ), attention and word order, RoPE's relative "
                                     "property, what each scaling method does to attention) and "
                                     "its open questions. Exits 1 if a claim fails.");
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min(),
                         kMax = std::numeric_limits<std::int64_t>::max();
  add_integer(
      cmd, "--d-model", opts->verify.d_model, kMin, kMax,
      "Width of the sinusoidal encoding (even, 4 to " + std::to_string(kMaxVerifyDModel) + ")")
      ->capture_default_str();
  add_integer(cmd, "--positions", opts->verify.positions, kMin, kMax,
              "Number of positions seen (2 to " + std::to_string(kMaxVerifyPositions) +
                  "; positions x d-model at most " + std::to_string(kMaxVerifyCells) + ")")
      ->capture_default_str();
  add_integer(cmd, "--seed", opts->verify.seed, std::uint64_t{0},
              std::numeric_limits<std::uint64_t>::max(), "Seed of the random inputs")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the lines");
  cmd->callback([opts] {
    const int status = run_verify(*opts);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace posenc::cli
