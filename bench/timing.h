// bench/timing.h: medians of repeated timings, for a shared and noisy machine.
//
// A sample is a batch of back-to-back calls lasting at least kMinSampleSeconds, so a 0.5 us
// decode call is timed over thousands of calls rather than against the clock's resolution; the
// result is the median over samples of (sample time / calls), which ignores the samples that a
// neighbour's burst of work slowed down.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "fused_workload.h"
#include "workload.h"

namespace posenc::bench {

// 2 ms: over 1000x the cost of reading steady_clock (~20-30 ns), and short enough that a
// 64 MiB memcpy (~5-10 ms) is a single call per sample.
inline constexpr double kMinSampleSeconds = 2e-3;

// Median seconds per call of fn over `repetitions` samples, after one untimed warm-up call.
double median_seconds_per_call(const std::function<void()>& fn, int repetitions,
                               double min_sample_seconds = kMinSampleSeconds);

// Median seconds per call of each of fns, their samples taken in turn (a sample of fns[0], one of
// fns[1], ..., then again), each batch sized for its own fn as above. On a shared machine whose
// speed drifts over seconds, this slows or speeds every fn alike, so ratios of the medians compare
// like with like; timed one after another, the kernel and its baselines met different minutes.
std::vector<double> median_seconds_interleaved(std::span<const std::function<void()>> fns,
                                               int repetitions,
                                               double min_sample_seconds = kMinSampleSeconds);

// The baselines of a workload, each timed as above, single-threaded. Each stream is timed with the
// kernels' software prefetch and without it, and the roofline is the faster of the two medians:
// which one wins depends on the machine and the size (docs/benchmarks.md, "Why the in-place
// stream is the roofline").
struct Baselines {
  double memcpy_seconds = 0;           // Workload::copy()
  double scalar_seconds = 0;           // Workload::rotate_scalar()
  double stream_seconds = 0;           // the in-place roofline: the faster of the next two
  double stream_prefetch_seconds = 0;  // Workload::stream(true)
  double stream_plain_seconds = 0;     // Workload::stream(false)
  double separate_seconds = 0;  // fused cases: FusedWorkload::separate() (on the case's threads)
  double append_stream_seconds = 0;           // fused cases: the faster of the next two
  double append_stream_prefetch_seconds = 0;  // FusedWorkload::append_stream(true)
  double append_stream_plain_seconds = 0;     // FusedWorkload::append_stream(false)
};
Baselines measure_baselines(Workload& workload, int repetitions);
// A fused case's: memcpy, stream and append_stream on one thread, rotate-then-copy on `threads`
// (like the fused call it is compared with); scalar_seconds stays 0 (no scalar loop for the fused
// call).
Baselines measure_baselines(FusedWorkload& workload, int repetitions, int threads);

// The kernel and the baselines above, their samples interleaved (median_seconds_interleaved),
// except the scalar loop's, timed after them on its own (timing.cc says why).
struct Timings {
  double kernel_seconds = 0;
  Baselines baselines;
};
Timings measure_interleaved(const std::function<void()>& kernel, Workload& workload,
                            int repetitions);
Timings measure_interleaved(const std::function<void()>& kernel, FusedWorkload& workload,
                            int repetitions, int threads);

}  // namespace posenc::bench
