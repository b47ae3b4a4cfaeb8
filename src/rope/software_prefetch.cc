// The software prefetch rule of large calls (software_prefetch.h).
#include "rope/software_prefetch.h"

#include <cstdlib>
#include <string>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "posenc/core/error.h"
#include "posenc/rope/targets.h"
#include "rope/kernels/rotate.h"

namespace posenc::detail {

SoftwarePrefetch software_prefetch_from(const char* value) {
  const std::string_view v = value ? value : "";
  if (v.empty() || v == "auto") return SoftwarePrefetch::kAuto;
  if (v == "on") return SoftwarePrefetch::kOn;
  if (v == "off") return SoftwarePrefetch::kOff;
  throw Error("POSENC_SOFTWARE_PREFETCH: '" + std::string(v) +
              "' is not a setting; expected on, off or auto. " + kSoftwarePrefetchSetting);
}

bool cpu_prefers_hardware_prefetch() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  static const bool zen4 = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
    // "AuthenticAMD" in ebx, edx, ecx.
    const bool amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;
    if (!amd || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    const unsigned base = (eax >> 8) & 0xFu, extended = (eax >> 20) & 0xFFu;
    const unsigned family = base == 0xFu ? base + extended : base;
    return family == 0x19u && __builtin_cpu_supports("avx512f");
  }();
  return zen4;
#else
  return false;
#endif
}

bool software_prefetch(std::int64_t bytes, RowAccess access, std::int64_t head_dim, int threads,
                       SoftwarePrefetch mode, bool prefers_hardware) {
  if (bytes < kPrefetchMinBytes) return false;
  switch (mode) {
    case SoftwarePrefetch::kOn:
      return true;
    case SoftwarePrefetch::kOff:
      return false;
    case SoftwarePrefetch::kAuto:
      break;
  }
  return !(prefers_hardware && access == RowAccess::kWhole && head_dim <= kHardwarePrefetchMaxDim &&
           threads == 1);
}

bool software_prefetch(std::int64_t bytes, RowAccess access, std::int64_t head_dim, int threads) {
  if (bytes < kPrefetchMinBytes) return false;  // before the variable: decode steps stay cheap
  // Read once. A function-local static: an exception leaves it unset, so a bad value throws on
  // every call (as POSENC_SIMD_TARGET's, targets.cc).
  static const SoftwarePrefetch mode =
      software_prefetch_from(std::getenv("POSENC_SOFTWARE_PREFETCH"));
  return software_prefetch(bytes, access, head_dim, threads, mode, cpu_prefers_hardware_prefetch());
}

}  // namespace posenc::detail
