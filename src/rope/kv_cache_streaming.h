// src/rope/kv_cache_streaming.h: when rope_append_kv_cache writes the cache rows with streaming
// stores (internal).
//
// A prefill's cache rows are not read again by the call that writes them, and at prefill sizes
// they could not stay in a core's L2 anyway: appends that write at least stream_cache_bytes() of
// cache (k and v rows together) store them with streaming (non-temporal) stores. Decode appends
// keep plain stores, so their rows stay cached for the attention that reads them next.
#pragma once

#include <cstdint>

namespace posenc::detail {

// 4 MiB: twice a large core's L2; a decode step of 64 tokens of Llama 2 7B in f32 writes 2 MiB.
inline constexpr std::int64_t kDefaultStreamCacheBytes = std::int64_t{4} << 20;

// The threshold now: kDefaultStreamCacheBytes unless set_stream_cache_bytes changed it.
std::int64_t stream_cache_bytes();

// Sets the threshold (>= 1; a smaller value is refused with posenc::Error). For tests: the
// streaming paths on appends of a few hundred KiB instead of 4 MiB, which under the sanitizers
// took minutes. Not for concurrent use with appends on other threads.
void set_stream_cache_bytes(std::int64_t bytes);

}  // namespace posenc::detail
