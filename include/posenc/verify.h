// posenc/verify.h: the seed document's claims about positional encodings, each measured.
//
// The tutorial this project grew from (DESIGN.md §7) teaches the sinusoidal encoding through
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

struct VerifyOptions {
  std::int64_t d_model = 512;     // sinusoidal encoding width (even)
  std::int64_t positions = 512;   // N: positions "seen"
  std::uint64_t seed = 20240917;  // random inputs (attention, RoPE dot products)
};

struct ClaimResult {
  std::string id;        // short stable name, e.g. "unique-codes"
  std::string claim;     // the claim, in words
  std::string measured;  // what was measured, with numbers
  double value = 0.0;    // the headline number
  bool pass = true;      // false: the claim does not hold as measured
  bool question = false; // an open question of the seed: a measurement, always "pass"
};

// Runs every measurement. Throws Error naming the option when d_model is not even and >= 4 or
// positions < 2.
std::vector<ClaimResult> verify_claims(const VerifyOptions& options = {});

}  // namespace posenc
