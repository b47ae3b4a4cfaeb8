// src/util/thread_pool.h: a small persistent pool for the kernels (internal).
//
// Workers are started once; between runs a worker spins for 200 us, then parks on a condition
// variable, so a call pays a load or a wake-up, not a thread start (the caller too spins for
// the workers before it sleeps). run() hands out [0, tasks) in contiguous chunks (about 4 per
// participant) from an atomic counter; the calling thread takes chunks too, and returns once
// every chunk is done and no worker is inside the run. A worker its core is slow to schedule (a
// loaded machine) therefore costs nothing: the others take its chunks, instead of the call
// waiting for it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace posenc::detail {

// A spin-wait's step: pause() spins 16 times (x86 `pause`, Arm `yield`) and, every 16th call,
// yields the core, so that a thread it shares the core with (more runnable threads than cores:
// taskset, a CPU quota, other processes; perhaps the thread waited on) runs; it returns whether
// it yielded. (A yield every microsecond cost decoding from position 4096 about 12%: 2,557-3,016
// tokens/s against 3,115-3,216.)
class Backoff {
 public:
  bool pause();

 private:
  int calls_ = 0;
};

class ThreadPool {
 public:
  // The process-wide pool with run_threads(threads) - 1 workers (grown on demand, never shrunk;
  // run() then uses at most workers + 1 threads, so no caller oversubscribes the cores).
  static ThreadPool& shared(int threads);

  ~ThreadPool();

  // Calls body(begin, end) over contiguous, disjoint chunks covering [0, tasks) on up to
  // `threads` threads (the caller included; any thread may run any number of chunks) and returns
  // when all are done. The first exception stops the hand-out and is rethrown here.
  void run(int threads, std::int64_t tasks,
           const std::function<void(std::int64_t, std::int64_t)>& body);

 private:
  void grow(int workers);
  void worker_loop(int index);
  void take_chunks(const std::function<void(std::int64_t, std::int64_t)>& body);

  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> workers_;
  std::atomic<std::uint64_t> generation_{0};  // runs started (atomic: spinning workers read it)
  bool open_ = false;                         // the current run still admits workers
  int joined_ = 0;                            // workers that have entered the current run
  // Workers that have left it (atomic: the caller spins on it); joined_ - left_ are inside.
  std::atomic<int> left_{0};
  std::int64_t tasks_ = 0;
  std::int64_t chunk_ = 1;
  std::atomic<std::int64_t> next_{0};  // the first task not yet handed out
  int participants_ = 0;
  const std::function<void(std::int64_t, std::int64_t)>* body_ = nullptr;
  std::exception_ptr error_;
  std::atomic<bool> stop_{false};  // atomic: spinning workers read it
  std::mutex run_mu_;              // one run at a time
};

}  // namespace posenc::detail
