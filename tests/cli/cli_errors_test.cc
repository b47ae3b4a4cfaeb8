// The CLI refuses what it cannot honour (issue 9): options that would be dropped, integers that do
// not fit, thread counts past the limit, and errors that say what was expected and why.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/threads.h"
#include "posenc/io/npy.h"
#include "posenc/llama/llama.h"
#include "posenc/llama/perplexity.h"
#include "posenc/rope/apply.h"
#include "support/cli_expect.h"
#include "support/cli_runner.h"

namespace {

using posenc_cli::CliRun;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kShared = POSENC_SHARED_DIR;
const std::string kModel = kShared + "/models/stories260K/tinystories_260k_v1.bin";
const std::string kText = kShared + "/data/austen/prideprejudice.txt";
const std::string kLlama = kShared + "/testdata/hf-configs/llama-2-7b.json";
const std::string kEval =
    "eval --model " + kModel + " --text " + kText + " --ctx 256 --max-tokens 512 ";
const std::string kGenerate = "generate --model " + kModel + " --prompt Once --tokens 2 ";

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "posenc_cli_errors_test");
}

std::filesystem::path dir() {
  static const auto p = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("posenc_cli_errors_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return p;
}

std::string path(const std::string& name) { return (dir() / name).string(); }

// q [tokens, heads, head_dim] float32, written once.
std::string tensor(const std::string& name, std::int64_t tokens = 2, std::int64_t heads = 1,
                   std::int64_t dim = 8) {
  std::vector<float> v(static_cast<std::size_t>(tokens * heads * dim), 0.5f);
  const std::vector<std::int64_t> shape{tokens, heads, dim};
  posenc::write_npy(path(name), "<f4", shape, std::as_bytes(std::span(v)));
  return path(name);
}

// Every error: status 1, "posenc: error:", the expected words, never CLI11's or an internal error.
void expect_error(const std::string& args, const std::vector<std::string>& words) {
  const CliRun r = posenc(args);
  posenc_cli::expect_refused(r, words, args);
  EXPECT_THAT(r.err, Not(HasSubstr("Could not convert"))) << args;
}

// --- A: options whose value would be dropped ---

TEST(CliErrors, GenerateRefusesAFactorItsMethodDoesNotRead) {
  expect_error(kGenerate + "--method none --factor 8", {"--factor (8)", "none"});
  expect_error(kGenerate + "--method dynamic-yarn --factor 8", {"--factor (8)", "dynamic-yarn"});
  const CliRun ok = posenc(kGenerate + "--method linear --factor 2");
  EXPECT_EQ(ok.status, 0) << ok.err;
}

TEST(CliErrors, GenerateRefusesASeedWhenGreedy) {
  expect_error(kGenerate + "--seed 7", {"--seed (7)", "--temperature"});
  const CliRun ok = posenc(kGenerate + "--seed 7 --temperature 0.5");
  EXPECT_EQ(ok.status, 0) << ok.err;
}

TEST(CliErrors, EvalRefusesOptionsItsMethodsDoNotRead) {
  expect_error(kEval + "--method none,yarn --attention-factor 1.2",
               {"--attention-factor (1.2)", "none"});
  expect_error(kEval + "--method linear,dynamic-yarn --factor 2", {"--factor (2)", "dynamic-yarn"});
  expect_error(kEval + "--method linear,yarn --step 16", {"--step (16)", "linear,yarn"});
  const CliRun ok = posenc(kEval + "--method yarn --attention-factor 1.2 --json");
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(ok.out)["attention_factor"].get<double>(), 1.2);
}

TEST(CliErrors, ListsRefuseEmptyItems) {
  expect_error("eval --model " + kModel + " --text " + kText + " --ctx 16,,32",
               {"--ctx (\"16,,32\")", "item 2 is empty"});
  expect_error("eval --model " + kModel + " --text " + kText + " --method none,",
               {"--method (\"none,\")", "item 2"});
  expect_error("bench --threads 1, --repetitions 1", {"--threads (\"1,\")", "item 2 is empty"});
  expect_error("compare " + kLlama + " --positions ''", {"--positions (\"\") must not be empty"});
}

