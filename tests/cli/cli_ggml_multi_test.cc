// `posenc apply --numerics ggml --mode mrope|imrope|vision --sections A,B,C,D` end to end: the
// tool's output against tests/reference/ggml_multi_reference.h (cache + rotate_pairs) bit for bit,
// --inverse, the JSON fields, and every refusal of bad sections, modes and position shapes.
#include <array>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/io/npy.h"
#include "posenc/rope/targets.h"
#include "reference/ggml_multi_reference.h"
#include "support/cli_expect.h"
#include "support/cli_runner.h"
#include "support/temp_files.h"

namespace {

using posenc_cli::CliRun;
using posenc_cli::expect_refused;

std::string path(const std::string& name) {
  return (posenc_test::temp_dir("posenc_cli_ggml_multi") / name).string();
}

class RemoveTempDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::filesystem::remove_all(posenc_test::temp_dir("posenc_cli_ggml_multi"));
  }
};
const auto* const kRemoveTempDir = ::testing::AddGlobalTestEnvironment(new RemoveTempDir);

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "posenc_cli_ggml_multi_run");
}

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

constexpr int kTokens = 6, kHeads = 2;

// q [tokens, heads, head_dim] float32 and positions [4, tokens] int32 (text tokens [p, p, p, 0]
// as llama.cpp's mtmd passes them, then an image's rows and columns, then a large position).
struct Inputs {
  std::vector<float> q;
  std::vector<std::array<std::int32_t, 4>> pos;
};

Inputs write_inputs(int head_dim) {
  Inputs in;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  in.q.resize(static_cast<std::size_t>(kTokens * kHeads * head_dim));
  for (float& x : in.q) x = d(rng);
  in.pos = {{0, 0, 0, 0}, {1, 1, 1, 0}, {2, 2, 3, 0},
            {2, 3, 2, 0}, {9, 9, 9, 9}, {300000, 7, 5, 2}};
  std::vector<std::int32_t> flat(4 * kTokens);
  for (int t = 0; t < kTokens; ++t)
    for (int a = 0; a < 4; ++a)
      flat[static_cast<std::size_t>(a * kTokens + t)] = in.pos[static_cast<std::size_t>(t)][a];
  const std::vector<std::int64_t> qs = {kTokens, kHeads, head_dim}, ps = {4, kTokens};
  posenc::write_npy(path("q.npy"), "<f4", qs, bytes_of(in.q));
  posenc::write_npy(path("pos.npy"), "<i4", ps, bytes_of(flat));
  const std::vector<std::int64_t> ps1 = {kTokens}, ps3 = {3, kTokens};
  posenc::write_npy(path("pos1.npy"), "<i4", ps1, bytes_of(std::vector<std::int32_t>(kTokens, 1)));
  posenc::write_npy(path("pos3.npy"), "<i4", ps3,
                    bytes_of(std::vector<std::int32_t>(3 * kTokens, 1)));
  return in;
}

// The tool's output against the reference, on the default target.
void check(const std::string& mode, std::array<int, 4> sections, int n_dims, int head_dim,
           bool inverse, const std::string& extra = "", float freq_scale = 1.0f,
           float ext_factor = 0.0f, int n_ctx_orig = 0) {
  SCOPED_TRACE(mode + " " + extra);
  const Inputs in = write_inputs(head_dim);
  const std::string s = std::to_string(sections[0]) + "," + std::to_string(sections[1]) + "," +
                        std::to_string(sections[2]) + "," + std::to_string(sections[3]);
  const std::string args = "apply --q " + path("q.npy") + " --positions " + path("pos.npy") +
                           " -o " + path("out.npy") + " --numerics ggml --mode " + mode +
                           " --sections " + s + " --n-dims " + std::to_string(n_dims) +
                           " --freq-base 1000000 --json" + (inverse ? " --inverse " : " ") + extra;
  const CliRun r = posenc(args);
  ASSERT_EQ(r.status, 0) << args << "\n" << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["numerics"], "ggml");
  EXPECT_EQ(j["ggml_mode"], mode);
  EXPECT_EQ(j["ggml_sections"], nlohmann::json(sections));
  EXPECT_EQ(j["encoding_source"], "ggml_rope_multi parameters");
  const posenc::NpyArray out = posenc::read_npy(path("out.npy"));
  ASSERT_EQ(out.data.size(), in.q.size() * 4);
  posenc_ggml::MultiParams m;
  m.rope.n_dims = n_dims;
  m.rope.freq_base = 1000000.0f;
  m.rope.freq_scale = freq_scale;
  m.rope.ext_factor = ext_factor;
  m.rope.n_ctx_orig = n_ctx_orig;
  m.mode = static_cast<posenc_ggml::MultiMode>(mode == "mrope" ? 8 : mode == "vision" ? 24 : 40);
  m.sections = sections;
  m.ne0 = head_dim;
  const std::string target = posenc::active_simd_target();
  const bool fused = target.rfind("AVX", 0) == 0 || target == "NEON" || target.rfind("SVE", 0) == 0;
  for (int t = 0; t < kTokens; ++t) {
    const std::vector<float> cache =
        posenc_ggml::MultiCache(m, in.pos[static_cast<std::size_t>(t)], inverse ? -1.0f : 1.0f);
    for (int h = 0; h < kHeads; ++h) {
      const auto at = static_cast<std::size_t>((t * kHeads + h) * head_dim);
      const std::vector<float> src(in.q.begin() + static_cast<std::ptrdiff_t>(at),
                                   in.q.begin() + static_cast<std::ptrdiff_t>(at + head_dim));
      const std::vector<float> want = posenc_ggml::RotateHead(m, cache, src, fused);
      for (int d = 0; d < head_dim; ++d) {
        float got;
        std::memcpy(&got, out.data.data() + 4 * (at + static_cast<std::size_t>(d)), 4);
        ASSERT_EQ(got, want[static_cast<std::size_t>(d)]) << "token " << t << " dim " << d;
      }
    }
  }
}

