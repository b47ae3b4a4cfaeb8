// posenc_bench: the RoPE kernel (posenc::apply_rope) under Google Benchmark, over the case list
// shared with `posenc bench` (cases.h). docs/benchmarks.md has the method and the numbers.
//
//   posenc_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Per case, Google Benchmark times the in-place rotation in wall-clock time (UseRealTime: with
// 2 threads the calling thread's CPU time would miss the worker's share) and reports
//   bytes_per_second  bytes_moved() / time, with bytes_moved() = 2 x tokens x heads x head_dim x
//                     dtype_size: the tensor read once and written once (cases.h)
//   ratio_to_memcpy   memcpy time of the same tensor / kernel time   (> 1: faster than memcpy)
//   ratio_to_scalar   scalar-loop time / kernel time                 (> 1: faster than scalar)
//   ratio_to_stream   in-place streaming time (stream.h; the faster of with and without the
//                     kernels' software prefetch) / kernel time: 1 is the roofline
// and for the fused cases (rope_append_kv_cache, fused_workload.h; no scalar loop)
//   speedup_over_separate   rotate-then-copy time / fused time
//   ratio_to_append_stream  the fused call's traffic streamed with no arithmetic (the faster of
//                           with and without the software prefetch) / fused time
// The baselines (workload.h) are timed in the same process right after each timed loop, so they
// see the same machine state, as medians of kBaselineRepetitions samples (timing.h), on one
// thread. Before a case is first timed, the kernel's result is checked against the scalar loop.
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "cases.h"
#include "fused_workload.h"
#include "posenc/rope/targets.h"
#include "timing.h"
#include "workload.h"

namespace posenc::bench {
namespace {

// Samples per baseline: the median of 5 discards up to two disturbed samples.
constexpr int kBaselineRepetitions = 5;

// One workload at a time (a prefill case holds two 64 MiB buffers): the cases of one
// (shape, dtype) are adjacent in all_cases(), so each workload is built once.
Workload& workload_for(const Case& c) {
  static std::unique_ptr<Workload> current;
  if (!current || current->shape().name != c.shape.name || current->dtype() != c.dtype) {
    current.reset();
    current = std::make_unique<Workload>(c.shape, c.dtype);
  }
  return *current;
}

FusedWorkload& fused_workload_for(const Case& c) {
  static std::unique_ptr<FusedWorkload> current;
  const Case* last = current ? &current->fused_case() : nullptr;
  if (!last || last->shape.name != c.shape.name || last->dtype != c.dtype ||
      last->cache_dtype != c.cache_dtype) {
    current.reset();
    current = std::make_unique<FusedWorkload>(c);
  }
  return *current;
}

void run_fused_case(benchmark::State& state, const Case& c) {
  FusedWorkload& w = fused_workload_for(c);
  static std::set<std::string> checked;
  if (checked.insert(c.name).second) {
    if (const std::size_t differ = w.cache_mismatches(c.threads); differ != 0) {
      state.SkipWithError(
          fmt::format("the fused cache differs from rotate-then-copy's in {} bytes", differ)
              .c_str());
    }
  }
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) w.fused(c.threads);
  const auto stop = std::chrono::steady_clock::now();
  if (state.error_occurred()) return;
  const double kernel =
      std::chrono::duration<double>(stop - start).count() / static_cast<double>(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(c.bytes_moved()));
  const Baselines b = measure_baselines(w, kBaselineRepetitions, c.threads);
  state.counters["ratio_to_memcpy"] = b.memcpy_seconds / kernel;
  state.counters["ratio_to_stream"] = b.stream_seconds / kernel;
  state.counters["speedup_over_separate"] = b.separate_seconds / kernel;
  state.counters["ratio_to_append_stream"] = b.append_stream_seconds / kernel;
}

void run_case(benchmark::State& state, const Case& c) {
  if (c.fused) return run_fused_case(state, c);
  Workload& w = workload_for(c);
  static std::set<std::string> checked;
  if (checked.insert(c.name).second) {
    const double diff = w.max_difference(c.table, c.threads);
    if (!(diff <= w.tolerance())) {
      state.SkipWithError(
          fmt::format("kernel and scalar loop differ by {:g} (tolerance {:g})", diff, w.tolerance())
              .c_str());
    }
  }
  // Timed by Google Benchmark; timed again here around the same loop for the ratios, since the
  // State does not expose its elapsed time.
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) w.rotate(c.table, c.threads);
  const auto stop = std::chrono::steady_clock::now();
  if (state.error_occurred()) return;
  const double kernel =
      std::chrono::duration<double>(stop - start).count() / static_cast<double>(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(c.bytes_moved()));
  const Baselines b = measure_baselines(w, kBaselineRepetitions);
  state.counters["ratio_to_memcpy"] = b.memcpy_seconds / kernel;
  state.counters["ratio_to_scalar"] = b.scalar_seconds / kernel;
  state.counters["ratio_to_stream"] = b.stream_seconds / kernel;
}

}  // namespace
}  // namespace posenc::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("simd_target", posenc::active_simd_target());
  for (const posenc::bench::Case& c : posenc::bench::all_cases()) {
    benchmark::RegisterBenchmark(c.name.c_str(), posenc::bench::run_case, c)
        ->UseRealTime()
        ->Unit(c.elements() < (1 << 16) ? benchmark::kNanosecond : benchmark::kMicrosecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
