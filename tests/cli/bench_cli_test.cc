// `posenc bench` end to end: it runs the decode cases once and reports every field with a
// positive value, and its option errors name the option and the value. Speed itself is never
// asserted here (a timed test on a shared machine would be flaky); posenc_bench measures it.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"

namespace {

using ::testing::HasSubstr;

using posenc_cli::CliRun;

CliRun posenc(const std::string& args, const std::string& env = "") {
  return posenc_cli::run(POSENC_CLI, args, "posenc_bench_cli_test", env);
}

TEST(BenchCli, Help) {
  const CliRun r = posenc("bench --help");
  EXPECT_EQ(r.status, 0);
  for (const char* option : {"--filter", "--threads", "--repetitions", "--json"}) {
    EXPECT_THAT(r.out, HasSubstr(option));
  }
}

TEST(BenchCli, DecodeSmokeJson) {
  const CliRun r = posenc("bench --filter '^llama2-7b-decode' --repetitions 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  // 3 dtypes x table or not x threads 1 and 2.
  ASSERT_EQ(j.size(), 12u);
  std::set<std::string> names;
  for (const auto& rec : j) {
    for (const char* key :
         {"name", "dtype", "threads", "tokens", "heads", "head_dim", "table", "bytes_per_second",
          "ratio_to_memcpy", "ratio_to_scalar", "ratio_to_stream", "stream_seconds_median",
          "stream_prefetch_seconds_median", "stream_plain_seconds_median", "seconds_median",
          "target"}) {
      ASSERT_TRUE(rec.contains(key)) << key << " missing in " << rec.dump();
    }
    // The roofline is the faster of the stream with and without the software prefetch.
    EXPECT_EQ(rec["stream_seconds_median"].get<double>(),
              std::min(rec["stream_prefetch_seconds_median"].get<double>(),
                       rec["stream_plain_seconds_median"].get<double>()))
        << rec.dump();
    const std::string name = rec["name"];
    names.insert(name);
    EXPECT_THAT(name, HasSubstr("llama2-7b-decode"));
    EXPECT_TRUE(rec["table"].is_boolean());
    EXPECT_FALSE(rec["target"].get<std::string>().empty());
    EXPECT_EQ(rec["tokens"], 1);
    EXPECT_EQ(rec["heads"], 32);
    EXPECT_EQ(rec["head_dim"], 128);
    for (const char* key :
         {"threads", "bytes_per_second", "ratio_to_memcpy", "ratio_to_scalar", "ratio_to_stream",
          "stream_seconds_median", "stream_prefetch_seconds_median", "stream_plain_seconds_median",
          "seconds_median"}) {
      EXPECT_GT(rec[key].get<double>(), 0) << name << " " << key;
    }
    // The kernel's bytes: the tensor read and written once (cases.h).
    const double bytes = 2.0 * 32 * 128 * (rec["dtype"] == "f32" ? 4 : 2);
    EXPECT_NEAR(rec["bytes_per_second"].get<double>() * rec["seconds_median"].get<double>(), bytes,
                1e-6 * bytes)
        << name;
  }
  EXPECT_EQ(names.size(), j.size());
  // One progress line per case on stderr.
  EXPECT_EQ(static_cast<std::size_t>(std::count(r.err.begin(), r.err.end(), '\n')), j.size())
      << r.err;
}

// POSENC_SOFTWARE_PREFETCH takes on, off and auto; anything else stops the first call that would
// read it (one of 4 MiB or more) with an error naming the variable and the value. Its help says so.
TEST(BenchCli, SoftwarePrefetchSettingIsCheckedAndDocumented) {
  const CliRun help = posenc("bench --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_THAT(help.out, HasSubstr("POSENC_SOFTWARE_PREFETCH=on|off|auto"));
  const std::string gqa =
      "bench --filter '^llama2-7b-prefill-gqa-k/f32/table' --threads 1 "
      "--repetitions 1 --json";
  const CliRun bad = posenc(gqa, "POSENC_SOFTWARE_PREFETCH=sometimes");
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.err, HasSubstr("POSENC_SOFTWARE_PREFETCH: 'sometimes'"));
  EXPECT_THAT(bad.err, HasSubstr("on, off or auto"));
  for (const char* setting : {"on", "off", "auto"}) {
    const CliRun r = posenc(gqa, std::string("POSENC_SOFTWARE_PREFETCH=") + setting);
    ASSERT_EQ(r.status, 0) << setting << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u) << setting;
  }
}

// The Qwen2-VL image prompt's case: its layout in the record, and the kernel checked against the
// scalar loop on its ids (a difference fails the case: exit 1; tests/bench/cases_test.cc checks
// the ids themselves).
TEST(BenchCli, ImagePromptCaseCarriesItsLayout) {
  const CliRun r =
      posenc("bench --filter '^qwen2-vl-image-prefill-q/bf16/' --threads 1 --repetitions 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);  // table, on the fly
  for (const auto& rec : j) {
    EXPECT_EQ(rec["mrope_layout"], "text:32,image:1x128x126,text:32") << rec.dump();
    EXPECT_EQ(rec["tokens"], 4096);
    // The values are in [-1, 1), so |y| < 2, where a bf16 step is at most 2^-7: the kernel and
    // the scalar loop may round one float32 apart, never more than that step apart.
    EXPECT_LE(rec["max_abs_difference_to_scalar"].get<double>(), 0x1p-7) << rec["name"];
  }
  // The other cases carry none.
  const CliRun other =
      posenc("bench --filter '^mrope-decode/f32/table/threads:1' --repetitions 1 --json");
  ASSERT_EQ(other.status, 0) << other.err;
  EXPECT_FALSE(nlohmann::json::parse(other.out)[0].contains("mrope_layout"));
}

// The fused RoPE + KV-cache cases: every decode shape and dtype pair, with the speed-up over
// rotate-then-copy and the ratios over the bytes of q, k, v and the cache rows written.
TEST(BenchCli, FusedDecodeSmokeJson) {
  const CliRun r = posenc("bench --filter '^fused-decode' --repetitions 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  // {decode1, decode64} x {llama2-7b, llama3-8b} x 7 (dtype, cache dtype and scale: fp8 from bf16
  // and from f16) x threads 1 and 2.
  ASSERT_EQ(j.size(), 56u);
  std::set<std::string> names, cache_dtypes;
  std::set<double> fp8_scales;
  for (const auto& rec : j) {
    const std::string name = rec["name"];
    names.insert(name);
    EXPECT_TRUE(rec["fused"].get<bool>()) << name;
    for (const char* key :
         {"threads", "bytes_per_second", "ratio_to_memcpy", "ratio_to_stream",
          "stream_seconds_median", "seconds_median", "separate_seconds_median",
          "speedup_over_separate", "append_stream_seconds_median", "ratio_to_append_stream",
          "stream_prefetch_seconds_median", "stream_plain_seconds_median",
          "append_stream_prefetch_seconds_median", "append_stream_plain_seconds_median"}) {
      ASSERT_TRUE(rec.contains(key)) << key << " missing in " << rec.dump();
      EXPECT_GT(rec[key].get<double>(), 0) << name << " " << key;
    }
    // Both rooflines are the faster of their two forms (with and without software prefetch).
    EXPECT_EQ(rec["stream_seconds_median"].get<double>(),
              std::min(rec["stream_prefetch_seconds_median"].get<double>(),
                       rec["stream_plain_seconds_median"].get<double>()))
        << name;
    EXPECT_EQ(rec["append_stream_seconds_median"].get<double>(),
              std::min(rec["append_stream_prefetch_seconds_median"].get<double>(),
                       rec["append_stream_plain_seconds_median"].get<double>()))
        << name;
    EXPECT_TRUE(rec["ratio_to_scalar"].is_null()) << name;
    EXPECT_EQ(rec["cache_bytes_differing_from_separate"], 0) << name;
    cache_dtypes.insert(rec["cache_dtype"].get<std::string>());
    // fp8's scales: 1/64 (a power of two) and 1/448 ("-calibrated"); the other caches have none.
    const double scale = rec["cache_scale"];
    if (rec["cache_dtype"] == "fp8_e4m3") {
      fp8_scales.insert(scale);
      EXPECT_EQ(scale,
                name.find("-calibrated") != std::string::npos ? double{1.0f / 448} : 1.0 / 64)
          << name;
    } else {
      EXPECT_EQ(scale, 1.0) << name;
    }
    const double tokens = rec["tokens"], heads = rec["heads"], kv = rec["kv_heads"];
    EXPECT_EQ(kv, name.find("llama3-8b") != std::string::npos ? 8 : 32) << name;
    EXPECT_EQ(tokens, name.find("decode64") != std::string::npos ? 64 : 1) << name;
    const double in = rec["dtype"] == "f32" ? 4 : 2;
    const double cache = rec["cache_dtype"] == "f32" ? 4 : rec["cache_dtype"] == "fp8_e4m3" ? 1 : 2;
    // q read and written, k and v read, their cache rows written (cases.h).
    const double bytes = tokens * 128 * (2 * heads * in + 2 * kv * in + 2 * kv * cache);
    EXPECT_NEAR(rec["bytes_per_second"].get<double>() * rec["seconds_median"].get<double>(), bytes,
                1e-6 * bytes)
        << name;
  }
  EXPECT_EQ(names.size(), j.size());
  EXPECT_EQ(cache_dtypes, (std::set<std::string>{"f32", "f16", "bf16", "fp8_e4m3"}));
  EXPECT_EQ(fp8_scales.size(), 2u);
}

TEST(BenchCli, OptionErrorsNameTheOptionAndValue) {
  const CliRun regex = posenc("bench --filter '[' --repetitions 1");
  EXPECT_EQ(regex.status, 1);
  EXPECT_THAT(regex.err, HasSubstr("--filter (\"[\")"));
  const CliRun none = posenc("bench --filter no-such-case --repetitions 1");
  EXPECT_EQ(none.status, 1);
  EXPECT_THAT(none.err, HasSubstr("--filter (\"no-such-case\") matches no case"));
  const CliRun threads = posenc("bench --threads 0 --filter decode");
  EXPECT_EQ(threads.status, 1);
  EXPECT_THAT(threads.err, HasSubstr("--threads (0)"));
  const CliRun reps = posenc("bench --repetitions 0 --filter decode");
  EXPECT_EQ(reps.status, 1);
  EXPECT_THAT(reps.err, HasSubstr("--repetitions (0)"));
}

}  // namespace
