#include "util/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

#include "posenc/core/error.h"
#include "posenc/core/threads.h"

namespace posenc::detail {

bool Backoff::pause() {
  for (int k = 0; k < 16; ++k) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  if (++calls_ % 16 != 0) return false;
  std::this_thread::yield();
  return true;
}

ThreadPool& ThreadPool::shared(int threads) {
  static ThreadPool pool;
  try {
    pool.grow(run_threads(threads) - 1);  // never more workers than the hardware has threads
  } catch (const std::system_error& e) {
    // The system refused a thread (EAGAIN: process or memory limits): say so, in posenc's terms.
    throw Error("cannot start " + std::to_string(threads) + " threads: " + e.what());
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::grow(int workers) {
  std::lock_guard run_lock(run_mu_);
  std::lock_guard lock(mu_);
  while (static_cast<int>(workers_.size()) < workers) {
    const int index = static_cast<int>(workers_.size()) + 1;
    workers_.emplace_back([this, index] { worker_loop(index); });
  }
}

void ThreadPool::take_chunks(const std::function<void(std::int64_t, std::int64_t)>& body) {
  for (;;) {
    const std::int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= tasks_) return;
    try {
      body(begin, std::min(begin + chunk_, tasks_));
    } catch (...) {
      next_.store(tasks_, std::memory_order_relaxed);  // hand out nothing more
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::current_exception();
      return;
    }
  }
}

namespace {

// How long a thread spins for the next run (a worker) or for the workers to finish (the caller)
// before it sleeps on a condition variable. A forward pass issues a run every few tens to a few
// hundred microseconds, and a wake-up through a futex costs 10-20 us on the 2-core guest of
// docs/eval.md (an inter-processor interrupt through the hypervisor). Measured there with two
// tasks of 5 us each: 19 us a run with sleeping workers, 6-7 us with runs under 200 us apart.
constexpr auto kSpin = std::chrono::microseconds(200);

// Spins until done() or for kSpin, whichever comes first, yielding the core every few
// microseconds (Backoff).
template <class Done>
void spin_until(Done done) {
  const auto end = std::chrono::steady_clock::now() + kSpin;
  for (Backoff wait; !done();) {
    if (wait.pause() && std::chrono::steady_clock::now() >= end) return;
  }
}

}  // namespace

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    spin_until([&] {
      return generation_.load(std::memory_order_acquire) != seen ||
             stop_.load(std::memory_order_relaxed);
    });
    std::unique_lock lock(mu_);
    if (!stop_ && generation_ != seen && !(open_ && index < participants_)) {
      seen = generation_;  // a run this worker came too late for, or sits out: spin for the next
      continue;
    }
    wake_.wait(lock,
               [&] { return stop_ || (generation_ != seen && open_ && index < participants_); });
    if (stop_) return;
    seen = generation_;
    ++joined_;
    const auto* body = body_;
    lock.unlock();
    take_chunks(*body);
    lock.lock();
    left_.fetch_add(1, std::memory_order_release);
    if (!open_ && left_.load(std::memory_order_relaxed) == joined_) done_.notify_one();
  }
}

void ThreadPool::run(int threads, std::int64_t tasks,
                     const std::function<void(std::int64_t, std::int64_t)>& body) {
  std::lock_guard run_lock(run_mu_);
  const int parts = static_cast<int>(std::clamp<std::int64_t>(
      std::min<std::int64_t>(threads, static_cast<std::int64_t>(workers_.size()) + 1), 1,
      std::max<std::int64_t>(tasks, 1)));
  if (parts == 1) {
    if (tasks > 0) body(0, tasks);
    return;
  }
  {
    std::lock_guard lock(mu_);
    tasks_ = tasks;
    // About 4 chunks per participant: enough to rebalance when one thread is slow (its core
    // shared), few enough that the per-chunk work (a cos/sin row buffer, a counter) stays small.
    chunk_ = std::max<std::int64_t>(1, tasks / (4 * static_cast<std::int64_t>(parts)));
    next_.store(0, std::memory_order_relaxed);
    participants_ = parts;
    body_ = &body;
    error_ = nullptr;
    open_ = true;
    joined_ = 0;
    left_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  take_chunks(body);
  std::unique_lock lock(mu_);
  open_ = false;  // a worker that wakes from now on sits this run out: nothing is left for it
  // No worker joins from now on, so the run is over once every joined worker has left.
  const int joined = joined_;
  const auto all_left = [&] { return left_.load(std::memory_order_acquire) == joined; };
  if (!all_left()) {
    // The workers inside usually finish within microseconds of the caller: spin before sleeping.
    lock.unlock();
    spin_until(all_left);
    lock.lock();
  }
  done_.wait(lock, all_left);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace posenc::detail

namespace posenc {

int hardware_threads() {
  // Read once: glibc's answer reads /sys, and run_threads asks on every kernel call. The CPUs
  // this process may run on (sched_getaffinity: taskset, cpusets), else every online CPU.
  static const int n = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return n;
}

}  // namespace posenc
