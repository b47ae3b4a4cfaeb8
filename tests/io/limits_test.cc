// Bounded resources (issue 9): every reader caps what it takes into memory and checks the first
// bytes before the rest; every size a caller chooses has a stated limit, refused with an Error
// that names the parameter, the value and the limit.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/analysis/verify.h"
#include "posenc/core/error.h"
#include "posenc/io/config.h"
#include "posenc/io/gguf.h"
#include "posenc/io/npy.h"
#include "posenc/llama/llama.h"
#include "posenc/llama/perplexity.h"
#include "posenc/report/figures.h"
#include "posenc/report/report.h"
#include "support/error_of.h"
#include "support/shared_data.h"
#include "support/temp_files.h"

namespace {

using posenc::testing::error_of;

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string& kModel = posenc_test::kStoriesModel;
const std::string& kGguf = posenc_test::kStoriesGguf;
const std::string& kConfig = posenc_test::kLlama2Config;

std::filesystem::path temp_dir() { return posenc_test::temp_dir("posenc_limits_test"); }

std::string write_file(const std::string& name, const std::string& bytes) {
  return posenc_test::write_temp_file("posenc_limits_test", name, bytes);
}

// A sparse file of `size` bytes that starts with `head` (no disk space for the rest).
std::string sparse_file(const std::string& name, const std::string& head, std::uint64_t size) {
  const std::string path = write_file(name, head);
  std::filesystem::resize_file(path, size);
  return path;
}

// A pipe fed by a thread with `head` and then `fill` bytes forever (until the reader closes it);
// read through /dev/fd/N like a shell's <(...).
class Pipe {
 public:
  Pipe(std::string head, char fill) {
    std::signal(SIGPIPE, SIG_IGN);
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    read_fd_ = fds[0];
    write_fd_ = fds[1];
    writer_ = std::thread([this, head = std::move(head), fill] {
      std::string chunk(1 << 16, fill);
      if (::write(write_fd_, head.data(), head.size()) < 0) return;
      while (!stop_ && ::write(write_fd_, chunk.data(), chunk.size()) > 0) {
      }
    });
  }
  ~Pipe() {
    stop_ = true;
    ::close(read_fd_);  // the writer's next write fails with EPIPE
    writer_.join();
    ::close(write_fd_);
  }
  std::string path() const { return "/dev/fd/" + std::to_string(read_fd_); }

 private:
  int read_fd_ = -1, write_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread writer_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --- readers: caps ---------------------------------------------------------------------------

TEST(ReaderLimits, ConfigLargerThanTheCapIsRefusedWithTheCap) {
  const std::string path = sparse_file("big.json", "{", posenc::kMaxConfigBytes + 1);
  EXPECT_THAT(error_of([&] { posenc::load_hf_config(path); }),
              AllOf(HasSubstr(path), HasSubstr("larger than 64 MiB"), HasSubstr("config.json")));
}

TEST(ReaderLimits, ConfigFromAnEndlessPipeStopsAtTheCap) {
  const Pipe pipe("{", ' ');
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THAT(error_of([&] { posenc::load_hf_config(pipe.path()); }),
              AllOf(HasSubstr("more than 64 MiB from a pipe or device"), HasSubstr("config.json")));
  EXPECT_LT(seconds_since(t0), 10.0);
}

TEST(ReaderLimits, TextLargerThanTheCapIsRefusedWithTheCap) {
  const std::string path =
      sparse_file("big.txt", "Once upon a time", posenc::llama::kMaxTextBytes + 1);
  EXPECT_THAT(
      error_of([&] { posenc::llama::read_text(path); }),
      AllOf(HasSubstr(path), HasSubstr("larger than 64 MiB"), HasSubstr("the limit for a text")));
}

TEST(ReaderLimits, TextIsReadAsItIs) {
  const std::string path = write_file("story.txt", std::string("Once\0upon\n", 10));
  EXPECT_EQ(posenc::llama::read_text(path), std::string("Once\0upon\n", 10));
  EXPECT_EQ(posenc::llama::read_text(write_file("empty.txt", "")), "");
}

TEST(ReaderLimits, ModelLargerThanTheCapIsRefusedWithTheCap) {
  const std::string path =
      sparse_file("big.bin", std::string(1, '\x01'), posenc::llama::kMaxModelBytes + 1);
  EXPECT_THAT(error_of([&] { posenc::llama::Model::load(path); }),
              AllOf(HasSubstr("cannot read " + path), HasSubstr("larger than 8 GiB"),
                    HasSubstr("model file")));
}

// --- readers: the first bytes, before the rest ------------------------------------------------

TEST(ReaderStart, DevZeroIsRefusedByItsFirstBytes) {
  for (const auto& [name, read] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"config", [] { posenc::load_hf_config("/dev/zero"); }},
           {"gguf", [] { posenc::read_gguf("/dev/zero"); }},
           {"npy", [] { posenc::read_npy("/dev/zero"); }},
           {"model", [] { posenc::llama::Model::load("/dev/zero"); }}}) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THAT(error_of(read), HasSubstr("/dev/zero")) << name;
    EXPECT_LT(seconds_since(t0), 1.0) << name;
  }
  EXPECT_THAT(error_of([] { posenc::load_hf_config("/dev/zero"); }),
              AllOf(HasSubstr("not a config.json"), HasSubstr("0x00")));
}

