// When a call prefetches its tensors in software (src/rope/software_prefetch.h): the setting's
// values, the rule for each kind of row access on each kind of CPU, and the CPU test against
// /proc/cpuinfo on x86 Linux, read independently of cpuid. And which table rows the multi-axis
// gather prefetches (src/rope/rope_rows.h's gather_prefetches_axis).
#include <cstdint>
#include <fstream>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/core/mrope_positions.h"
#include "rope/kernels/rotate.h"
#include "rope/rope_rows.h"
#include "rope/software_prefetch.h"

namespace {

using posenc::detail::gather_prefetches_axis;
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

// [axes, tokens] positions, axis-major, as a Positions of int64.
posenc::Positions AxisMajor(const std::vector<std::int64_t>& p) {
  return std::span<const std::int64_t>(p);
}

// An axis' rows are prefetched where its positions span more than kCachedRowBytes of rows: for
// 64 pairs (512 bytes of cos and sin a row), more than 512 rows.
TEST(GatherPrefetch, OnlyAxesWhoseRowsOutgrowTheCacheArePrefetched) {
  constexpr std::int64_t kPairs = 64;
  ASSERT_EQ(posenc::detail::kCachedRowBytes / (2 * kPairs * 4), 512);
  // Qwen2-VL's ids for 32 text tokens, a 128 x 126 image (64 x 63 tokens after the 2 x 2 merge)
  // and 32 text tokens: t, h and w within [0, 127] each.
  const posenc::MropeVision qwen2{.model = posenc::MropeModel::kQwen2Vl};
  const posenc::MropePositions image =
      posenc::mrope_positions(posenc::parse_mrope_layout("text:32,image:1x128x126,text:32"), qwen2,
                              posenc::MropeRule::kHf45);
  ASSERT_EQ(image.tokens(), 4096);
  std::vector<std::int64_t> ids;
  for (const auto& axis : image.ids) ids.insert(ids.end(), axis.begin(), axis.end());
  for (std::int64_t a = 0; a < 3; ++a)
    EXPECT_FALSE(gather_prefetches_axis(AxisMajor(ids), 4096, a, kPairs)) << "image axis " << a;
  // [t, t / 64, t % 64] over 4096 tokens (bench/cases.h's mrope-prefill-q): only t moves on.
  std::vector<std::int64_t> grid(3 * 4096);
  for (std::int64_t t = 0; t < 4096; ++t) {
    grid[static_cast<std::size_t>(t)] = t;
    grid[static_cast<std::size_t>(4096 + t)] = t / 64;
    grid[static_cast<std::size_t>(2 * 4096 + t)] = t % 64;
  }
  EXPECT_TRUE(gather_prefetches_axis(AxisMajor(grid), 4096, 0, kPairs));
  EXPECT_FALSE(gather_prefetches_axis(AxisMajor(grid), 4096, 1, kPairs));
  EXPECT_FALSE(gather_prefetches_axis(AxisMajor(grid), 4096, 2, kPairs));
  // The edge, in any order and from any start: 512 rows stay, 513 do not; wider rows, fewer.
  const std::vector<std::int64_t> rows512{1000, 1511, 1200}, rows513{1512, 1000, 1200};
  EXPECT_FALSE(gather_prefetches_axis(AxisMajor(rows512), 3, 0, kPairs));
  EXPECT_TRUE(gather_prefetches_axis(AxisMajor(rows513), 3, 0, kPairs));
  EXPECT_TRUE(gather_prefetches_axis(AxisMajor(rows512), 3, 0, 4 * kPairs));
  // Positions anywhere in int64 (outside the table: computed), and int32 ones.
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const std::vector<std::int64_t> extremes{kMax, kMin, 0, kMin};
  EXPECT_TRUE(gather_prefetches_axis(AxisMajor(extremes), 2, 0, kPairs));
  EXPECT_TRUE(gather_prefetches_axis(AxisMajor(extremes), 2, 1, kPairs));
  const std::vector<std::int32_t> narrow{-5, 5, 7, 0};
  EXPECT_FALSE(gather_prefetches_axis(std::span<const std::int32_t>(narrow), 2, 0, kPairs));
  const std::vector<std::int32_t> wide{std::numeric_limits<std::int32_t>::min(), 0};
  EXPECT_TRUE(gather_prefetches_axis(std::span<const std::int32_t>(wide), 2, 0, kPairs));
  // No tokens: nothing to prefetch.
  EXPECT_FALSE(gather_prefetches_axis(AxisMajor({}), 0, 0, kPairs));
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
