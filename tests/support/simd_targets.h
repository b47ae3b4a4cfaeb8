// tests/support/simd_targets.h: running a test body on every SIMD target this machine supports,
// and Highway-style awkward sizes around a target's lane count (test-only).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/rope/targets.h"

namespace posenc_test {

// Runs `body(target_name)` once per SIMD target this CPU supports, with that target forced (every
// posenc kernel: RoPE and the Llama forward's), and checks that forcing took; restores the default.
template <typename Body>
void ForEachTarget(Body body) {
  int ran = 0;
  for (const posenc::SimdTarget& t : posenc::simd_targets()) {
    if (!t.supported) continue;
    posenc::force_simd_target(t.name);
    ASSERT_EQ(posenc::active_simd_target(), t.name) << "forcing did not take";
    std::printf("[  TARGET  ] %s\n", t.name.c_str());
    SCOPED_TRACE("target " + t.name);
    body(t.name);
    ++ran;
  }
  posenc::force_simd_target("");
  EXPECT_GE(ran, 1);
}

// float32 lanes of a full vector on `target` (x86 and Arm names; 16 when not known, which only
// makes the sizes below less awkward for that target).
inline std::int64_t FloatLanes(const std::string& target) {
  if (target.rfind("AVX3", 0) == 0) return 16;
  if (target == "AVX2") return 8;
  if (target == "SSSE3" || target == "SSE4" || target == "NEON" || target == "EMU128") return 4;
  if (target == "SCALAR") return 1;
  return 16;
}

// Highway-style sizes around the lane count N: 1, 3, N/2, N-1, N, N+1, 2N-1, 2N+1, 3N + N/2.
inline std::vector<std::int64_t> AwkwardCounts(std::int64_t lanes) {
  std::vector<std::int64_t> out;
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{3}, lanes / 2, lanes - 1, lanes, lanes + 1,
                         2 * lanes - 1, 2 * lanes + 1, 3 * lanes + lanes / 2}) {
    if (n >= 1 && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

}  // namespace posenc_test