TEST(ReaderStart, WrongFormatFromAPipeIsRefusedAfterTheFirstRead) {
  {
    const Pipe pipe("NOPE", '\0');
    EXPECT_THAT(error_of([&] { posenc::read_gguf(pipe.path()); }), HasSubstr("not a GGUF file"));
  }
  {
    const Pipe pipe("GGUF", '\0');  // a pipe fed a GGUF would be taken, up to the cap
    EXPECT_THAT(error_of([&] { posenc::read_npy(pipe.path()); }),
                AllOf(HasSubstr("not a .npy file"), HasSubstr("this is a GGUF file")));
  }
}

TEST(ReaderStart, ReadersSayWhatAForeignFileIs) {
  const std::string npy =
      write_file("q.npy", std::string("\x93NUMPY\x01\x00", 8) + std::string(100, ' '));
  EXPECT_THAT(error_of([&] { posenc::read_gguf(npy); }), HasSubstr("this is a NumPy .npy file"));
  EXPECT_THAT(error_of([&] { posenc::read_npy(kGguf); }), HasSubstr("this is a GGUF file"));
  EXPECT_THAT(error_of([&] { posenc::load_hf_config(kGguf); }),
              AllOf(HasSubstr("not a config.json"), HasSubstr("this is a GGUF file")));
  EXPECT_THAT(error_of([&] { posenc::load_hf_config(kModel); }),
              HasSubstr("this is a llama2.c / llama2.ts v1 model file"));
  EXPECT_THAT(error_of([&] { posenc::llama::read_text(kGguf); }),
              AllOf(HasSubstr("GGUF"), HasSubstr("not a text")));
}

TEST(ReaderStart, ModelLoaderNamesTheForeignFormatAndWhatItReads) {
  const std::string npy =
      write_file("k.npy", std::string("\x93NUMPY\x01\x00", 8) + std::string(100, ' '));
  for (const auto& [file, looks] :
       std::vector<std::pair<std::string, std::string>>{{kGguf, "this is a GGUF file"},
                                                        {kConfig, "this is JSON text"},
                                                        {npy, "this is a NumPy .npy file"}}) {
    const std::string path = file;  // clang 14 cannot capture a structured binding
    EXPECT_THAT(error_of([&] { posenc::llama::Model::load(path); }),
                AllOf(HasSubstr(path), HasSubstr(looks), HasSubstr("format version"),
                      HasSubstr("llama2.c / llama2.ts v1 model file"), HasSubstr("stories260K")))
        << path;
  }
}

TEST(ReaderStart, DirectoriesAndMissingFilesNameThePathAndTheReason) {
  const std::string dir = temp_dir().string();
  EXPECT_THAT(error_of([&] { posenc::llama::Model::load(dir); }),
              AllOf(HasSubstr("cannot read " + dir), HasSubstr("Is a directory")));
  EXPECT_THAT(error_of([&] { posenc::llama::read_text(dir); }),
              AllOf(HasSubstr(dir), HasSubstr("Is a directory")));
  EXPECT_THAT(error_of([&] { posenc::llama::read_text(dir + "/missing.txt"); }),
              HasSubstr("No such file"));
  EXPECT_THAT(error_of([&] { posenc::load_hf_config(dir); }),
              AllOf(HasSubstr(dir), HasSubstr("Is a directory")));
}

// --- the v1 header: sizes that cannot fit ------------------------------------------------------

std::string v1_header(std::int32_t dim, std::int32_t hidden, std::int32_t vocab,
                      std::int32_t layers, std::int32_t heads, std::int32_t kv_heads) {
  std::string h(256, '\0');
  h[0] = 1;
  auto put = [&h](std::size_t at, std::int32_t v) { std::memcpy(h.data() + at, &v, 4); };
  put(1, 5);
  std::memcpy(h.data() + 5, "llama", 5);
  const std::int32_t values[] = {dim, hidden, 512, vocab, layers, heads, kv_heads};
  for (int i = 0; i < 7; ++i) put(10 + 4 * static_cast<std::size_t>(i), values[i]);
  h[38] = 1;  // tied
  return h;
}

