#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

namespace posenc::bench {
namespace {

using Clock = std::chrono::steady_clock;

double time_calls(const std::function<void()>& fn, std::int64_t calls) {
  const auto start = Clock::now();
  for (std::int64_t i = 0; i < calls; ++i) fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

double median_seconds_per_call(const std::function<void()>& fn, int repetitions,
                               double min_sample_seconds) {
  fn();  // warm-up: caches, page tables, the kernels' thread pool
  // Grow the batch until one batch lasts min_sample_seconds; that batch is the first sample.
  std::int64_t calls = 1;
  double elapsed = time_calls(fn, calls);
  while (elapsed < min_sample_seconds) {
    const double wanted =
        1.2 * static_cast<double>(calls) * min_sample_seconds / std::max(elapsed, 1e-9);
    calls = std::max(
        2 * calls, static_cast<std::int64_t>(std::min(wanted, 100.0 * static_cast<double>(calls))));
    elapsed = time_calls(fn, calls);
  }
  std::vector<double> per_call{elapsed / static_cast<double>(calls)};
  while (static_cast<int>(per_call.size()) < repetitions) {
    per_call.push_back(time_calls(fn, calls) / static_cast<double>(calls));
  }
  std::sort(per_call.begin(), per_call.end());
  const std::size_t m = per_call.size() / 2;
  return per_call.size() % 2 ? per_call[m] : 0.5 * (per_call[m - 1] + per_call[m]);
}

Baselines measure_baselines(Workload& workload, int repetitions) {
  Baselines b;
  b.memcpy_seconds = median_seconds_per_call([&] { workload.copy(); }, repetitions);
  b.scalar_seconds = median_seconds_per_call([&] { workload.rotate_scalar(); }, repetitions);
  b.stream_seconds = median_seconds_per_call([&] { workload.stream(); }, repetitions);
  return b;
}

Baselines measure_baselines(FusedWorkload& workload, int repetitions, int threads) {
  Baselines b;
  b.memcpy_seconds = median_seconds_per_call([&] { workload.copy(); }, repetitions);
  b.stream_seconds = median_seconds_per_call([&] { workload.stream(); }, repetitions);
  b.separate_seconds = median_seconds_per_call([&] { workload.separate(threads); }, repetitions);
  return b;
}

}  // namespace posenc::bench
