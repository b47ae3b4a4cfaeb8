// Format version 2 (float16 weights, docs/eval.md "The file format"): a float16 copy of
// stories260K, written here with the test's own converter, loads as the float32 file holding
// the same (rounded) values, and its size and version errors name float16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/llama/llama.h"
#include "support/error_of.h"
#include "support/shared_data.h"

namespace {

const std::string& kModel = posenc_test::kStoriesModel;
constexpr std::size_t kWeightsAt = 6657;  // stories260K: header and vocabulary end here
constexpr std::size_t kValues = 1040128 / 4;

std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// float -> float16 bits, rounding towards zero (any rounding will do: the float32 twin holds
// exactly the value these bits decode to), and back, with ldexp only.
std::uint16_t to_f16(float x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65504.0) return sign | 0x7BFF;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<std::uint16_t>(a / std::ldexp(1.0, -24));
  int e = 0;
  const double f = std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  const int mant = static_cast<int>((2 * f - 1) * 1024);
  return sign | static_cast<std::uint16_t>((e + 14) << 10 | mant);
}
float from_f16(std::uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return static_cast<float>((h & 0x8000) ? -v : v);
}

struct Twins {
  std::vector<unsigned char> f16, f32;  // version 2, and version 1 with the f16 values
};

const Twins& twins() {
  static const Twins twins = [] {
    const auto b = read_bytes(kModel);
    EXPECT_EQ(b.size(), kWeightsAt + 4 * kValues);
    Twins t;
    t.f16.assign(b.begin(), b.begin() + kWeightsAt);
    t.f32 = t.f16;
    t.f16[0] = 2;
    for (std::size_t i = 0; i < kValues; ++i) {
      float x;
      std::memcpy(&x, b.data() + kWeightsAt + 4 * i, 4);
      const std::uint16_t h = to_f16(x);
      const float back = from_f16(h);
      t.f16.push_back(static_cast<unsigned char>(h & 0xFF));
      t.f16.push_back(static_cast<unsigned char>(h >> 8));
      unsigned char w[4];
      std::memcpy(w, &back, 4);
      t.f32.insert(t.f32.end(), w, w + 4);
    }
    return t;
  }();
  return twins;
}

std::string load_error(const std::vector<unsigned char>& bytes) {
  return posenc::testing::error_of([&] { posenc::llama::Model::parse(bytes, "test.bin"); });
}

TEST(LlamaFloat16, LoadsAsTheFloat32FileOfTheSameValues) {
  const auto half = posenc::llama::Model::parse(twins().f16, "half.bin");
  const auto full = posenc::llama::Model::parse(twins().f32, "full.bin");
  EXPECT_TRUE(half.config().float16_weights);
  EXPECT_FALSE(full.config().float16_weights);
  EXPECT_EQ(half.config().dim, 64);
  EXPECT_EQ(half.config().layers, 5);
  const auto& a = half.weights();
  const auto& b = full.weights();
  EXPECT_EQ(a.embedding, b.embedding);
  EXPECT_EQ(a.embedding_t, b.embedding_t);
  EXPECT_EQ(a.attention_norm, b.attention_norm);
  EXPECT_EQ(a.wq_t, b.wq_t);
  EXPECT_EQ(a.wk_t, b.wk_t);
  EXPECT_EQ(a.wv_t, b.wv_t);
  EXPECT_EQ(a.wo_t, b.wo_t);
  EXPECT_EQ(a.ffn_norm, b.ffn_norm);
  EXPECT_EQ(a.gate_t, b.gate_t);
  EXPECT_EQ(a.up_t, b.up_t);
  EXPECT_EQ(a.down_t, b.down_t);
  EXPECT_EQ(a.final_norm, b.final_norm);
  // Not trivially equal: the rounding moved most weights of the float32 original.
  const auto original = posenc::llama::Model::load(kModel);
  EXPECT_NE(a.wq_t, original.weights().wq_t);

  const std::vector<std::int32_t> tokens = half.tokenizer().encode("Once upon a time, a girl");
  std::vector<float> la(tokens.size() * 512), lb(tokens.size() * 512);
  posenc::llama::Session sa(half, {.rope = half.rope_spec("none"), .capacity = 64});
  posenc::llama::Session sb(full, {.rope = full.rope_spec("none"), .capacity = 64});
  sa.forward(tokens, la);
  sb.forward(tokens, lb);
  EXPECT_EQ(la, lb);
}

TEST(LlamaFloat16, NamesFloat16InSizeErrors) {
  auto b = twins().f16;
  b.pop_back();
  std::string m = load_error(b);
  EXPECT_NE(m.find("byte 6657: the weights of this configuration (dim 64, hidden 172, 5 layers, "
                   "8/4 heads, vocabulary 512, tied, float16) take 520064 bytes from here to "
                   "the end of the file, but 520063 bytes are left (truncated?)"),
            std::string::npos)
      << m;
  b = read_bytes(kModel);  // float32 weights under a version-2 header: twice the bytes
  b[0] = 2;
  m = load_error(b);
  EXPECT_NE(m.find("float16) take 520064 bytes from here to the end of the file, but 1040128 "
                   "bytes are left"),
            std::string::npos)
      << m;
  b = twins().f16;
  b[0] = 3;
  m = load_error(b);
  EXPECT_NE(m.find("byte 0: format version (3) must be 1 (float32 weights) or 2 (float16 weights)"),
            std::string::npos)
      << m;
}

}  // namespace
