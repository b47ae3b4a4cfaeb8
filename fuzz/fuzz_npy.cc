// fuzz/fuzz_npy.cc: libFuzzer target for the .npy reader (npy.h) that `posenc apply` uses.
//
// posenc::Error is the expected way to refuse input; a crash, a sanitizer report, an
// out-of-memory or any other exception is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "posenc/core/error.h"
#include "posenc/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const posenc::NpyArray a = posenc::parse_npy(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz.npy");
    // The shape must account for the data it claims.
    std::size_t count = 1;
    for (std::int64_t d : a.shape) count *= static_cast<std::size_t>(d);
    if (count * posenc::npy_item_size(a.descr) > a.data.size()) __builtin_trap();
  } catch (const posenc::Error&) {
  }
  return 0;
}
