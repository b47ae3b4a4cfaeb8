// SIMD target listing and forcing (targets.h), on top of Highway's target mask.
//
// Forcing uses hwy::DisableTargets, the knob Highway provides for programs: disabling every
// target but the chosen one leaves exactly that one (the CPU supports it), and the next
// HWY_DYNAMIC_DISPATCH of any kernel re-chooses. SetSupportedTargetsForTest, Highway's mock for
// its test loops, is not used.
#include "posenc/rope/targets.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

#include <hwy/highway.h>
#include <hwy/targets.h>

#include "posenc/core/error.h"
#include "rope/kernels/avx512_bf16.h"
#include "rope/kernels/rotate.h"

namespace posenc {
namespace {

// POSENC_SIMD_TARGET=avx2 means AVX2: target names are matched without regard to case.
bool same_name(const std::string& a, const char* b) {
  const std::size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// Every compiled target bit, best first (Highway numbers better targets with lower bits).
std::vector<std::int64_t> compiled_targets() {
  std::vector<std::int64_t> out;
  for (std::int64_t bits = HWY_TARGETS; bits != 0; bits &= bits - 1)
    out.push_back(bits & ~(bits - 1));
  return out;
}

// What the CPU supports, read before any forcing.
std::int64_t cpu_targets() {
  static const std::int64_t mask = [] {
    hwy::DisableTargets(0);
    return hwy::SupportedTargets();
  }();
  return mask;
}

// AVX3 with the AVX-512 BF16 extension (avx512_bf16.h) is listed and forced as a target of its
// own, named here; forcing "AVX3" runs the AVX3 code without the extension.
constexpr const char* kAvx3Bf16 = "AVX3_BF16";

bool is_avx3(std::int64_t target) {
#if HWY_ARCH_X86
  return target == HWY_AVX3;
#else
  (void)target;
  return false;
#endif
}

}  // namespace

namespace detail {

void ensure_simd_target_from_env() {
  // A function-local static, not std::call_once: after the first call this is one load and a
  // compare inline, where call_once went through pthread_once on every kernel call (about 3% of
  // a one-head apply_rope). An exception leaves it uninitialized, so the next call tries again,
  // as call_once did.
  static const bool done = [] {
    cpu_targets();
    if (const char* name = std::getenv("POSENC_SIMD_TARGET"); name && *name) {
      try {
        force_simd_target(name);
      } catch (const Error& e) {
        throw Error(std::string("POSENC_SIMD_TARGET: ") + e.what());
      }
    }
    return true;
  }();
  (void)done;
}

}  // namespace detail

std::vector<SimdTarget> simd_targets() {
  const std::string active = active_simd_target();
  std::vector<SimdTarget> out;
  for (std::int64_t t : compiled_targets()) {
    const bool supported = (cpu_targets() & t) != 0;
    if (is_avx3(t)) {
      out.push_back({kAvx3Bf16, supported && detail::avx512_bf16_supported(), active == kAvx3Bf16});
    }
    out.push_back({hwy::TargetName(t), supported, active == hwy::TargetName(t)});
  }
  return out;
}

std::string active_simd_target() {
  detail::ensure_simd_target_from_env();
  const std::string name = detail::active_target_name();
  return name == "AVX3" && detail::avx512_bf16_enabled() ? kAvx3Bf16 : name;
}

void force_simd_target(const std::string& name) {
  const std::int64_t cpu = cpu_targets();
  if (name.empty()) {
    hwy::DisableTargets(0);
    detail::set_avx512_bf16_enabled(true);
    return;
  }
  std::string known;
  for (std::int64_t t : compiled_targets()) {
    if ((cpu & t) == 0) continue;
    if (is_avx3(t) && detail::avx512_bf16_supported()) {
      if (same_name(name, kAvx3Bf16)) {
        hwy::DisableTargets(~t);
        detail::set_avx512_bf16_enabled(true);
        return;
      }
      known += (known.empty() ? "" : ", ") + std::string(kAvx3Bf16);
    }
    if (same_name(name, hwy::TargetName(t))) {
      hwy::DisableTargets(~t);
      detail::set_avx512_bf16_enabled(false);
      return;
    }
    known += (known.empty() ? "" : ", ") + std::string(hwy::TargetName(t));
  }
  throw Error("SIMD target (\"" + name + "\") is not one this build and CPU support (" + known +
              "; case does not matter)");
}

}  // namespace posenc