TEST(CliGgmlMulti, ApplyMatchesGgmlRopeMultiBitForBit) {
  check("mrope", {16, 24, 24, 0}, 128, 128, false);
  check("mrope", {4, 6, 6, 0}, 64, 96, true);  // repeating sections, a partial head
  check("imrope", {24, 20, 20, 0}, 128, 128, false);
  check("imrope", {24, 20, 20, 0}, 128, 128, true,
        "--freq-scale 0.25 --ext-factor 1 --n-ctx-orig 32768", 0.25f, 1.0f, 32768);
  check("vision", {20, 20, 20, 20}, 40, 80, false);
  check("vision", {16, 16, 0, 0}, 32, 64, true);
}

TEST(CliGgmlMulti, VisionDefaultsNDimsToHalfTheHead) {
  write_inputs(80);
  const CliRun r =
      posenc("apply --q " + path("q.npy") + " --positions " + path("pos.npy") + " -o " +
             path("out.npy") + " --mode vision --sections 20,20,20,20 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rotary_dim"], 80);
  EXPECT_EQ(j["layout"], "half-split");
}

TEST(CliGgmlMulti, RefusesBadSectionsModesAndPositions) {
  write_inputs(128);
  const std::string base =
      "apply --q " + path("q.npy") + " -o " + path("out.npy") + " --numerics ggml ";
  const std::string pos = " --positions " + path("pos.npy");
  struct Bad {
    std::string args;
    std::vector<std::string> words;
  };
  const std::vector<Bad> bad = {
      {"--mode mrope --sections 16,24,24" + pos, {"--sections (\"16,24,24\")", "4 comma-sep"}},
      {"--mode mrope --sections 16,24,24,0,1" + pos, {"--sections (\"16,24,24,0,1\")"}},
      {"--mode mrope --sections 16,-24,24,0" + pos, {"non-negative integers"}},
      {"--mode mrope --sections 16,x,24,0" + pos, {"--sections (\"16,x,24,0\")"}},
      {"--mode mrope --sections 16,,24,0" + pos, {"--sections (\"16,,24,0\")"}},
      {"--mode imrope --sections 0,0,0,0" + pos, {"sections [0, 0, 0, 0]", "positive t, h or w"}},
      {"--mode imrope --sections 0,0,0,64" + pos, {"sections [0, 0, 0, 64]", "positive t, h or w"}},
      {"--mode mrope --sections 100,100,100,0" + pos, {"sum to 300", "head dim (128"}},
      {"--mode vision --n-dims 32 --sections 8,8,0,0" + pos,
       {"n_dims (32) must be head_dim / 2 (head_dim 128)"}},
      {"--mode mrope" + pos, {"--mode mrope (ggml_rope_multi) needs --sections"}},
      {"--mode vision" + pos, {"--mode vision (ggml_rope_multi) needs --sections"}},
      {"--mode neox --sections 16,24,24,0" + pos, {"--sections (\"16,24,24,0\") is read only by"}},
      {"--n-dims 128 --sections 16,24,24,0" + pos, {"--mode normal takes one position"}},
      {"--mode mrop --sections 16,24,24,0" + pos, {"--mode (\"mrop\")", "imrope (40)"}},
      {"--mode mrope --sections 16,24,24,0 --positions " + path("pos1.npy"),
       {"holds 1 axis", "reads 4 axes", "give [4, 6] positions"}},
      {"--mode mrope --sections 16,24,24,0 --positions " + path("pos3.npy"),
       {"holds 3 axes", "reads 4 axes"}},
  };
  for (const Bad& b : bad) {
    const CliRun r = posenc(base + b.args);
    expect_refused(r, b.words, b.args);
  }
}

TEST(CliGgmlMulti, HelpListsTheMultiModes) {
  const CliRun r = posenc("apply --help");
  ASSERT_EQ(r.status, 0);
  EXPECT_THAT(r.out, ::testing::HasSubstr("--sections"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("imrope (40)"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("[4, tokens]"));
}

}  // namespace