TEST(ModelHeader, WeightsBeyondTheCapAreRefusedWithoutOverflow) {
  // dim = hidden = layers = 2^20: 3 L I H alone is 3 * 2^60, past int64 once multiplied by 4.
  std::string bytes = v1_header(1 << 20, 1 << 20, 1, 1 << 20, 1 << 10, 1 << 10);
  bytes += std::string(8, '\0');  // one vocabulary piece: score 0, length 0
  EXPECT_THAT(error_of([&] {
                posenc::llama::Model::parse(
                    std::span(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()),
                    "m.bin");
              }),
              AllOf(HasSubstr("more than 8 GiB"), HasSubstr("dim 1048576")));
}

// --- sessions: the KV cache --------------------------------------------------------------------

TEST(SessionLimits, CapacityIsBoundedByTheKvCache) {
  const auto model = posenc::llama::Model::load(kModel);
  // stories260K: 5 layers x kv_dim 32 x 4 bytes x 2 = 1280 bytes a position.
  EXPECT_EQ(posenc::llama::kv_cache_bytes_per_position(model.config()), 1280);
  EXPECT_EQ(posenc::llama::max_capacity(model.config()), 3355443);
  EXPECT_THAT(
      error_of(
          [&] { posenc::llama::Session(model, {.rope = model.rope_spec(), .capacity = 3355444}); }),
      AllOf(HasSubstr("capacity (3355444)"), HasSubstr("at most 3355443"), HasSubstr("4 GiB")));
  posenc::llama::PerplexityOptions o;
  o.ctx = 1'000'000'000;
  const std::vector<std::int32_t> tokens(10, 5);
  EXPECT_THAT(error_of([&] { posenc::llama::perplexity(model, model.rope_spec(), tokens, o); }),
              AllOf(HasSubstr("ctx (1000000000)"), HasSubstr("at most 3355443")));
}

// --- verify, figures, report: work bounded to seconds ------------------------------------------

TEST(WorkLimits, VerifyRefusesPositionsAndWidthsPastItsLimits) {
  EXPECT_THAT(
      error_of([] {
        posenc::verify_claims({.d_model = 512, .positions = posenc::kMaxVerifyPositions + 1});
      }),
      AllOf(HasSubstr("positions (" + std::to_string(posenc::kMaxVerifyPositions + 1) + ")"),
            HasSubstr(std::to_string(posenc::kMaxVerifyPositions) + "]")));
  EXPECT_THAT(error_of([] { posenc::verify_claims({.d_model = 16384, .positions = 512}); }),
              AllOf(HasSubstr("d_model (16384)"),
                    HasSubstr(std::to_string(posenc::kMaxVerifyDModel) + "]")));
  EXPECT_THAT(error_of([] { posenc::verify_claims({.d_model = 1024, .positions = 2048}); }),
              AllOf(HasSubstr("positions * d_model (2048 * 1024)"), HasSubstr("at most 1048576")));
}

TEST(WorkLimits, SimilarityFigureCountsItsPositionsSquaredCells) {
  const posenc::SinusoidalSpec spec{16};
  EXPECT_NO_THROW(
      posenc::figures::similarity_figure(spec, posenc::figures::kMaxSimilarityPositions));
  EXPECT_THAT(error_of([&] { posenc::figures::similarity_figure(spec, 4096); }),
              AllOf(HasSubstr("positions (4096)"), HasSubstr("at most 1000")));
}

TEST(WorkLimits, SinusoidalFigureCellsDoNotOverflow) {
  // 4096 * 2^62 wraps int64 to 0: the check must not multiply.
  const posenc::SinusoidalSpec spec{std::int64_t{1} << 62};
  EXPECT_THAT(error_of([&] { posenc::figures::sinusoidal_figure(spec, 4096); }),
              AllOf(HasSubstr("positions * d_model"), HasSubstr("1000000")));
}

posenc::RopeSpec wide_spec(std::int64_t head_dim) {
  posenc::RopeSpec s;
  s.head_dim = head_dim;
  s.rotary_dim = head_dim;
  s.original_max_position_embeddings = 4096;
  return s;
}

TEST(WorkLimits, DecayFigureAndReportRefuseMorePairsThanTheLimit) {
  const posenc::RopeSpec wide = wide_spec(2 * posenc::figures::kMaxDecayPairs + 2);
  const std::string pairs = "(" + std::to_string(posenc::figures::kMaxDecayPairs + 1) + " pairs";
  EXPECT_THAT(error_of([&] { posenc::figures::decay_figure(wide); }),
              AllOf(HasSubstr("decay figure"), HasSubstr(pairs),
                    HasSubstr(std::to_string(posenc::figures::kMaxDecayPairs))));
  posenc::ReportOptions r;
  r.config.spec = wide;
  r.compare = false;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THAT(error_of([&] { posenc::html_report(r); }),
              AllOf(HasSubstr("report"), HasSubstr(pairs)));
  EXPECT_LT(seconds_since(t0), 1.0);
  EXPECT_NO_THROW(posenc::figures::decay_figure(wide_spec(2 * posenc::figures::kMaxDecayPairs)));
}

}  // namespace
