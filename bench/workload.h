// bench/workload.h: the buffers and inputs of one (shape, dtype), and the three things timed on
// them: the kernel (posenc::apply_rope), a memcpy of the tensor, and a plain scalar rotation.
//
// Buffers are allocated once, 64-byte aligned, and filled (so every page is touched) before any
// timing. Every call then rotates the same tensor in place again: the timings are warm-cache
// timings, and what "warm" buys depends on the size. A decode tensor (32 x 128 f32 = 16 KiB) stays
// in L1/L2 between calls; a full prefill (4096 x 32 x 128 f32 = 64 MiB) is larger than the L3
// cache, so each call streams it from memory and measures memory bandwidth.
//
// Baselines:
//   copy()           memcpy(tensor -> second buffer): the tensor read once and written once,
//                    the same byte count as the in-place rotation (bytes_moved()).
//   stream(prefetch) the tensor scaled in place by one SIMD pass (stream.h): the same bytes, the
//                    same in-place traffic and the same dtype conversions, without the rotation;
//                    with the kernels' software prefetch or without (timing.h takes the faster).
//   rotate_scalar()  the same rotation, one element at a time, float32 math, cos/sin read from
//                    precomputed float32 rows (also for on-the-fly cases: the baseline is the
//                    rotation only), dtype conversions by scalar bit recipes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cases.h"
#include "posenc/core/frequencies.h"
#include "posenc/rope/table.h"
#include "posenc/rope/tensor.h"

namespace posenc::bench {

class Workload {
 public:
  Workload(const Shape& shape, DType dtype);

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  std::size_t tensor_bytes() const { return bytes_; }

  // The kernel under test: apply_rope forward, in place, with or without the table.
  int rotate(bool use_table, int threads);  // returns the threads that ran (apply_rope)
  // memcpy baseline: the tensor copied once into the second buffer.
  void copy();
  // Streaming roofline (stream.h): the tensor read, scaled by -1 and written back in place, with
  // or without the kernels' software prefetch.
  void stream(bool prefetch);
  // Scalar baseline: the same rotation, in place, one pair at a time.
  void rotate_scalar();

  // Copies the tensor, rotates the original with the kernel and the copy with the scalar loop,
  // and returns the largest |kernel - scalar| over all elements (compared in float32).
  double max_difference(bool use_table, int threads);
  // What max_difference may be: 8 units of the storage type's epsilon at magnitude 1 (values stay
  // within sqrt(2): each pair starts in [-1, 1]^2 and a rotation keeps its norm). Kernel and
  // scalar loop may each round the float32 result once differently (FMA or not), a unit or two.
  double tolerance() const;

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  using Buffer = std::unique_ptr<std::byte, FreeDeleter>;
  static Buffer allocate(std::size_t bytes);

  Shape shape_;
  DType dtype_;
  std::size_t bytes_ = 0;
  std::vector<std::int64_t> positions_;
  Frequencies freqs_;
  std::unique_ptr<CosSinTable> table_;
  std::vector<float> cos_rows_;  // [tokens, head_dim / 2], for the scalar loop
  std::vector<float> sin_rows_;
  Buffer data_;  // the tensor, rotated in place
  Buffer copy_;  // memcpy destination; the scalar side of max_difference
};

}  // namespace posenc::bench
