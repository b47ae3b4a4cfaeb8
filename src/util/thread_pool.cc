#include "util/thread_pool.h"

#include <algorithm>
#include <string>
#include <system_error>

#include "posenc/core/error.h"
#include "posenc/core/threads.h"

namespace posenc::detail {
namespace {

std::pair<std::int64_t, std::int64_t> chunk(std::int64_t tasks, int parts, int index) {
  const std::int64_t base = tasks / parts, extra = tasks % parts;
  const std::int64_t begin = index * base + std::min<std::int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

}  // namespace

ThreadPool& ThreadPool::shared(int threads) {
  static ThreadPool pool;
  try {
    pool.grow(threads - 1);
  } catch (const std::system_error& e) {
    // The system refused a thread (EAGAIN: process or memory limits): say so, in posenc's terms.
    throw Error("cannot start " + std::to_string(threads) + " threads: " + e.what());
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
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

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    std::unique_lock lock(mu_);
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && index < participants_); });
    if (stop_) return;
    seen = generation_;
    const auto [begin, end] = chunk(tasks_, participants_, index);
    const auto* body = body_;
    lock.unlock();
    std::exception_ptr error;
    try {
      if (begin < end) (*body)(begin, end);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_one();
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
    participants_ = parts;
    body_ = &body;
    pending_ = parts - 1;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  std::exception_ptr mine;
  try {
    const auto [begin, end] = chunk(tasks, parts, 0);
    if (begin < end) body(begin, end);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace posenc::detail

namespace posenc {

int hardware_threads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace posenc
