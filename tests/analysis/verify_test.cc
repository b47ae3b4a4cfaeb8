// posenc verify: every claim holds at the defaults, the headline numbers match direct formulas
// written here, and bad options are refused by name.
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>

#include <gtest/gtest.h>

#include "posenc/analysis/verify.h"
#include "posenc/core/error.h"
#include "support/cli_runner.h"

namespace {

const posenc::ClaimResult& Find(const std::vector<posenc::ClaimResult>& results,
                                const std::string& id) {
  for (const auto& r : results) {
    if (r.id == id) return r;
  }
  throw std::runtime_error("no claim " + id);
}

TEST(Verify, EveryClaimHoldsAtTheDefaults) {
  const auto results = posenc::verify_claims();
  EXPECT_GE(results.size(), 15u);
  for (const auto& r : results)
    EXPECT_TRUE(r.pass) << r.id << ": " << r.claim << " -- " << r.measured;
}

TEST(Verify, WavelengthRangeIsTheFormulasAndNotTheSeeds) {
  const auto results = posenc::verify_claims();
  const auto& w = Find(results, "wavelength-range");
  // Last pair of d_model 512: 2 pi 10000^(510/512) (Vaswani et al. 2017 §3.5), about 9646 x 2 pi.
  EXPECT_NEAR(w.value, 2 * std::numbers::pi * std::pow(10000.0, 510.0 / 512.0), 1e-9);
  EXPECT_NE(w.measured.find("wrong"), std::string::npos);
}

TEST(Verify, ConstantDimensionsCountMatchesADirectCount) {
  // Direct count with std::sin/std::cos (positions below 512 are exact to ~1e-13 either way).
  int flat = 0;
  for (int j = 0; j < 512; ++j) {
    const double w = std::pow(10000.0, -2.0 * (j / 2) / 512.0);
    double dev = 0;
    for (int p = 0; p < 512; ++p) {
      const double v = j % 2 == 0 ? std::sin(p * w) : std::cos(p * w);
      const double v0 = j % 2 == 0 ? 0.0 : 1.0;
      dev = std::max(dev, std::abs(v - v0));
    }
    flat += dev <= 0.01;
  }
  EXPECT_EQ(Find(posenc::verify_claims(), "q-constant-dims").value, flat);
  EXPECT_GT(flat, 0);
}

TEST(Verify, SmallerSetupsRunAndPass) {
  posenc::VerifyOptions o;
  o.d_model = 64;
  o.positions = 100;
  for (const auto& r : posenc::verify_claims(o)) EXPECT_TRUE(r.pass) << r.id << ": " << r.measured;
}

TEST(Verify, BadOptionsAreRefusedByName) {
  posenc::VerifyOptions o;
  o.d_model = 63;
  try {
    posenc::verify_claims(o);
    FAIL();
  } catch (const posenc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("d_model (63)"), std::string::npos) << e.what();
  }
  o.d_model = 64;
  o.positions = 1;
  try {
    posenc::verify_claims(o);
    FAIL();
  } catch (const posenc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("positions (1)"), std::string::npos) << e.what();
  }
}

#ifdef POSENC_CLI
TEST(VerifyCli, JsonAndExitStatus) {
  const posenc_cli::CliRun r = posenc_cli::run(POSENC_CLI, "verify --json", "posenc_verify_test");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"failed\": 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"unique-codes\""), std::string::npos);
  const posenc_cli::CliRun bad =
      posenc_cli::run(POSENC_CLI, "verify --d-model 7", "posenc_verify_test");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("7"), std::string::npos) << bad.err;
}
#endif

}  // namespace