TEST(CliErrors, EmptyNamesAndPathsAreErrors) {
  const std::string q = tensor("q_empty.npy");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"report --preset '' -o " + path("r.html"), "--preset"},
      {"inspect " + kLlama + " --layer-type ''", "--layer-type"},
      {"inspect ''", "model"},
      {"inspect --preset ''", "--preset"},
      {"plot wavelengths -o ''", "--output"},
      {"report -o ''", "--output"},
      {kEval + "--method none -o ''", "--output"},
      {"apply --q " + q + " --positions-range 0 -o ''", "--output"},
      {"apply --q " + q + " --positions-range 0 -o " + path("o.npy") + " --k " + q + " --k-out ''",
       "--k-out"},
      {"apply --q '' --positions-range 0 -o " + path("o.npy"), "--q"},
      {"apply --q " + q + " --positions '' -o " + path("o.npy"), "--positions"},
      {"apply --q " + q + " --positions-range 0 -o " + path("o.npy") + " --rope-type ''",
       "--rope-type"},
      {"inspect " + kLlama + " --scaling ''", "--scaling"},
      {"inspect " + kLlama + " --numerics ''", "--numerics"},
      {"eval --model '' --text " + kText, "--model"},
  };
  for (const auto& [args, option] : cases)
    expect_error(args, {option + " (\"\") must not be empty"});
}

TEST(CliErrors, CompareRefusesASeqLenBelowItsPositions) {
  expect_error("compare " + kLlama + " --positions 0,100 --seq-len 50", {"--seq-len (50)", "100"});
  expect_error("compare " + kLlama + " --positions 100 --seq-len 100", {"--seq-len (100)"});
  EXPECT_EQ(posenc("compare " + kLlama + " --positions 0,100 --seq-len 101").status, 0);
  EXPECT_EQ(posenc("compare " + kLlama + " --positions 0,100 --seq-len 0").status, 0);
}

TEST(CliErrors, SeqLenIsRefusedWhereTheMethodIgnoresIt) {
  expect_error("inspect " + kLlama + " --seq-len 9000", {"--seq-len (9000)", "default"});
  expect_error("inspect " + kLlama + " --scaling yarn --factor 4 --seq-len 9000",
               {"--seq-len (9000)", "yarn"});
  EXPECT_EQ(posenc("inspect " + kLlama + " --scaling dynamic --factor 4 --seq-len 9000").status, 0);
  const std::string q = tensor("q_seq.npy");
  expect_error("apply --q " + q + " --positions-range 0 -o " + path("o.npy") + " --seq-len 5",
               {"--seq-len (5)"});
  EXPECT_EQ(posenc("apply --q " + q + " --positions-range 0 -o " + path("o.npy") +
                   " --rope-type dynamic --factor 2 --max-position-embeddings 32 --seq-len 5")
                .status,
            0);
}

// --- B: integers that do not fit are refused with the range, never clamped ---

TEST(CliErrors, OverflowingIntegersNameTheOptionValueAndRange) {
  const std::string big = "99999999999999999999";
  const std::string q = tensor("q_big.npy");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"inspect " + kLlama + " --scaling dynamic --factor 2 --seq-len " + big, "--seq-len"},
      {"compare " + kLlama + " --seq-len " + big, "--seq-len"},
      {"apply --q " + q + " -o " + path("o.npy") + " --positions-range " + big,
       "--positions-range"},
      {"apply --q " + q + " --positions-range 0 -o " + path("o.npy") +
           " --rope-type dynamic --seq-len " + big,
       "--seq-len"},
      {"apply --q " + q + " --positions-range 0 -o " + path("o.npy") + " --head-dim " + big,
       "--head-dim"},
      {"apply --q " + q + " --positions-range 0 -o " + path("o.npy") + " --n-dims " + big,
       "--n-dims"},
      {"inspect " + kLlama + " --scaling yarn --target-context " + big, "--target-context"},
      {"eval --model " + kModel + " --text " + kText + " --ctx 512," + big, "item (" + big + ")"},
      {"plot sinusoidal -o - --positions " + big, "--positions"},
      {"verify --d-model " + big, "--d-model"},
      {"verify --seed " + big, "--seed"},
      {"generate --model " + kModel + " --prompt Once --tokens " + big, "--tokens"},
      {"bench --repetitions " + big, "--repetitions"},
  };
  for (const auto& [args, option] : cases) {
    expect_error(args, {option, big + ") must be an integer in ["});
  }
  expect_error("verify --seed -1", {"--seed (-1) must be an integer in [0, 18446744073709551615]"});
  expect_error("compare " + kLlama + " --positions 1,-2", {"item (-2) must be an integer in [0, "});
}

