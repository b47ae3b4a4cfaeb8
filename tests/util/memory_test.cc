// util/huge_page_arena.h and util/aligned_allocator.h: alignment, bump order, exhaustion.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "util/aligned_allocator.h"
#include "util/huge_page_arena.h"

namespace posenc::detail {
namespace {

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(HugePageArena, HandsOutAlignedDisjointBlocksInOrder) {
  HugePageArena arena(std::size_t{1} << 20);
  ASSERT_EQ(arena.capacity(), std::size_t{1} << 20);
  float* a = arena.floats(10);  // 40 bytes, rounded up to one 64-byte line
  float* b = arena.floats(17);  // 68 bytes: two lines
  float* c = arena.floats(1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(address(a) % 64, 0u);
  EXPECT_EQ(address(b), address(a) + 64);
  EXPECT_EQ(address(c), address(b) + 128);
  EXPECT_EQ(arena.used(), 64u + 128u + 64u);
  // Writable, and the blocks do not overlap.
  for (int i = 0; i < 10; ++i) a[i] = 1.0f;
  for (int i = 0; i < 17; ++i) b[i] = 2.0f;
  c[0] = 3.0f;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a[i], 1.0f);
  for (int i = 0; i < 17; ++i) EXPECT_EQ(b[i], 2.0f);
  EXPECT_EQ(c[0], 3.0f);
}

TEST(HugePageArena, RefusesWhatDoesNotFitAndKeepsItsCount) {
  HugePageArena arena(4096);
  ASSERT_NE(arena.floats(1000), nullptr);  // 4000 bytes -> 4032
  EXPECT_EQ(arena.used(), 4032u);
  EXPECT_EQ(arena.floats(17), nullptr);  // 128 bytes: only 64 left
  EXPECT_EQ(arena.used(), 4032u);
  EXPECT_NE(arena.floats(16), nullptr);  // exactly the last line
  EXPECT_EQ(arena.used(), 4096u);
  EXPECT_EQ(arena.floats(1), nullptr);
}

TEST(HugePageArena, AnEmptyReservationHandsOutNothing) {
  HugePageArena arena(0);
  EXPECT_EQ(arena.capacity(), 0u);
  EXPECT_EQ(arena.floats(1), nullptr);
}

TEST(CacheLineAllocator, VectorsStartOnACacheLine) {
  for (std::size_t n : {1u, 3u, 17u, 1000u, 300000u}) {
    std::vector<float, CacheLineAllocator<float>> v(n, 1.5f);
    EXPECT_EQ(address(v.data()) % kCacheLine, 0u) << n;
    EXPECT_EQ(v.back(), 1.5f);
  }
}

}  // namespace
}  // namespace posenc::detail
