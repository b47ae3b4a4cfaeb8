// src/util/thread_pool.h: a small persistent pool for the kernels (internal).
//
// Workers are started once and park on a condition variable, so a call pays a wake-up, not a
// thread start. run() splits [0, tasks) into contiguous chunks, one per participant; the calling
// thread takes the first chunk itself.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace posenc::detail {

class ThreadPool {
 public:
  // The process-wide pool with `threads - 1` workers (grown on demand, never shrunk).
  static ThreadPool& shared(int threads);

  ~ThreadPool();

  // Calls body(begin, end) over contiguous chunks of [0, tasks) on `threads` threads
  // (the caller included) and returns when all are done. Exceptions are rethrown here.
  void run(int threads, std::int64_t tasks,
           const std::function<void(std::int64_t, std::int64_t)>& body);

 private:
  void grow(int workers);
  void worker_loop(int index);

  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> workers_;
  std::uint64_t generation_ = 0;
  int pending_ = 0;  // workers not yet finished with the current run
  std::int64_t tasks_ = 0;
  int participants_ = 0;
  const std::function<void(std::int64_t, std::int64_t)>* body_ = nullptr;
  std::exception_ptr error_;
  bool stop_ = false;
  std::mutex run_mu_;  // one run at a time
};

}  // namespace posenc::detail
