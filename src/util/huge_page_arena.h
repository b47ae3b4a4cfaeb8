// src/util/huge_page_arena.h: a bump allocator over address space reserved once and backed by
// transparent huge pages where the kernel gives them (internal).
//
// Why: on the guests this project is measured on, the first touch of a fresh 4 KiB page costs
// about 13 us (a page fault through the hypervisor), so 33 MiB of fresh memory costs over 0.1 s;
// with MADV_HUGEPAGE the kernel maps 2 MiB at a fault instead (docs/eval.md, "Dynamic methods on
// two threads"). Blocks are never freed one by one: the whole arena goes with its owner.
#pragma once

#include <cstddef>

namespace posenc::detail {

class HugePageArena {
 public:
  // Reserves `bytes` of address space (no memory is committed until written).
  explicit HugePageArena(std::size_t bytes);
  ~HugePageArena();
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // `count` floats, 64-byte aligned and uninitialised, or nullptr when the reservation is spent
  // (or could not be made).
  float* floats(std::size_t count);

  std::size_t used() const { return used_; }
  std::size_t capacity() const { return capacity_; }

 private:
  void* map_ = nullptr;  // the mapping; base_ is its first 2 MiB boundary
  std::size_t mapped_ = 0;
  char* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
};

}  // namespace posenc::detail
