// bench/fused_workload.h: the buffers of one fused case (cases.h: a fused shape, input dtype and
// cache dtype) and what is timed on them:
//   fused()     rope_append_kv_cache: q rotated in place, k rotated and v converted into a vLLM
//               cache (block_size 16) through slot_mapping, one call
//   separate()  rotate-then-copy, what an engine does without the fusion: apply_rope on q and k
//               in place, then rope_append_kv_cache with rotate = false (the same SIMD conversion
//               and copy, a second pass over k)
//   copy()      memcpy of bytes_moved() / 2 bytes (read once, written once: the case's bytes)
//   append_stream(prefetch)  the fused call's bytes moved as it moves them (q in place, k and v
//               into the cache rows) by a pass with no arithmetic: the limit for a fused kernel
//   stream(prefetch)  the in-place streaming roofline (stream.h) over bytes_moved() / 2 bytes of
//               the input dtype: the same traffic as the fused call, in one in-place pass
// Both streams run with the kernels' software prefetch or without it; timing.h takes the faster.
// q, k, v are views of one packed qkv buffer [tokens, (Hq + 2 Hkv) * head_dim], as engines hold
// them. Prefill writes slots 0 .. tokens - 1; decode tokens land in scattered blocks, one each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cases.h"
#include "posenc/core/frequencies.h"
#include "posenc/rope/kv_cache.h"
#include "posenc/rope/table.h"

namespace posenc::bench {

class FusedWorkload {
 public:
  explicit FusedWorkload(const Case& c);

  const Case& fused_case() const { return case_; }

  int fused(int threads);  // the threads that ran
  void separate(int threads);
  void copy();
  void stream(bool prefetch);
  // stream_append (stream.h) over this case's q, k, v and cache: the fused call's memory traffic
  // without its arithmetic, the limit of any fused kernel on this machine.
  void append_stream(bool prefetch);
  // Runs fused() and separate() from the same k and returns how many cache bytes differ (0: the
  // fused cache is rotate-then-copy's, bit for bit). Leaves k as it was.
  std::size_t cache_mismatches(int threads);

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  using Buffer = std::unique_ptr<std::byte, FreeDeleter>;
  static Buffer allocate(std::size_t bytes);
  KvAppendArgs args(bool rotate, int threads) const;

  Case case_;
  Frequencies freqs_;
  std::unique_ptr<CosSinTable> table_;
  std::vector<std::int64_t> positions_;
  std::vector<std::int64_t> slots_;
  std::vector<std::int64_t> cache_offsets_;  // bytes, per token: slot * the cache's token row
  std::size_t qkv_bytes_ = 0, cache_bytes_ = 0, stream_bytes_ = 0;
  Buffer qkv_, key_cache_, value_cache_, stream_, copy_;
  TensorView q_, k_, v_;
  KvCache cache_;
};

}  // namespace posenc::bench
