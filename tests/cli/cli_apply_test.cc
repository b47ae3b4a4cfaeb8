// End-to-end tests of `posenc apply` and `posenc targets`: tensors written as .npy, rotated by
// the tool, read back and compared with a float64 rotation written here from docs/design.md §5
// (sharing no code with src/), on every SIMD target this machine supports.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/core/frequencies.h"
#include "posenc/io/config.h"
#include "posenc/io/npy.h"
#include "posenc/rope/apply.h"
#include "support/cli_runner.h"

namespace {

using ::testing::HasSubstr;

using posenc_cli::CliRun;
using posenc_cli::slurp;

std::filesystem::path dir() {
  static const auto d = [] {
    auto p =
        std::filesystem::temp_directory_path() / ("posenc_cli_apply_" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

std::string path(const std::string& name) { return (dir() / name).string(); }

class RemoveTempDir : public ::testing::Environment {
 public:
  void TearDown() override { std::filesystem::remove_all(dir()); }
};
const auto* const kRemoveTempDir = ::testing::AddGlobalTestEnvironment(new RemoveTempDir);

// Runs `env posenc <args>` with stdout and stderr captured separately.
CliRun posenc(const std::string& args, const std::string& env = "") {
  return posenc_cli::run(POSENC_CLI, args, "posenc_cli_apply_run", env);
}

// A [tokens, heads, head_dim] tensor as stored: raw items of one dtype.
struct Tensor {
  std::string descr;  // "<f4", "<f2", or "<u2" holding bfloat16
  bool bf16 = false;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;

  std::int64_t size() const { return shape[0] * shape[1] * shape[2]; }
  double at(std::int64_t i) const {
    if (descr == "<f4") {
      float f;
      std::memcpy(&f, data.data() + 4 * i, 4);
      return f;
    }
    std::uint16_t h;
    std::memcpy(&h, data.data() + 2 * i, 2);
    if (bf16) {
      const std::uint32_t bits = std::uint32_t{h} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    const int e = (h >> 10) & 31, m = h & 1023;
    EXPECT_NE(e, 31) << "inf or NaN in a float16 tensor";
    const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
  }
  // The spacing of the storage type at |x| (subnormal spacing below the normal range).
  double ulp(double x) const {
    const int mantissa = descr == "<f4" ? 23 : bf16 ? 7 : 10;
    const int min_exp = descr == "<f2" && !bf16 ? -14 : -126;
    const int e = x == 0 ? min_exp : std::max(min_exp, std::ilogb(x));
    return std::ldexp(1.0, e - mantissa);
  }
};

// Random values in about [-2, 2]: float32 uniform; float16 from random sign, exponent in
// [-2, 1] and mantissa bits; bfloat16 as the upper half of a random float32.
Tensor random_tensor(const std::string& type, std::vector<std::int64_t> shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  Tensor t{type == "f32"   ? "<f4"
           : type == "f16" ? "<f2"
                           : "<u2",
           type == "bf16",
           std::move(shape),
           {}};
  const std::int64_t n = t.size();
  t.data.resize(static_cast<std::size_t>(n) * (type == "f32" ? 4 : 2));
  for (std::int64_t i = 0; i < n; ++i) {
    if (type == "f32") {
      const float f = uniform(rng);
      std::memcpy(t.data.data() + 4 * i, &f, 4);
      continue;
    }
    std::uint16_t h;
    if (type == "f16") {
      h = static_cast<std::uint16_t>(((rng() & 1) << 15) | ((13 + rng() % 4) << 10) |
                                     (rng() & 1023));
    } else {
      const float f = uniform(rng);
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      h = static_cast<std::uint16_t>(bits >> 16);
    }
    std::memcpy(t.data.data() + 2 * i, &h, 2);
  }
  return t;
}

void save(const std::string& file, const Tensor& t) {
  posenc::write_npy(path(file), t.descr, t.shape, t.data);
}

Tensor load(const std::string& file, const Tensor& like) {
  const posenc::NpyArray a = posenc::read_npy(path(file));
  EXPECT_EQ(a.descr, like.descr) << file;
  EXPECT_EQ(a.shape, like.shape) << file;
  return {a.descr, like.bf16, a.shape, a.data};
}

template <typename T>
void save_positions(const std::string& file, const std::vector<T>& p) {
  const std::vector<std::int64_t> shape = {static_cast<std::int64_t>(p.size())};
  posenc::write_npy(path(file), sizeof(T) == 4 ? "<i4" : "<i8", shape, std::as_bytes(std::span(p)));
}

// The rotation of docs/design.md §5 in float64.
struct Rotation {
  std::vector<double> inv_freq;  // one per pair
  bool interleaved = false;
  std::int64_t offset = 0;
  double attention_factor = 1.0;
  bool inverse = false;
};

std::vector<double> plain_inv_freq(double theta, std::int64_t rotary_dim) {
  std::vector<double> w(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
  return w;
}

// Checks `out` against the float64 rotation of `in`. Each element may be off by `ulps` spacings
// of the storage type at the pair's norm |(x_a, x_b)| * attention factor; dims outside the
// rotated range must be untouched bit for bit.
void expect_rotated(const Tensor& in, const Tensor& out, const std::vector<std::int64_t>& pos,
                    const Rotation& r, double ulps, const std::string& what) {
  const std::int64_t heads = in.shape[1], d = in.shape[2];
  const auto n = static_cast<std::int64_t>(r.inv_freq.size());
  const std::size_t item = in.descr == "<f4" ? 4 : 2;
  int failures = 0;
  for (std::int64_t t = 0; t < in.shape[0]; ++t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t base = (t * heads + h) * d;
      std::vector<bool> rotated(static_cast<std::size_t>(d), false);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t a = r.offset + (r.interleaved ? 2 * i : i),
                           b = r.interleaved ? a + 1 : a + n;
        rotated[static_cast<std::size_t>(a)] = rotated[static_cast<std::size_t>(b)] = true;
        const double angle = static_cast<double>(pos[static_cast<std::size_t>(t)]) *
                             r.inv_freq[static_cast<std::size_t>(i)];
        const double c = r.attention_factor * std::cos(angle);
        const double s = (r.inverse ? -1.0 : 1.0) * r.attention_factor * std::sin(angle);
        const double xa = in.at(base + a), xb = in.at(base + b);
        const double tol = ulps * in.ulp(std::hypot(xa, xb) * r.attention_factor);
        const double ya = xa * c - xb * s, yb = xb * c + xa * s;
        for (auto [got, want, dim] :
             {std::tuple{out.at(base + a), ya, a}, std::tuple{out.at(base + b), yb, b}}) {
          if (std::abs(got - want) > tol && ++failures <= 5) {
            ADD_FAILURE() << what << ": token " << t << " head " << h << " dim " << dim << ": got "
                          << got << ", float64 " << want << ", off by "
                          << std::abs(got - want) / tol * ulps << " ulps";
          }
        }
      }
      for (std::int64_t j = 0; j < d; ++j) {
        const std::size_t at = static_cast<std::size_t>(base + j) * item;
        if (!rotated[static_cast<std::size_t>(j)] &&
            std::memcmp(in.data.data() + at, out.data.data() + at, item) != 0 && ++failures <= 5) {
          ADD_FAILURE() << what << ": unrotated dim " << j << " of token " << t << " head " << h
                        << " changed";
        }
      }
    }
  }
}

std::vector<std::string> supported_targets() {
  const CliRun r = posenc("targets --json");
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<std::string> names;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& t : j["targets"]) {
    if (t["supported"].get<bool>()) names.push_back(t["name"]);
  }
  return names;
}

// Tolerances. float32 output: the kernel rounds c and s to float32 (relative error 2^-24 each,
// about sqrt(2) * 2^-24 |x| together) and rounds two products and a sum (at most 1.5 ulps of
// the pair norm), under 3 ulps in all: 4 leaves room for an FMA-free target. float16/bfloat16:
// the same float32 math (far below a 16-bit ulp) then one round-to-nearest store (half an ulp
// at |y| <= the pair norm): within 1 ulp of the storage type at the pair norm.
constexpr double kF32Ulps = 4.0;
constexpr double kHalfUlps = 1.0;

TEST(CliApply, DefaultRopeMatchesFloat64RotationOnEveryTarget) {
  const Tensor q = random_tensor("f32", {7, 4, 64}, 1);
  const Tensor k = random_tensor("f32", {7, 2, 64}, 2);  // GQA: fewer key heads
  save("q.npy", q);
  save("k.npy", k);
  const std::vector<std::int64_t> pos = {3, 0, 4095, 17, 17, 1000, 2};
  save_positions("pos.npy", pos);
  for (const std::string& target : supported_targets()) {
    for (const char* layout : {"half-split", "interleaved"}) {
      const CliRun r =
          posenc(std::string("apply --q ") + path("q.npy") + " --k " + path("k.npy") +
                     " --positions " + path("pos.npy") + " -o " + path("q_out.npy") + " --k-out " +
                     path("k_out.npy") + " --layout " + layout + " --json",
                 "POSENC_SIMD_TARGET=" + target);
      ASSERT_EQ(r.status, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["target"], target);
      EXPECT_EQ(j["rope_type"], "default");
      EXPECT_EQ(j["numerics"], "precise");
      EXPECT_EQ(j["dtype"], "f32");
      EXPECT_EQ(j["layout"], layout);
      EXPECT_EQ(j["attention_factor"], 1.0);
      EXPECT_EQ(j["q"]["shape"], nlohmann::json({7, 4, 64}));
      EXPECT_EQ(j["k"]["shape"], nlohmann::json({7, 2, 64}));
      const Rotation rot{plain_inv_freq(10000.0, 64), std::string(layout) == "interleaved"};
      expect_rotated(q, load("q_out.npy", q), pos, rot, kF32Ulps, target + " " + layout + " q");
      expect_rotated(k, load("k_out.npy", k), pos, rot, kF32Ulps, target + " " + layout + " k");
    }
  }
}

TEST(CliApply, PartialRotaryLeavesOtherDimsUntouched) {
  const Tensor q = random_tensor("f32", {5, 3, 80}, 3);
  save("q.npy", q);
  for (const char* layout : {"half-split", "interleaved"}) {
    const CliRun r =
        posenc("apply --q " + path("q.npy") + " --positions-range 250 -o " + path("q_out.npy") +
               " --rotary-dim 32 --rotary-offset 16 --rope-theta 500000 --layout " + layout);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(r.out.empty()) << "progress belongs on stderr";
    EXPECT_THAT(r.err, HasSubstr("wrote"));
    const Rotation rot{plain_inv_freq(500000.0, 32), std::string(layout) == "interleaved", 16};
    expect_rotated(q, load("q_out.npy", q), {250, 251, 252, 253, 254}, rot, kF32Ulps, layout);
  }
}

TEST(CliApply, HalfPrecisionWithinOneUlpOfStorage) {
  const std::vector<std::int64_t> pos = {0, 1, 2, 511, 4000};
  save_positions("pos32.npy", std::vector<std::int32_t>(pos.begin(), pos.end()));
  for (const char* type : {"f16", "bf16"}) {
    const Tensor q = random_tensor(type, {5, 3, 32}, 4);
    const Tensor k = random_tensor(type, {5, 1, 32}, 5);
    save("q.npy", q);
    save("k.npy", k);
    for (const char* layout : {"half-split", "interleaved"}) {
      const CliRun r =
          posenc("apply --q " + path("q.npy") + " --k " + path("k.npy") + " --positions " +
                 path("pos32.npy") + " -o " + path("q_out.npy") + " --k-out " + path("k_out.npy") +
                 " --layout " + layout + (q.bf16 ? " --bf16 --json" : " --json"));
      ASSERT_EQ(r.status, 0) << r.err;
      EXPECT_EQ(nlohmann::json::parse(r.out)["dtype"], type);
      const Rotation rot{plain_inv_freq(10000.0, 32), std::string(layout) == "interleaved"};
      expect_rotated(q, load("q_out.npy", q), pos, rot, kHalfUlps,
                     std::string(type) + " " + layout + " q");
      expect_rotated(k, load("k_out.npy", k), pos, rot, kHalfUlps,
                     std::string(type) + " " + layout + " k");
    }
  }
}

TEST(CliApply, InverseUndoesForward) {
  const Tensor q = random_tensor("f32", {6, 2, 64}, 6);
  save("q.npy", q);
  const std::string common =
      " --positions-range 1000 --rope-type yarn --factor 8 --original-max-position-embeddings 2048";
  ASSERT_EQ(posenc("apply --q " + path("q.npy") + " -o " + path("fwd.npy") + common).status, 0);
  const CliRun r =
      posenc("apply --q " + path("fwd.npy") + " -o " + path("back.npy") + " --inverse" + common);
  ASSERT_EQ(r.status, 0) << r.err;
  const Tensor back = load("back.npy", q);
  // The yarn attention factor g = 0.1 ln 8 + 1 multiplies twice: forward then inverse scale by g^2.
  const double g2 = std::pow(0.1 * std::log(8.0) + 1.0, 2);
  for (std::int64_t i = 0; i < q.size(); ++i) {
    EXPECT_NEAR(back.at(i), q.at(i) * g2, 2 * kF32Ulps * q.ulp(2.0 * std::sqrt(2.0) * g2)) << i;
  }
}

TEST(CliApply, RangeFileAndTableGiveTheSameBytes) {
  const Tensor q = random_tensor("f32", {9, 2, 48}, 7);
  save("q.npy", q);
  std::vector<std::int32_t> pos(9);
  for (int i = 0; i < 9; ++i) pos[static_cast<std::size_t>(i)] = 40 + i;
  save_positions("pos.npy", pos);
  const std::string spec = " --rope-type dynamic --factor 2 --max-position-embeddings 32";
  ASSERT_EQ(
      posenc("apply --q " + path("q.npy") + " --positions-range 40 -o " + path("a.npy") + spec)
          .status,
      0);
  ASSERT_EQ(posenc("apply --q " + path("q.npy") + " --positions " + path("pos.npy") + " -o " +
                   path("b.npy") + spec)
                .status,
            0);
  const CliRun t =
      posenc("apply --q " + path("q.npy") + " --positions-range 40 --table --threads 3 --json -o " +
             path("c.npy") + spec);
  ASSERT_EQ(t.status, 0) << t.err;
  const auto j = nlohmann::json::parse(t.out);
  EXPECT_EQ(j["table_rows"], 49);
  EXPECT_EQ(j["seq_len"], 49);  // largest position + 1: dynamic NTK has grown its base
  EXPECT_EQ(slurp(path("a.npy")), slurp(path("b.npy")));
  EXPECT_EQ(slurp(path("a.npy")), slurp(path("c.npy")));
}

// A call of 16 MiB (past the 4 MiB under which nothing is prefetched): the software prefetch
// forced on, forced off and by the machine's rule (src/rope/software_prefetch.h), on one thread
// and two, gives the same bytes, and they are the float64 rotation's within the f32 tolerance.
TEST(CliApply, SoftwarePrefetchSettingLeavesTheBitsAlone) {
  const Tensor q = random_tensor("f32", {4096, 8, 128}, 11);
  save("big.npy", q);
  std::vector<std::int64_t> pos(4096);
  for (std::size_t t = 0; t < pos.size(); ++t) pos[t] = static_cast<std::int64_t>(t);
  std::string first;
  for (const char* setting : {"off", "on", "auto"}) {
    for (const char* threads : {"1", "2"}) {
      const std::string out = std::string("big_") + setting + "_" + threads + ".npy";
      const CliRun r = posenc("apply --q " + path("big.npy") + " --positions-range 0 --table " +
                                  "--threads " + threads + " -o " + path(out),
                              std::string("POSENC_SOFTWARE_PREFETCH=") + setting);
      ASSERT_EQ(r.status, 0) << setting << " " << threads << ": " << r.err;
      if (first.empty()) {
        first = out;
        expect_rotated(q, load(out, q), pos, Rotation{plain_inv_freq(10000.0, 128)}, kF32Ulps,
                       "prefetch " + std::string(setting));
      } else {
        EXPECT_TRUE(slurp(path(out)) == slurp(path(first))) << out << " differs from " << first;
        std::filesystem::remove(path(out));
      }
    }
  }
  std::filesystem::remove(path(first));
  std::filesystem::remove(path("big.npy"));
}

TEST(CliApply, ConfigAndOverridesMatchComputeFrequencies) {
  const std::string config =
      std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs/llama-3.1-8b.json";
  const Tensor q = random_tensor("f32", {4, 2, 128}, 8);
  save("q.npy", q);
  const std::vector<std::int64_t> pos = {0, 9000, 131000, 77};
  save_positions("pos.npy", pos);
  posenc::RopeSpec spec = posenc::load_hf_config(config).spec;
  for (const std::string& extra :
       {std::string(""), std::string(" --factor 4 --high-freq-factor 8")}) {
    const CliRun r = posenc("apply " + config + " --q " + path("q.npy") + " --positions " +
                            path("pos.npy") + " -o " + path("q_out.npy") + extra);
    ASSERT_EQ(r.status, 0) << r.err;
    if (!extra.empty()) {
      spec.factor = 4;
      spec.llama3.high_freq_factor = 8;
    }
    const posenc::Frequencies f = posenc::compute_frequencies(spec);
    expect_rotated(q, load("q_out.npy", q), pos, {f.inv_freq, false}, kF32Ulps, "llama3" + extra);
  }
}

// A multi-axis config (Qwen2-VL's form, small: mrope_section [2, 3, 3] on head_dim 16) takes
// [3, tokens] positions, axis-major; the result is the library's. A --positions-range is text
// (every axis the same); a one-axis file is refused naming both axis counts.
TEST(CliApply, MultiAxisPositionsFromAnAxesByTokensFile) {
  const std::string config = path("mrope.json");
  std::ofstream(config) << R"({"model_type": "qwen2_vl", "head_dim": 16,
      "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}})";
  const Tensor q = random_tensor("f32", {4, 2, 16}, 21);
  save("q.npy", q);
  const std::vector<std::int64_t> pos = {0, 5, 9, 300, /*h*/ 0, 1, 1, 200, /*w*/ 0, 2, 3, 100};
  posenc::write_npy(path("pos3.npy"), "<i8", std::vector<std::int64_t>{3, 4},
                    std::as_bytes(std::span(pos)));
  const CliRun r = posenc("apply " + config + " --q " + path("q.npy") + " --positions " +
                          path("pos3.npy") + " -o " + path("m.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  const posenc::Frequencies f = posenc::compute_frequencies(posenc::load_hf_config(config).spec);
  Tensor want = q;
  posenc::RopeArgs args;
  args.q = posenc::TensorView::contiguous(want.data.data(), posenc::DType::kF32, 4, 2, 16);
  args.positions = std::span<const std::int64_t>(pos);
  posenc::apply_rope(f, args);
  EXPECT_EQ(load("m.npy", q).data, want.data);

  const std::vector<std::int64_t> text = {7, 8, 9, 10};
  save_positions("text.npy", text);
  const CliRun one = posenc("apply " + config + " --q " + path("q.npy") + " --positions " +
                            path("text.npy") + " -o " + path("t.npy"));
  EXPECT_NE(one.status, 0);
  EXPECT_THAT(one.err, HasSubstr("holds 1 axis of 4 tokens, but the encoding"));
  EXPECT_THAT(one.err, HasSubstr("reads 3 axes (contiguous axis map): give [3, 4] positions"));
  const CliRun range = posenc("apply " + config + " --q " + path("q.npy") +
                              " --positions-range 7 -o " + path("t.npy"));
  ASSERT_EQ(range.status, 0) << range.err;
  const CliRun plain = posenc("apply --head-dim 16 --q " + path("q.npy") +
                              " --positions-range 7 -o " + path("p.npy"));
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(slurp(path("t.npy")), slurp(path("p.npy")));  // text: one-axis RoPE, bit for bit
}

// llama.cpp's YaRN call for a spec: freq_scale 1/s, ext_factor 1, and the host-side attn_factor
// that divides out the 1 + 0.1 ln(1/freq_scale) the kernel multiplies back (llama-context.cpp).
TEST(CliApply, GgmlParametersEqualTheEquivalentYarnSpec) {
  const Tensor q = random_tensor("f32", {6, 2, 64}, 9);
  save("q.npy", q);
  const float ln_s = std::log(4.0f);
  const float attn = (0.1f * ln_s + 1.0f) * (1.0f / (1.0f + 0.1f * ln_s));
  char attn_text[32];
  std::snprintf(attn_text, sizeof attn_text, "%.9g", static_cast<double>(attn));
  for (auto [layout, mode] :
       {std::pair{"interleaved", "normal"}, std::pair{"half-split", "neox"}}) {
    const CliRun a =
        posenc("apply --q " + path("q.npy") + " --positions-range 3000 -o " + path("spec.npy") +
               " --numerics ggml --rope-type yarn --factor 4 --original-max-position-embeddings 512"
               " --layout " +
               layout);
    const CliRun b =
        posenc("apply --q " + path("q.npy") + " --positions-range 3000 -o " + path("ggml.npy") +
               " --json --n-dims 64 --mode " + mode +
               " --n-ctx-orig 512 --freq-base 10000"
               " --freq-scale 0.25 --ext-factor 1 --beta-fast 32 --beta-slow 1 --attn-factor " +
               attn_text);
    ASSERT_EQ(a.status, 0) << a.err;
    ASSERT_EQ(b.status, 0) << b.err;
    EXPECT_EQ(nlohmann::json::parse(b.out)["numerics"], "ggml");
    const Tensor x = load("spec.npy", q), y = load("ggml.npy", q);
    for (std::int64_t i = 0; i < q.size(); ++i)
      ASSERT_NEAR(x.at(i), y.at(i), 1e-6) << layout << " " << i;
  }
  // rope_freqs divide each angle: factors of 2 equal freq_scale 0.5 exactly (both halve a float).
  const std::vector<float> twos(32, 2.0f);
  posenc::write_npy(path("twos.npy"), "<f4", std::vector<std::int64_t>{32},
                    std::as_bytes(std::span(twos)));
  const std::string common = "apply --q " + path("q.npy") + " --positions-range 77 --mode neox";
  ASSERT_EQ(posenc(common + " --freq-factors " + path("twos.npy") + " -o " + path("ff.npy")).status,
            0);
  ASSERT_EQ(posenc(common + " --freq-scale 0.5 -o " + path("fs.npy")).status, 0);
  EXPECT_EQ(slurp(path("ff.npy")), slurp(path("fs.npy")));
}

struct ErrorCase {
  std::string args;
  std::vector<std::string> expected;
};

TEST(CliApply, ErrorsNameTheFlagAndValue) {
  save("q.npy", random_tensor("f32", {4, 2, 64}, 10));
  save("bf.npy", random_tensor("bf16", {4, 2, 64}, 11));
  save_positions("pos3.npy", std::vector<std::int64_t>{0, 1, 2});
  posenc::write_npy(path("int.npy"), "<i4", std::vector<std::int64_t>{4, 2, 64},
                    std::vector<std::byte>(4 * 512));
  std::ofstream(path("cut.npy"), std::ios::binary) << "\x93NUMPY\x01\x00";
  const std::string q = " --q " + path("q.npy") + " -o " + path("o.npy");
  const std::string config =
      std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs/llama-3.1-8b.json";
  const std::vector<ErrorCase> cases = {
      {"apply --q /nonexistent/q.npy -o x.npy --positions-range 0",
       {"--q: cannot read /nonexistent/q.npy"}},
      {"apply" + q + " --positions-range 0 --freq-factors " + path("pos3.npy"),
       {"--freq-factors", "'<i8'"}},
      {"apply --q " + path("cut.npy") + " -o x.npy --positions-range 0", {"cut.npy", "truncated"}},
      {"apply --q " + path("int.npy") + " -o x.npy --positions-range 0", {"--q", "'<i4'"}},
      {"apply --q " + path("bf.npy") + " -o x.npy --positions-range 0", {"--bf16"}},
      {"apply" + q + " --bf16 --positions-range 0", {"--bf16", "'<f4'"}},
      {"apply" + q + " --positions " + path("pos3.npy"),
       {"--positions", "3 positions", "4 tokens"}},
      {"apply" + q, {"--positions-range"}},
      {"apply" + q + " --positions-range 0 --k " + path("q.npy"), {"--k-out"}},
      {"apply" + q + " --positions-range 0 --config " + config + " --freq-base 10000",
       {"--freq-base (10000)", "--config"}},
      {"apply" + q + " --positions-range 0 --rope-theta 5e5 --ext-factor 1",
       {"--ext-factor (1)", "--rope-theta (5e5)"}},
      {"apply" + q + " --positions-range 0 --freq-scale 0.5 --numerics hf", {"--numerics", "hf"}},
      {"apply" + q + " --positions-range 0 --layout sideways", {"--layout", "sideways"}},
      {"apply" + q + " --positions-range 0 --rope-type yarnish", {"--rope-type", "yarnish"}},
      {"apply" + q + " --positions-range 0 --factor abc", {"--factor", "abc"}},
      {"apply" + q + " --positions-range 0 --rope-type yarn --factor 4",
       {"original_max_position_embeddings (0)"}},
      {"apply" + q + " --positions-range 0 --threads 0", {"--threads (0)"}},
      {"apply" + q + " --positions-range 0 --factor 2 --mscale 1",
       {"--factor (2), --mscale (1)", "rope_type default"}},
      {"apply" + q + " --positions-range 0 --config " + config + " --beta-fast 8",
       {"--beta-fast (8)", "llama3"}},
      {"apply" + q + " --positions-range 0 --n-dims 128", {"--n-dims (128)", "head_dim (64)"}},
      {"apply" + q + " --positions-range 0 " + config, {"head_dim 64", "head_dim 128"}},
      {"apply" + q + " --positions-range 3000000000 --table", {"--table"}},
  };
  for (const ErrorCase& c : cases) {
    const CliRun r = posenc(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
    for (const std::string& part : c.expected) EXPECT_THAT(r.err, HasSubstr(part)) << c.args;
  }
}

TEST(CliApply, GgmlParametersRefuseWhatSpecModeRefuses) {
  save("q.npy", random_tensor("f32", {4, 2, 64}, 12));
  std::filesystem::remove(path("o.npy"));
  const std::string q =
      "apply --q " + path("q.npy") + " -o " + path("o.npy") + " --positions-range 0";
  const std::string yarn = " --ext-factor 1 --n-ctx-orig 4096 --freq-scale 0.25";
  const std::vector<ErrorCase> cases = {
      {q + " --n-ctx-orig -5", {"n_ctx_orig (-5)", "must not be negative"}},
      {q + " --attn-factor 0", {"attn_factor (0)", "greater than 0"}},
      {q + " --attn-factor -1", {"attn_factor (-1)", "greater than 0"}},
      {q + " --freq-base 0.5", {"freq_base (0.5)", "greater than 1"}},
      {q + " --freq-base 1", {"freq_base (1)", "greater than 1"}},
      {q + yarn + " --beta-fast 1 --beta-slow 32",
       {"beta_fast (1)", "beta_slow (32)", "greater than"}},
      {q + " --freq-scale 1e-40", {"freq_scale (", "1.2e-38"}},
  };
  for (const ErrorCase& c : cases) {
    const CliRun r = posenc(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(path("o.npy"))) << c.args;
    for (const std::string& part : c.expected) EXPECT_THAT(r.err, HasSubstr(part)) << c.args;
  }
  // Legal but odd: warned about, as spec mode warns about factor < 1 and extrapolation_factor > 1.
  const CliRun odd = posenc(q + " --freq-scale 2 --ext-factor 1.5 --n-ctx-orig 4096");
  EXPECT_EQ(odd.status, 0) << odd.err;
  EXPECT_THAT(odd.err, HasSubstr("warning: ggml_rope_ext: freq_scale (2) is above 1"));
  EXPECT_THAT(odd.err, HasSubstr("warning: ggml_rope_ext: ext_factor (1.5) is outside [0, 1]"));
  const CliRun inverted = posenc(q + yarn + " --beta-fast 1e30 --beta-slow 1e29");
  EXPECT_EQ(inverted.status, 0) << inverted.err;
  EXPECT_THAT(inverted.err, HasSubstr("inverted"));
  std::filesystem::remove(path("o.npy"));
}

TEST(CliTargets, ListsTargetsAndHonoursTheEnvironment) {
  const CliRun help = posenc("targets --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_THAT(help.out, HasSubstr("POSENC_SIMD_TARGET"));
  const CliRun r = posenc("targets --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["targets"].empty());
  int active = 0;
  for (const auto& t : j["targets"]) {
    if (t["active"].get<bool>()) {
      ++active;
      EXPECT_TRUE(t["supported"].get<bool>());
      EXPECT_EQ(t["name"], j["active"]);
    }
  }
  EXPECT_EQ(active, 1);
  const std::string last = supported_targets().back();
  const CliRun forced = posenc("targets", "POSENC_SIMD_TARGET=" + last);
  ASSERT_EQ(forced.status, 0) << forced.err;
  EXPECT_THAT(forced.out, HasSubstr("the kernels run on " + last));
  const CliRun bogus = posenc("targets", "POSENC_SIMD_TARGET=NOSUCH");
  EXPECT_EQ(bogus.status, 1);
  EXPECT_THAT(bogus.err, HasSubstr("NOSUCH"));
}

}  // namespace
