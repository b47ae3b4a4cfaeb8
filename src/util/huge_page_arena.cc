#include "util/huge_page_arena.h"

#include <sys/mman.h>

namespace posenc::detail {

HugePageArena::HugePageArena(std::size_t bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;  // floats() then returns nullptr: the caller does without
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);  // advice: without huge pages the arena still works
#endif
  base_ = static_cast<char*>(p);
  capacity_ = bytes;
}

HugePageArena::~HugePageArena() {
  if (base_ != nullptr) munmap(base_, capacity_);
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
