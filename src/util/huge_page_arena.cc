#include "util/huge_page_arena.h"

#include <sys/mman.h>

#include <cstdint>

namespace posenc::detail {

HugePageArena::HugePageArena(std::size_t bytes) {
  if (bytes == 0) return;
  // 2 MiB more than asked, so that the arena can start on a huge-page boundary (the kernel maps
  // a huge page only where a whole aligned 2 MiB lies inside the advised range).
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const std::size_t mapped = bytes + kHuge;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;  // floats() then returns nullptr: the caller does without
  map_ = p;
  mapped_ = mapped;
  const auto start = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) / kHuge * kHuge;
  base_ = reinterpret_cast<char*>(start);
#ifdef MADV_HUGEPAGE
  madvise(base_, bytes, MADV_HUGEPAGE);  // advice: without huge pages the arena still works
#endif
  capacity_ = bytes;
}

HugePageArena::~HugePageArena() {
  if (map_ != nullptr) munmap(map_, mapped_);
}

float* HugePageArena::floats(std::size_t count) {
  constexpr std::size_t kAlign = 64;
  const std::size_t bytes = (count * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  if (base_ == nullptr || bytes > capacity_ - used_) return nullptr;
  float* p = reinterpret_cast<float*>(base_ + used_);
  used_ += bytes;
  return p;
}

}  // namespace posenc::detail
