// When a call prefetches its tensors in software (src/rope/software_prefetch.h): the setting's
// values, the rule for each kind of row access on each kind of CPU, and the CPU test against
// /proc/cpuinfo on x86 Linux, read independently of cpuid. And which table rows the multi-axis
// gather prefetches (src/rope/rope_rows.h's gather_prefetches_rows, CosSinRows).
#include <cstdint>
#include <fstream>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/mrope_positions.h"
#include "posenc/core/spec.h"
#include "posenc/rope/table.h"
#include "rope/kernels/rotate.h"
#include "rope/rope_rows.h"
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

// An axis' rows are prefetched where its gathered tokens' positions span more than
// kCachedRowBytes of rows: for 64 pairs (512 bytes of cos and sin a row), more than 512 rows.
TEST(GatherPrefetch, RowsArePrefetchedWhereTheirSpanOutgrowsTheCache) {
  using posenc::detail::gather_prefetches_rows;
  constexpr std::int64_t kPairs = 64;
  ASSERT_EQ(posenc::detail::kCachedRowBytes / (2 * kPairs * 4), 512);
  EXPECT_FALSE(gather_prefetches_rows(1000, 1511, kPairs));  // 512 rows
  EXPECT_TRUE(gather_prefetches_rows(1000, 1512, kPairs));   // 513
  EXPECT_TRUE(gather_prefetches_rows(1000, 1511, 4 * kPairs));
  EXPECT_FALSE(gather_prefetches_rows(7, 7, kPairs));
  // Any int64 (hi - lo does not fit in one), and no tokens at all (lo > hi).
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  EXPECT_TRUE(gather_prefetches_rows(kMin, kMax, kPairs));
  EXPECT_TRUE(gather_prefetches_rows(kMin, 0, kPairs));
  EXPECT_FALSE(gather_prefetches_rows(kMax, kMin, kPairs));
  EXPECT_FALSE(gather_prefetches_rows(0, 100, 0));
}

// Which axes a call's gather prefetches (CosSinRows::prefetched_axes), from the positions of the
// tokens it gathers: Qwen2-VL's sections and Qwen3-VL's interleaved map (slot by slot), 4096-row
// tables.
TEST(GatherPrefetch, CallsPrefetchOnlyTheAxesTheirImageTokensMoveOn) {
  const std::int64_t sections[] = {16, 24, 24};
  const std::int64_t qwen3[] = {24, 20, 20};
  for (const posenc::AxisMap& map :
       {posenc::mrope_sections(sections), posenc::mrope_interleaved(qwen3)}) {
    posenc::RopeSpec spec;
    spec.head_dim = spec.rotary_dim = 128;
    spec.axis_map = map;
    const posenc::Frequencies f = posenc::compute_frequencies(spec);
    const posenc::CosSinTable table(f, 4096);
    const auto prefetched = [&](const std::vector<std::int64_t>& p, bool with_table = true) {
      const std::int64_t tokens = static_cast<std::int64_t>(p.size()) / 3;
      const posenc::detail::CosSinRows rows(f, std::span<const std::int64_t>(p), tokens,
                                            with_table ? &table : nullptr);
      return rows.prefetched_axes();
    };
    const auto ids = [](std::string_view layout) {
      const posenc::MropePositions m = posenc::mrope_positions(
          posenc::parse_mrope_layout(layout), {.model = posenc::MropeModel::kQwen2Vl},
          posenc::MropeRule::kHf45);
      std::vector<std::int64_t> p;
      for (const auto& axis : m.ids) p.insert(p.end(), axis.begin(), axis.end());
      return p;
    };
    const std::string what = std::string(posenc::axis_rule_name(map.rule));
    // A 128 x 126-patch image (64 x 63 tokens) between text: its t, h and w span 64 rows or
    // fewer, however long the text around it (text reads its rows in place).
    EXPECT_EQ(prefetched(ids("text:32,image:1x128x126,text:32")), 0u) << what;
    EXPECT_EQ(prefetched(ids("text:2000,image:1x128x126,text:64")), 0u) << what;
    // Two images 1500 positions apart: each axis spans more than 512 rows.
    EXPECT_EQ(prefetched(ids("image:1x128x126,text:1500,image:1x128x126")), 0b111u) << what;
    // [t, t / 64, t % 64]: t moves on with every token, h and w stay within 64 rows.
    std::vector<std::int64_t> grid(3 * 4096);
    for (std::int64_t t = 0; t < 4096; ++t) {
      grid[static_cast<std::size_t>(t)] = t;
      grid[static_cast<std::size_t>(4096 + t)] = t / 64;
      grid[static_cast<std::size_t>(2 * 4096 + t)] = t % 64;
    }
    EXPECT_EQ(prefetched(grid), 0b001u) << what;
    // Nothing is gathered: text only, no table, or every image token past the table (computed).
    std::vector<std::int64_t> text(3 * 4096);
    for (std::int64_t t = 0; t < 4096; ++t) {
      for (std::int64_t a = 0; a < 3; ++a) text[static_cast<std::size_t>(a * 4096 + t)] = t;
    }
    EXPECT_EQ(prefetched(text), 0u) << what;
    EXPECT_EQ(prefetched(grid, /*with_table=*/false), 0u) << what;
    std::vector<std::int64_t> past = grid;
    for (std::int64_t t = 1; t < 4096; ++t) past[static_cast<std::size_t>(t)] = 5000 + t;
    EXPECT_EQ(prefetched(past), 0u) << what;
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
