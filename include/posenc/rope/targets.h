// posenc/rope/targets.h: the SIMD targets the kernels were compiled for, and which one runs.
//
// The kernels are compiled once per target (Google Highway: SSSE3, SSE4, AVX2, AVX3 on x86;
// NEON, SVE on Arm; SCALAR everywhere) and dispatched at run time to the best one this CPU
// supports. AVX3_BF16 is AVX3 plus AVX-512 BF16's float32 -> bf16 conversion instruction for the
// bf16 rotation (Highway 1.0.3 has no target for it), and where the CPU also has AVX-512 VBMI its
// byte permutes for bf16 and f16 into fp8 caches; it is listed, chosen and forced like the others,
// and forcing AVX3 runs AVX3 without either. Every target gives the same bits (FMA targets among
// themselves; SSE4, SSSE3 and SCALAR round the two products of a pair apart). Set the environment
// variable POSENC_SIMD_TARGET to a target name (e.g. AVX2) before the first kernel call, or call
// force_simd_target(), to run a specific one (tests, benchmarks). Either applies to every posenc
// kernel: the RoPE kernels and the Llama forward's (matmul, attention).
//
// Thread safety: the forced target is process-global state (Highway's target mask). Forcing
// changes what every posenc kernel dispatches to in every thread; call force_simd_target only
// while no other thread runs posenc kernels (e.g. at start-up). simd_targets() and
// active_simd_target() only read it.
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

// Restricts dispatch of every posenc kernel to the named target (any case: "avx2" is AVX2). Throws
// Error naming the value and the supported targets when it is not compiled in or not supported by
// this CPU.
// "" restores the default. Process-global; not safe while other threads run kernels (above).
void force_simd_target(const std::string& name);

// The environment variable POSENC_SOFTWARE_PREFETCH, read by the first call that moves 4 MiB or
// more: on or off forces the kernels' software prefetch of the rows ahead for such calls, auto
// (or unset) takes the library's rule per CPU (docs/kernels.md, "Software prefetch"); any other
// value makes those calls throw Error. The same bits either way. This text, for help screens:
inline constexpr const char* kSoftwarePrefetchSetting =
    "POSENC_SOFTWARE_PREFETCH=on|off|auto sets the kernels' software prefetch for tensors of 4 MiB "
    "or more (auto, the default: on, except for one-thread calls over whole f32 heads of up to "
    "128 dims and such fused appends on AMD Zen 4; docs/kernels.md).";

}  // namespace posenc