TEST(CliErrors, NumbersAndBooleansSayTheExpectedForm) {
  const std::string q = tensor("q_num.npy");
  const std::string apply = "apply --q " + q + " --positions-range 0 -o " + path("o.npy");
  expect_error(apply + " --rope-type linear --factor abc",
               {"--factor (abc) must be a finite number"});
  expect_error(apply + " --rope-theta inf", {"--rope-theta (inf) must be a finite number"});
  expect_error(apply + " --freq-base 1e40",
               {"--freq-base (1e40) must be a finite number within float32's range"});
  expect_error(apply + " --rope-type yarn --truncate maybe",
               {"--truncate (\"maybe\") must be true or false"});
  expect_error("inspect " + kLlama + " --scaling yarn --factor 2x",
               {"--factor (2x) must be a finite number"});
  expect_error(kGenerate + "--temperature warm", {"--temperature (warm) must be a finite number"});
}

// --- C: thread counts ---

TEST(CliErrors, ThreadsAboveTheMaximumAreRefused) {
  const std::string q = tensor("q_threads.npy");
  const std::string range =
      "must be an integer in [1, " + std::to_string(posenc::kMaxThreads) + "]";
  expect_error("apply --q " + q + " --positions-range 0 -o " + path("o.npy") + " --threads 40000",
               {"--threads (40000) " + range});
  expect_error("bench --threads 1,40000 --filter decode --repetitions 1",
               {"item (40000) " + range});
  expect_error(kEval + "--method none --threads 40000", {"--threads (40000) " + range});
  expect_error(kGenerate + "--threads 40000", {"--threads (40000) " + range});
  const CliRun help = posenc("apply --help");
  EXPECT_THAT(help.out, HasSubstr("[1, " + std::to_string(posenc::kMaxThreads) + "]"));
}

TEST(CliErrors, ApplyReportsTheThreadsThatRan) {
  // 2 tokens x 1 head x 8 dims is far too small to split: one thread runs whatever is asked.
  const std::string q = tensor("q_ran.npy");
  const CliRun r =
      posenc("apply --q " + q + " --positions-range 0 -o " + path("o.npy") + " --threads 4 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["threads_requested"], 4);
  const CliRun text =
      posenc("apply --q " + q + " --positions-range 0 -o " + path("o.npy") + " --threads 4");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.err, HasSubstr(", 1 thread"));
}

// The largest count allowed warns exactly when it is above the hardware's (on a machine with
// kMaxThreads hardware threads or more it must not).
TEST(CliErrors, ThreadsAboveTheHardwareGiveAWarning) {
  const std::string q = tensor("q_over.npy");
  const CliRun r = posenc("apply --q " + q + " --positions-range 0 -o " + path("o.npy") +
                          " --threads " + std::to_string(posenc::kMaxThreads));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string warning =
      "posenc: warning: --threads (" + std::to_string(posenc::kMaxThreads) + ")";
  if (posenc::hardware_threads() < posenc::kMaxThreads) {
    EXPECT_THAT(r.err, HasSubstr(warning));
    EXPECT_THAT(r.err, HasSubstr("hardware threads; running " +
                                 std::to_string(posenc::hardware_threads()) + " threads"));
  } else {
    EXPECT_THAT(r.err, Not(HasSubstr(warning)));
  }
}

TEST(CliErrors, BenchReportsTheThreadsThatRan) {
  const CliRun r = posenc("bench --filter 'decode/f32/table' --threads 2 --repetitions 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j.empty());
  for (const auto& rec : j) {
    ASSERT_TRUE(rec.contains("threads_used")) << rec.dump();
    EXPECT_GE(rec["threads_used"].get<int>(), 1);
    EXPECT_LE(rec["threads_used"].get<int>(), rec["threads"].get<int>());
  }
}

TEST(ThreadLimits, LibraryFunctionsRefuseCountsOutsideTheRange) {
  posenc::RopeSpec spec;
  spec.head_dim = spec.rotary_dim = 8;
  const posenc::Frequencies f = posenc::compute_frequencies(spec, posenc::Numerics::kPrecise);
  std::vector<float> q(16, 1.0f);
  const std::vector<std::int32_t> pos{0, 1};
  posenc::RopeArgs args;
  args.q = posenc::TensorView::contiguous(q.data(), posenc::DType::kF32, 2, 1, 8);
  args.positions = std::span<const std::int32_t>(pos);
  for (int bad : {0, -3, posenc::kMaxThreads + 1, 40000}) {
    args.threads = bad;
    try {
      posenc::apply_rope(f, args);
      ADD_FAILURE() << "threads " << bad << " accepted";
    } catch (const posenc::Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("apply_rope: threads (" + std::to_string(bad) +
                                      ") must be in [1, 256]"));
    }
    try {
      posenc::rerotate_keys(f, f, args.q, args.positions, bad);
      ADD_FAILURE() << "threads " << bad << " accepted";
    } catch (const posenc::Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("rerotate_keys: threads (" + std::to_string(bad) + ")"));
    }
  }
  args.threads = posenc::kMaxThreads;
  EXPECT_EQ(posenc::apply_rope(f, args), 1);  // too small to split

  const posenc::llama::Model model = posenc::llama::Model::load(kModel);
  const std::vector<std::int32_t> tokens(64, 1);
  posenc::llama::PerplexityOptions po;
  po.ctx = 16;
  po.threads = 40000;
  try {
    posenc::llama::perplexity(model, model.rope_spec(), tokens, po);
    ADD_FAILURE() << "perplexity accepted 40000 threads";
  } catch (const posenc::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("perplexity: threads (40000) must be in [1, 256]"));
  }
  try {
    posenc::llama::Session session(model,
                                   {.rope = model.rope_spec(), .capacity = 8, .threads = 300});
    ADD_FAILURE() << "Session accepted 300 threads";
  } catch (const posenc::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("session: threads (300) must be in [1, 256]"));
  }
}

