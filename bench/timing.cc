#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace posenc::bench {
namespace {

using Clock = std::chrono::steady_clock;

double time_calls(const std::function<void()>& fn, std::int64_t calls) {
  const auto start = Clock::now();
  for (std::int64_t i = 0; i < calls; ++i) fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Calls per sample for fn: the batch grows until it lasts min_sample_seconds. Returns the calls
// and the time of the last batch.
std::pair<std::int64_t, double> calibrate(const std::function<void()>& fn,
                                          double min_sample_seconds) {
  std::int64_t calls = 1;
  double elapsed = time_calls(fn, calls);
  while (elapsed < min_sample_seconds) {
    const double wanted =
        1.2 * static_cast<double>(calls) * min_sample_seconds / std::max(elapsed, 1e-9);
    calls = std::max(
        2 * calls, static_cast<std::int64_t>(std::min(wanted, 100.0 * static_cast<double>(calls))));
    elapsed = time_calls(fn, calls);
  }
  return {calls, elapsed};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

std::vector<double> median_seconds_interleaved(std::span<const std::function<void()>> fns,
                                               int repetitions, double min_sample_seconds) {
  // Batch sizes first; the calibration batches are not samples (each followed another function).
  std::vector<std::int64_t> calls;
  std::vector<std::vector<double>> per_call(fns.size());
  for (std::size_t f = 0; f < fns.size(); ++f) {
    fns[f]();  // warm-up
    calls.push_back(calibrate(fns[f], min_sample_seconds).first);
  }
  for (int r = 0; r < repetitions; ++r) {
    for (std::size_t f = 0; f < fns.size(); ++f) {
      // One untimed call first, so that each sample starts from the caches its own function
      // leaves (as in a loop of it), not from what the previous function left behind.
      fns[f]();
      per_call[f].push_back(time_calls(fns[f], calls[f]) / static_cast<double>(calls[f]));
    }
  }
  std::vector<double> out;
  for (auto& v : per_call) out.push_back(median(std::move(v)));
  return out;
}

namespace {

// The rooflines: the faster of each stream's two forms (timing.h).
void take_faster_streams(Baselines& b) {
  b.stream_seconds = std::min(b.stream_prefetch_seconds, b.stream_plain_seconds);
  if (b.append_stream_prefetch_seconds > 0 || b.append_stream_plain_seconds > 0) {
    b.append_stream_seconds =
        std::min(b.append_stream_prefetch_seconds, b.append_stream_plain_seconds);
  }
}

// fns[0] (the kernel) and the baselines after it, sampled in turn; fields[i] gets fns[i + 1]'s
// median.
Timings sample_in_turn(std::span<const std::function<void()>> fns,
                       std::initializer_list<double Baselines::*> fields, int repetitions) {
  const std::vector<double> m = median_seconds_interleaved(fns, repetitions);
  Timings t;
  t.kernel_seconds = m[0];
  std::size_t i = 1;
  for (double Baselines::*field : fields) t.baselines.*field = m[i++];
  take_faster_streams(t.baselines);
  return t;
}

}  // namespace

Timings measure_interleaved(const std::function<void()>& kernel, Workload& workload,
                            int repetitions) {
  // The scalar loop is timed on its own, after the others: measured on a Sapphire-Rapids-class
  // Xeon, the AVX-512 code that ran after its 40 ms pass over a 32 MiB tensor took 2-4 times its
  // time for the next 3-5 calls (6-10 ms; a memcpy before it left no such trace), so in the
  // rotation it slowed whichever function followed it.
  const std::function<void()> fns[] = {kernel, [&] { workload.copy(); },
                                       [&] { workload.stream(true); },
                                       [&] { workload.stream(false); }};
  Timings t = sample_in_turn(fns,
                             {&Baselines::memcpy_seconds, &Baselines::stream_prefetch_seconds,
                              &Baselines::stream_plain_seconds},
                             repetitions);
  t.baselines.scalar_seconds =
      median_seconds_per_call([&] { workload.rotate_scalar(); }, repetitions);
  return t;
}

Timings measure_interleaved(const std::function<void()>& kernel, FusedWorkload& workload,
                            int repetitions, int threads) {
  const std::function<void()> fns[] = {kernel,
                                       [&] { workload.copy(); },
                                       [&] { workload.stream(true); },
                                       [&] { workload.stream(false); },
                                       [&] { workload.separate(threads); },
                                       [&] { workload.append_stream(true); },
                                       [&] { workload.append_stream(false); }};
  return sample_in_turn(
      fns,
      {&Baselines::memcpy_seconds, &Baselines::stream_prefetch_seconds,
       &Baselines::stream_plain_seconds, &Baselines::separate_seconds,
       &Baselines::append_stream_prefetch_seconds, &Baselines::append_stream_plain_seconds},
      repetitions);
}

double median_seconds_per_call(const std::function<void()>& fn, int repetitions,
                               double min_sample_seconds) {
  fn();  // warm-up: caches, page tables, the kernels' thread pool
  // Grow the batch until one batch lasts min_sample_seconds; that batch is the first sample.
  const auto [calls, elapsed] = calibrate(fn, min_sample_seconds);
  std::vector<double> per_call{elapsed / static_cast<double>(calls)};
  while (static_cast<int>(per_call.size()) < repetitions) {
    per_call.push_back(time_calls(fn, calls) / static_cast<double>(calls));
  }
  return median(std::move(per_call));
}

Baselines measure_baselines(Workload& workload, int repetitions) {
  Baselines b;
  b.memcpy_seconds = median_seconds_per_call([&] { workload.copy(); }, repetitions);
  b.stream_prefetch_seconds = median_seconds_per_call([&] { workload.stream(true); }, repetitions);
  b.stream_plain_seconds = median_seconds_per_call([&] { workload.stream(false); }, repetitions);
  // Last: AVX-512 code right after the scalar loop runs slowly for a while (measure_interleaved).
  b.scalar_seconds = median_seconds_per_call([&] { workload.rotate_scalar(); }, repetitions);
  take_faster_streams(b);
  return b;
}

Baselines measure_baselines(FusedWorkload& workload, int repetitions, int threads) {
  Baselines b;
  b.memcpy_seconds = median_seconds_per_call([&] { workload.copy(); }, repetitions);
  b.stream_prefetch_seconds = median_seconds_per_call([&] { workload.stream(true); }, repetitions);
  b.stream_plain_seconds = median_seconds_per_call([&] { workload.stream(false); }, repetitions);
  b.separate_seconds = median_seconds_per_call([&] { workload.separate(threads); }, repetitions);
  b.append_stream_prefetch_seconds =
      median_seconds_per_call([&] { workload.append_stream(true); }, repetitions);
  b.append_stream_plain_seconds =
      median_seconds_per_call([&] { workload.append_stream(false); }, repetitions);
  take_faster_streams(b);
  return b;
}

}  // namespace posenc::bench
