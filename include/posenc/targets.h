// posenc/targets.h: the SIMD targets the kernels were compiled for, and which one runs.
//
// The kernels are compiled once per target (Google Highway: SSSE3, SSE4, AVX2, AVX3, AVX3_DL on
// x86; NEON, SVE, SVE2 on Arm) and dispatched at run time to the best one this CPU supports.
// Set the environment variable POSENC_SIMD_TARGET to a target name (e.g. AVX2) before the first
// kernel call, or call force_simd_target(), to run a specific one (tests, benchmarks).
#pragma once

#include <string>
#include <vector>

namespace posenc {

struct SimdTarget {
  std::string name;  // "AVX3", "AVX2", "SSE4", "NEON", ...
  bool supported;    // compiled and supported by this CPU
  bool active;       // the one the kernels dispatch to now
};

// Every target the kernels were compiled for, best first.
std::vector<SimdTarget> simd_targets();

// The name of the target the kernels dispatch to now.
std::string active_simd_target();

// Restricts dispatch to the named target (any case: "avx2" is AVX2). Throws Error naming the value and the supported
// targets when it is not compiled in or not supported by this CPU. "" restores the default.
void force_simd_target(const std::string& name);

}  // namespace posenc