// --- D: clear errors ---

TEST(CliErrors, UnknownCommandIsNamedWithTheList) {
  expect_error("bogus", {"unknown command \"bogus\"", "inspect", "apply", "eval"});
  expect_error("", {"a command is required", "inspect", "generate"});
  EXPECT_EQ(posenc("--version").status, 0);
}

TEST(CliErrors, WriteErrorsSayWhy) {
  const std::string missing = path("no-such-folder") + "/out";
  const std::string q = tensor("q_write.npy");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plot wavelengths -o " + missing + ".svg",
       "-o: cannot write " + missing + ".svg: No such file or directory"},
      {"report -o " + missing + ".html",
       "-o: cannot write " + missing + ".html: No such file or directory"},
      {kEval + "--method none -o " + missing + ".svg",
       "-o: cannot write " + missing + ".svg: No such file or directory"},
      {"apply --q " + q + " --positions-range 0 -o " + missing + ".npy",
       "-o: cannot write " + missing + ".npy"},
  };
  for (const auto& [args, words] : cases) expect_error(args, {words});
  const CliRun r = posenc("apply --q " + q + " --positions-range 0 -o " + missing + ".npy");
  EXPECT_THAT(r.err, HasSubstr("No such file or directory"));
}

TEST(CliErrors, ApplyWritesBothOutputsOrNeither) {
  const std::string q = tensor("q_both.npy");
  const std::string out = path("both_q_out.npy");
  std::filesystem::remove(out);
  const CliRun r = posenc("apply --q " + q + " --k " + q + " --positions-range 0 -o " + out +
                          " --k-out " + path("no-such-folder") + "/k.npy");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("--k-out: cannot write"));
  EXPECT_FALSE(std::filesystem::exists(out)) << "-o was written although --k-out failed";
  for (const auto& e : std::filesystem::directory_iterator(dir())) {
    EXPECT_THAT(e.path().filename().string(), Not(HasSubstr("posenc-tmp")))
        << "temporary file left behind";
  }
  // An existing -o stays as it was.
  std::filesystem::copy_file(q, out, std::filesystem::copy_options::overwrite_existing);
  const std::string before = posenc_cli::slurp(out);
  EXPECT_EQ(posenc("apply --q " + q + " --k " + q + " --positions-range 3 -o " + out + " --k-out " +
                   path("no-such-folder") + "/k.npy")
                .status,
            1);
  EXPECT_EQ(posenc_cli::slurp(out), before);
}

TEST(CliErrors, SimdTargetNamesIgnoreCase) {
  const CliRun list = posenc("targets --json");
  ASSERT_EQ(list.status, 0) << list.err;
  const auto targets =
      nlohmann::json::parse(list.out);  // kept alive: the loop ranges over a member
  for (const auto& t : targets["targets"]) {
    if (!t["supported"].get<bool>()) continue;
    std::string name = t["name"].get<std::string>();
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    const CliRun r = posenc_cli::run("POSENC_SIMD_TARGET=" + lower + " " + std::string(POSENC_CLI),
                                     "targets --json", "posenc_cli_errors_test");
    ASSERT_EQ(r.status, 0) << lower << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["active"], name) << lower;
  }
  const CliRun bogus = posenc_cli::run("POSENC_SIMD_TARGET=nosuch " + std::string(POSENC_CLI),
                                       "targets", "posenc_cli_errors_test");
  EXPECT_EQ(bogus.status, 1);
  EXPECT_THAT(bogus.err, HasSubstr("POSENC_SIMD_TARGET"));
  EXPECT_THAT(bogus.err, HasSubstr("nosuch"));
}

}  // namespace
