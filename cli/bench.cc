// `posenc bench`: the benchmark cases of posenc_bench (bench/cases.h) timed with a plain loop,
// for a quick look without Google Benchmark. Every time is the median of --repetitions samples
// (bench/timing.h) of the kernel, a memcpy, a scalar loop and the in-place streaming roofline
// (bench/stream.h) on the same buffers, their samples taken in turn so that the ratios compare
// times from the same seconds of a noisy machine.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cases.h"
#include "commands.h"
#include "options.h"
#include "posenc/core/error.h"
#include "posenc/rope/targets.h"
#include "timing.h"
#include "workload.h"

namespace posenc::cli {
namespace {

struct BenchOptions {
  std::string filter;
  std::vector<int> threads{std::begin(bench::kDefaultThreads), std::end(bench::kDefaultThreads)};
  int repetitions = 7;
  bool json = false;
};

struct Result {
  bench::Case c;
  double seconds = 0;  // the kernel, per call
  int threads_used =
      1;  // what apply_rope ran on: fewer than c.threads when the case is too small to split
  bench::Baselines baselines;
  double max_difference = 0;

  double bytes_per_second() const { return static_cast<double>(c.bytes_moved()) / seconds; }
  double ratio_to_memcpy() const { return baselines.memcpy_seconds / seconds; }
  double ratio_to_scalar() const { return baselines.scalar_seconds / seconds; }
  double ratio_to_stream() const { return baselines.stream_seconds / seconds; }
  double speedup_over_separate() const { return baselines.separate_seconds / seconds; }
  double ratio_to_append_stream() const { return baselines.append_stream_seconds / seconds; }
};

std::string format_seconds(double s) {
  if (s < 1e-6) return fmt::format("{:.1f} ns", s * 1e9);
  if (s < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  return fmt::format("{:.2f} ms", s * 1e3);
}

std::vector<bench::Case> select_cases(const BenchOptions& o) {
  for (int t : o.threads) warn_oversubscribed("--threads", t);
  std::regex filter;
  try {
    filter = std::regex(o.filter);
  } catch (const std::regex_error& e) {
    throw Error(
        fmt::format("--filter (\"{}\") is not a regular expression: {}", o.filter, e.what()));
  }
  std::vector<bench::Case> out;
  for (bench::Case& c : bench::all_cases(o.threads)) {
    if (std::regex_search(c.name, filter)) out.push_back(std::move(c));
  }
  if (out.empty()) {
    throw Error(fmt::format("--filter (\"{}\") matches no case (names look like {})", o.filter,
                            bench::all_cases().front().name));
  }
  return out;
}

nlohmann::json to_json(const Result& r, const std::string& target, int repetitions) {
  nlohmann::json j = {{"name", r.c.name},
                      {"shape", std::string(r.c.shape.name)},
                      {"dtype", std::string(dtype_name(r.c.dtype))},
                      {"threads", r.c.threads},
                      {"threads_used", r.threads_used},
                      {"tokens", r.c.shape.tokens},
                      {"heads", r.c.shape.heads},
                      {"head_dim", r.c.shape.head_dim},
                      {"rotary_dim", r.c.shape.rotary()},
                      {"layout", r.c.shape.interleaved ? "interleaved" : "half-split"},
                      {"first_position", r.c.shape.first_position},
                      {"table", r.c.table},
                      {"bytes", r.c.bytes_moved()},
                      {"repetitions", repetitions},
                      {"seconds_median", r.seconds},
                      {"memcpy_seconds_median", r.baselines.memcpy_seconds},
                      {"scalar_seconds_median", r.baselines.scalar_seconds},
                      {"stream_seconds_median", r.baselines.stream_seconds},
                      {"stream_prefetch_seconds_median", r.baselines.stream_prefetch_seconds},
                      {"stream_plain_seconds_median", r.baselines.stream_plain_seconds},
                      {"bytes_per_second", r.bytes_per_second()},
                      {"ratio_to_memcpy", r.ratio_to_memcpy()},
                      {"ratio_to_scalar", r.ratio_to_scalar()},
                      {"ratio_to_stream", r.ratio_to_stream()},
                      {"max_abs_difference_to_scalar", r.max_difference},
                      {"target", target},
                      {"fused", r.c.fused}};
  if (!r.c.shape.mrope_layout.empty()) j["mrope_layout"] = std::string(r.c.shape.mrope_layout);
  if (r.c.fused) {
    // No scalar loop for the fused call: rotate-then-copy is its comparison.
    j["kv_heads"] = r.c.shape.kv_heads;
    j["cache_dtype"] = std::string(cache_dtype_name(r.c.cache_dtype));
    j["cache_scale"] = r.c.cache_scale;  // fp8's k_scale and v_scale (1 for the others)
    j["scalar_seconds_median"] = nullptr;
    j["ratio_to_scalar"] = nullptr;
    j.erase("max_abs_difference_to_scalar");
    j["cache_bytes_differing_from_separate"] = 0;  // checked before timing (run_bench)
    j["separate_seconds_median"] = r.baselines.separate_seconds;
    j["speedup_over_separate"] = r.speedup_over_separate();
    // The fused call's own memory traffic with no arithmetic (bench/stream.h, stream_append).
    j["append_stream_seconds_median"] = r.baselines.append_stream_seconds;
    j["append_stream_prefetch_seconds_median"] = r.baselines.append_stream_prefetch_seconds;
    j["append_stream_plain_seconds_median"] = r.baselines.append_stream_plain_seconds;
    j["ratio_to_append_stream"] = r.ratio_to_append_stream();
  }
  return j;
}

void print_table(const std::vector<Result>& results, const std::string& target, int repetitions) {
  fmt::print(
      "SIMD target {}; median of {} repetitions, kernel and baselines sampled in turn; bytes = "
      "tensor read + written once (fused: q "
      "read\n"
      "and written, k and v read, their cache rows written); ratios = single-threaded baseline "
      "time\n"
      "/ kernel time (> 1: the kernel is faster); x separate = rotate-then-copy time / fused "
      "time;\nx append = the fused call's traffic streamed with no arithmetic (q in place, k and "
      "v into the cache) / fused time;\nboth streams the faster of with and without the "
      "kernels' software prefetch\n\n",
      target, repetitions);
  std::size_t width = 4;
  for (const Result& r : results) width = std::max(width, r.c.name.size());
  fmt::print("{:<{}}  {:>10}  {:>8}  {:>9}  {:>9}  {:>9}  {:>10}  {:>8}\n", "case", width, "time",
             "GB/s", "x stream", "x memcpy", "x scalar", "x separate", "x append");
  for (const Result& r : results) {
    fmt::print("{:<{}}  {:>10}  {:>8.2f}  {:>9.2f}  {:>9.2f}  {:>9}  {:>10}  {:>8}\n", r.c.name,
               width, format_seconds(r.seconds), r.bytes_per_second() / 1e9, r.ratio_to_stream(),
               r.ratio_to_memcpy(), r.c.fused ? "-" : fmt::format("{:.2f}", r.ratio_to_scalar()),
               r.c.fused ? fmt::format("{:.2f}", r.speedup_over_separate()) : "-",
               r.c.fused ? fmt::format("{:.2f}", r.ratio_to_append_stream()) : "-");
  }
  for (const Result& r : results) {
    if (r.threads_used != r.c.threads) {
      fmt::print("note: {} ran on {} thread{}: the case is too small to split further\n", r.c.name,
                 r.threads_used, r.threads_used == 1 ? "" : "s");
    }
  }
}

void print_progress(const Result& r, std::size_t done, std::size_t total) {
  fmt::print(stderr, "[{}/{}] {}  {}  {:.2f} GB/s{}\n", done, total, r.c.name,
             format_seconds(r.seconds), r.bytes_per_second() / 1e9,
             r.threads_used == r.c.threads ? ""
                                           : fmt::format("  (ran on {} thread{})", r.threads_used,
                                                         r.threads_used == 1 ? "" : "s"));
}

// A fused case: checked against rotate-then-copy (the same cache bytes), then timed with it.
Result run_fused(const bench::Case& c, std::unique_ptr<bench::FusedWorkload>& fw, int repetitions) {
  const bench::Case* last = fw ? &fw->fused_case() : nullptr;
  if (!last || last->shape.name != c.shape.name || last->dtype != c.dtype ||
      last->cache_dtype != c.cache_dtype) {
    fw.reset();
    fw = std::make_unique<bench::FusedWorkload>(c);
  }
  Result r;
  r.c = c;
  if (const std::size_t differ = fw->cache_mismatches(c.threads); differ != 0) {
    throw Error(fmt::format(
        "bench: {}: the fused cache differs from rotate-then-copy's in {} bytes", c.name, differ));
  }
  r.threads_used = fw->fused(c.threads);
  const bench::Timings t =
      bench::measure_interleaved([&] { fw->fused(c.threads); }, *fw, repetitions, c.threads);
  r.seconds = t.kernel_seconds;
  r.baselines = t.baselines;
  return r;
}

void run_bench(const BenchOptions& o) {
  const std::vector<bench::Case> cases = select_cases(o);
  const std::string target = active_simd_target();
  std::vector<Result> results;
  std::unique_ptr<bench::Workload> w;
  std::unique_ptr<bench::FusedWorkload> fw;
  for (const bench::Case& c : cases) {
    if (c.fused) {
      results.push_back(run_fused(c, fw, o.repetitions));
      print_progress(results.back(), results.size(), cases.size());
      continue;
    }
    // Cases of one (shape, dtype) are adjacent and share buffers; one workload at a time.
    if (!w || w->shape().name != c.shape.name || w->dtype() != c.dtype) {
      w.reset();
      w = std::make_unique<bench::Workload>(c.shape, c.dtype);
    }
    Result r;
    r.c = c;
    r.max_difference = w->max_difference(c.table, c.threads);
    r.threads_used = w->rotate(c.table, c.threads);
    if (!(r.max_difference <= w->tolerance())) {
      throw Error(
          fmt::format("bench: {}: the kernel and the scalar loop differ by {:g} (tolerance {:g})",
                      c.name, r.max_difference, w->tolerance()));
    }
    const bench::Timings t =
        bench::measure_interleaved([&] { w->rotate(c.table, c.threads); }, *w, o.repetitions);
    r.seconds = t.kernel_seconds;
    r.baselines = t.baselines;
    results.push_back(std::move(r));
    print_progress(results.back(), results.size(), cases.size());
  }
  if (o.json) {
    nlohmann::json records = nlohmann::json::array();
    for (const Result& r : results) records.push_back(to_json(r, target, o.repetitions));
    std::cout << records.dump(2) << "\n";
  } else {
    print_table(results, target, o.repetitions);
  }
}

}  // namespace

void add_bench(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Time the RoPE kernel on the benchmark cases (real model shapes x f32/f16/bf16 x table or "
      "on-the-fly cos/sin x threads), in place, against a memcpy, a scalar loop and an in-place "
      "streaming pass of the same bytes; and the fused RoPE + KV-cache append (fused-* cases) "
      "against rotate-then-copy and against its own traffic streamed with no arithmetic (x "
      "append). Progress goes to stderr. For careful numbers use posenc_bench (Google "
      "Benchmark).");
  cmd->add_option(
      "--filter", opts->filter,
      "Regular expression (ECMAScript, searched) on case names, e.g. 'decode' or 'prefill-q/f32'");
  add_integers(cmd, "--threads", opts->threads, 1, kMaxThreads,
               fmt::format("Kernel thread counts to run, e.g. 1,2; each in [1, {}]", kMaxThreads))
      ->capture_default_str();
  add_integer(cmd, "--repetitions", opts->repetitions, 1, std::numeric_limits<int>::max(),
              "Samples per timing; each reported time is their median")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json,
                "Print a JSON array with one record per case instead of the table");
  cmd->footer(
      std::string("The in-place stream is timed with and without the kernels' software prefetch "
                  "and the faster is the roofline. POSENC_SIMD_TARGET=NAME picks the SIMD "
                  "target. ") +
      kSoftwarePrefetchSetting);
  cmd->callback([opts] { run_bench(*opts); });
}

}  // namespace posenc::cli
