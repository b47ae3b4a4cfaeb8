// When a call prefetches its tensors in software (src/rope/software_prefetch.h): the setting's
// values, the rule for each kind of row access on each kind of CPU, and the CPU test against
// /proc/cpuinfo, read independently of cpuid.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "rope/kernels/rotate.h"
#include "rope/software_prefetch.h"

namespace {

using posenc::detail::RowAccess;
using posenc::detail::software_prefetch;
using posenc::detail::software_prefetch_from;
using posenc::detail::SoftwarePrefetch;

TEST(SoftwarePrefetch, SettingTakesOnOffAutoAndRefusesAnythingElse) {
  EXPECT_EQ(software_prefetch_from(nullptr), SoftwarePrefetch::kAuto);
  EXPECT_EQ(software_prefetch_from(""), SoftwarePrefetch::kAuto);
  EXPECT_EQ(software_prefetch_from("auto"), SoftwarePrefetch::kAuto);
  EXPECT_EQ(software_prefetch_from("on"), SoftwarePrefetch::kOn);
  EXPECT_EQ(software_prefetch_from("off"), SoftwarePrefetch::kOff);
  for (const char* bad : {"On", "1", "yes", "off ", "sometimes"}) {
    try {
      software_prefetch_from(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const posenc::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("POSENC_SOFTWARE_PREFETCH"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("on, off or auto"), std::string::npos) << what;
    }
  }
}

TEST(SoftwarePrefetch, SmallCallsNeverPrefetchLargeOnesByTheSettingAndTheCpu) {
  const std::int64_t small = posenc::detail::kPrefetchMinBytes - 1;
  const std::int64_t large = posenc::detail::kPrefetchMinBytes;
  for (RowAccess access : {RowAccess::kPartial, RowAccess::kWholeOther, RowAccess::kWhole}) {
    for (bool zen4 : {false, true}) {
      for (int threads : {1, 2, 8}) {
        const std::string what = std::to_string(static_cast<int>(access)) + " zen4 " +
                                 std::to_string(zen4) + " threads " + std::to_string(threads);
        for (SoftwarePrefetch mode :
             {SoftwarePrefetch::kAuto, SoftwarePrefetch::kOn, SoftwarePrefetch::kOff}) {
          EXPECT_FALSE(software_prefetch(small, access, threads, mode, zen4)) << what;
        }
        EXPECT_TRUE(software_prefetch(large, access, threads, SoftwarePrefetch::kOn, zen4)) << what;
        EXPECT_FALSE(software_prefetch(large, access, threads, SoftwarePrefetch::kOff, zen4))
            << what;
        // auto: everywhere but whole rows on one thread of a CPU whose hardware prefetchers
        // serve them better.
        EXPECT_EQ(software_prefetch(large, access, threads, SoftwarePrefetch::kAuto, zen4),
                  !(zen4 && access == RowAccess::kWhole && threads == 1))
            << what;
      }
    }
  }
}

// cpuid's answer against the kernel's: vendor AuthenticAMD, "cpu family" 25 (0x19) and the
// avx512f flag. Linux only (elsewhere there is no /proc/cpuinfo to read).
TEST(SoftwarePrefetch, CpuTestAgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line, vendor, family, flags;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id" && vendor.empty()) vendor = value;
    if (key == "cpu family" && family.empty()) family = value;
    if (key == "flags" && flags.empty()) flags = " " + value + " ";
  }
  if (vendor.empty() || family.empty()) GTEST_SKIP() << "no x86 vendor or family in /proc/cpuinfo";
  const bool zen4 =
      vendor == "AuthenticAMD" && family == "25" && flags.find(" avx512f ") != std::string::npos;
  EXPECT_EQ(posenc::detail::cpu_prefers_hardware_prefetch(), zen4)
      << vendor << " family " << family;
}

}  // namespace
