// posenc/core/threads.h: how many threads the functions that take a thread count accept
// (apply_rope, rerotate_keys, llama::Session, llama::perplexity).
//
// Each count must lie in [1, kMaxThreads]. The kernels split a call into at most one chunk per
// token (or per head of a token), and each extra thread costs a start-up the first time, so counts
// beyond a few hundred only add overhead; a count above the machine's hardware threads is honoured.
#pragma once

#include <string>
#include <string_view>

#include "posenc/core/error.h"

namespace posenc {

inline constexpr int kMaxThreads = 256;

// Throws Error "`who`: threads (N) must be in [1, 256]" unless 1 <= threads <= kMaxThreads.
inline void check_threads(int threads, std::string_view who) {
  if (threads < 1 || threads > kMaxThreads) {
    throw Error(std::string(who) + ": threads (" + std::to_string(threads) + ") must be in [1, " +
                std::to_string(kMaxThreads) + "]");
  }
}

// The machine's hardware threads (std::thread::hardware_concurrency), at least 1.
int hardware_threads();

}  // namespace posenc
