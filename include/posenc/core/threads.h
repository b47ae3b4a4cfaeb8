// posenc/core/threads.h: how many threads the functions that take a thread count accept
// (apply_rope, rerotate_keys, llama::Session, llama::perplexity).
//
// Each count must lie in [1, kMaxThreads] (else an Error). A valid count above the machine's
// hardware threads is capped to hardware_threads() (run_threads): more threads would only
// time-slice the same cores, which slows memory-bound kernels down. The calls report the count
// that ran (apply_rope's and rope_append_kv_cache's return value), which is also capped to what
// the work splits into; the CLI's --threads and Python's threads= warn when they cap.
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

// The hardware threads this process may run on (its CPU affinity: taskset, cpusets; else
// std::thread::hardware_concurrency), at least 1, read once.
int hardware_threads();

// The threads a valid request runs on: min(threads, hardware_threads()). The shared thread pool
// never runs more, whoever asks (the RoPE kernels, llama::Session, llama::perplexity).
inline int run_threads(int threads) {
  return threads < hardware_threads() ? threads : hardware_threads();
}

}  // namespace posenc
