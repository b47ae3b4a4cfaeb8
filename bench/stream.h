// bench/stream.h: the in-place streaming roofline of the benchmarks: every element of a buffer
// read, scaled and written back in place, one SIMD pass (Highway, the RoPE kernels' targets,
// their f16/bf16 lane conversions), in the buffer's own dtype, with the kernels' software
// prefetch or without it. Any in-place op over the same bytes (RoPE included) can at best match
// the faster of the two (bench/timing.h times both); docs/benchmarks.md says why memcpy is not
// that bound.
#pragma once

#include <cstdint>

#include "posenc/rope/tensor.h"

namespace posenc::bench {

// x[i] <- x[i] * scale for i in [0, count), in place; f16/bf16 widened to float32 and rounded back
// to nearest even like the kernels' stores. Runs on the target posenc's kernels dispatch to.
// prefetch: each vector's lines are prefetched as the kernels prefetch theirs (rotate.h's
// prefetch_ahead, 8 KiB ahead); without it only the hardware prefetches. Which is faster depends
// on the machine (docs/benchmarks.md, "Why the in-place stream is the roofline").
void stream_scale(void* data, DType dtype, std::int64_t count, float scale, bool prefetch);

// The fused append's memory traffic with no RoPE and no conversion: the limit of any kernel that
// rotates q in place and writes k and v into a KV cache, which is not an in-place op (its cache
// rows are other memory). Per token t: q_elements of q scaled in place (stream_scale's pass), then
// k's and v's rows written as cache_row_bytes into the key and value cache at byte offset
// cache_offsets[t]: copied for a cache of the input's dtype, or for a one-byte cache (fp8) of a
// two-byte input each element's high byte (a narrowing with no rounding, cheaper than any
// conversion), with streaming stores where streaming is true (as the fused kernel does for
// appends of 4 MiB or more) and plain stores otherwise.
struct AppendStream {
  void* q = nullptr;  // token 0's q
  const void* k = nullptr;
  const void* v = nullptr;
  DType dtype = DType::kF32;
  std::int64_t tokens = 0;
  std::int64_t token_stride_bytes = 0;  // between tokens' q (and k, v) rows
  std::int64_t q_elements = 0;          // per token, contiguous
  void* key_cache = nullptr;
  void* value_cache = nullptr;
  const std::int64_t* cache_offsets = nullptr;  // [tokens], bytes
  std::int64_t cache_row_bytes = 0;             // per token, contiguous
  bool narrow = false;                          // cache rows of one byte per two-byte input element
  bool streaming = true;
  bool prefetch = true;  // the kernels' software prefetch of q, k and v (stream_scale's)
};

void stream_append(const AppendStream& a);

}  // namespace posenc::bench
