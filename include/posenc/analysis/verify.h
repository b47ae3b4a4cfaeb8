// posenc/analysis/verify.h: the seed document's claims about positional encodings, each measured.
//
// The tutorial this project grew from (docs/design.md §7) teaches the sinusoidal encoding through
// claims: unique codes, distances independent of position and sequence length, bounded values,
// determinism, generalisation, the wavelength range, the shift matrix T(delta), and that
// attention without an encoding cannot see order. It ends with open questions. verify_claims()
// turns each into a number and a verdict; RoPE's relative-position property and what each
// scaling method does to attention logits are checked the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace posenc {

// The largest inputs verify_claims takes. The pairwise checks cost positions² · d_model and the
// shift matrices d_model² · positions (measured, Release, one core: 4096 positions at d_model
// 512 took 12.6 s, 4096 x 2048 61 s). Within these limits the slowest corners take about 4 s:
// 2048 x 512 3.3 s, 1024 x 1024 3.9 s (the default 512 x 512: 0.6 s).
inline constexpr std::int64_t kMaxVerifyPositions = 2048;
inline constexpr std::int64_t kMaxVerifyDModel = 1024;
inline constexpr std::int64_t kMaxVerifyCells = std::int64_t{1} << 20;  // positions * d_model

struct VerifyOptions {
  std::int64_t d_model = 512;     // sinusoidal encoding width (even)
  std::int64_t positions = 512;   // N: positions "seen"
  std::uint64_t seed = 20240917;  // random inputs (attention, RoPE dot products)
};

struct ClaimResult {
  std::string id;         // short stable name, e.g. "unique-codes"
  std::string claim;      // the claim, in words
  std::string measured;   // what was measured, with numbers
  double value = 0.0;     // the headline number
  bool pass = true;       // false: the claim does not hold as measured
  bool question = false;  // an open question of the seed: a measurement, always "pass"
};

// Runs every measurement. Throws Error naming the option when d_model is not even or outside
// [4, kMaxVerifyDModel], positions is outside [2, kMaxVerifyPositions], or positions * d_model
// exceeds kMaxVerifyCells.
std::vector<ClaimResult> verify_claims(const VerifyOptions& options = {});

}  // namespace posenc
