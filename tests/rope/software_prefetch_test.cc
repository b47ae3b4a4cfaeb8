// When a call prefetches its tensors in software (src/rope/software_prefetch.h): the setting's
// values, the rule for each kind of row access on each kind of CPU, and the CPU test against
// /proc/cpuinfo on x86 Linux, read independently of cpuid.
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
  for (RowAccess access : {RowAccess::kPartial, RowAccess::kWholeHalf, RowAccess::kWhole}) {
    for (bool zen4 : {false, true}) {
      for (int threads : {1, 2, 8}) {
        for (std::int64_t d : {std::int64_t{64}, std::int64_t{128}, std::int64_t{256}}) {
          const std::string what = std::to_string(static_cast<int>(access)) + " zen4 " +
                                   std::to_string(zen4) + " threads " + std::to_string(threads) +
                                   " head_dim " + std::to_string(d);
          for (SoftwarePrefetch mode :
               {SoftwarePrefetch::kAuto, SoftwarePrefetch::kOn, SoftwarePrefetch::kOff}) {
            EXPECT_FALSE(software_prefetch(small, access, d, threads, mode, zen4)) << what;
          }
          EXPECT_TRUE(software_prefetch(large, access, d, threads, SoftwarePrefetch::kOn, zen4))
              << what;
          EXPECT_FALSE(software_prefetch(large, access, d, threads, SoftwarePrefetch::kOff, zen4))
              << what;
          // auto: everywhere but whole rows of heads up to kHardwarePrefetchMaxDim dims on one
          // thread of a CPU whose hardware prefetchers serve them better.
          EXPECT_EQ(software_prefetch(large, access, d, threads, SoftwarePrefetch::kAuto, zen4),
                    !(zen4 && access == RowAccess::kWhole &&
                      d <= posenc::detail::kHardwarePrefetchMaxDim && threads == 1))
              << what;
        }
      }
    }
  }
}

#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
// cpuid's answer against the kernel's: vendor AuthenticAMD, "cpu family" 25 (0x19) and the
// avx512f flag. On x86 Linux, which has both to read.
TEST(SoftwarePrefetch, CpuTestAgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  ASSERT_TRUE(in) << "cannot read /proc/cpuinfo";
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
  ASSERT_FALSE(vendor.empty() || family.empty()) << "no vendor_id or cpu family in /proc/cpuinfo";
  const bool zen4 =
      vendor == "AuthenticAMD" && family == "25" && flags.find(" avx512f ") != std::string::npos;
  EXPECT_EQ(posenc::detail::cpu_prefers_hardware_prefetch(), zen4)
      << vendor << " family " << family;
}
#endif

}  // namespace
