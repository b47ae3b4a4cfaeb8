// bench/stream.h: the in-place streaming roofline of the benchmarks: every element of a buffer
// read, scaled and written back in place, one SIMD pass (Highway, the RoPE kernels' targets,
// their f16/bf16 lane conversions and their software prefetch), in the buffer's own dtype. Any
// in-place op over the same bytes (RoPE included) can at best match it; docs/benchmarks.md says
// why memcpy is not that bound.
#pragma once

#include <cstdint>

#include "posenc/rope/tensor.h"

namespace posenc::bench {

// x[i] <- x[i] * scale for i in [0, count), in place; f16/bf16 widened to float32 and rounded back
// to nearest even like the kernels' stores. Runs on the target posenc's kernels dispatch to.
void stream_scale(void* data, DType dtype, std::int64_t count, float scale);

}  // namespace posenc::bench
