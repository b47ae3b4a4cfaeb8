// src/util/aligned_allocator.h: a std::allocator that aligns to a cache line (internal).
//
// std::vector<T, CacheLineAllocator<T>> starts on a 64-byte boundary, so rows whose size is a
// multiple of 64 bytes start on one too: two threads that write different 64-byte slices of such
// rows never write the same cache line (llama/forward.cc's KV cache).
#pragma once

#include <cstddef>
#include <new>

namespace posenc::detail {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kCacheLine}));
  }
  void deallocate(T* p, std::size_t) noexcept {
    ::operator delete (p, std::align_val_t{kCacheLine});
  }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace posenc::detail
