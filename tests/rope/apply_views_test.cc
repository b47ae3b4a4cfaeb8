// apply_rope's tensor views and calls: strided and packed-qkv views, GQA, out of place, the
// table and on-the-fly paths, threads, argument errors, and target forcing.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "posenc/rope/targets.h"
#include "reference/rope_reference.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

using posenc::DType;
using posenc::Layout;
using posenc::testing::Buffer;
using posenc::testing::CheckRotation;
using posenc::testing::Random;
using posenc::testing::Spec;
using posenc::testing::YarnSpec;
using posenc_test::ForEachTarget;

TEST(ApplyRope, StridedViewsPackedQkvGqaOutOfPlaceAndMisaligned) {
  std::mt19937 rng(9);
  ForEachTarget([&](const std::string&) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const std::int64_t tokens = 6, hq = 4, hkv = 2, d = 64;
      const std::int64_t row = (hq + 2 * hkv) * d;  // packed [tokens, q | k | v]
      // One extra element in front: every view starts misaligned.
      const Buffer packed = Random(dtype, static_cast<std::size_t>(tokens * row + 1), rng);
      Buffer work = packed;
      const std::size_t es = posenc::dtype_size(dtype);
      const posenc::Frequencies f = posenc::compute_frequencies(YarnSpec(d, Layout::kHalfSplit));
      std::vector<std::int64_t> pos = {5, 4, 3, 100000, 2, 1};
      posenc::RopeArgs args;
      args.q = {work.bytes.data() + es, dtype, tokens, hq, d, row, d};
      args.k =
          posenc::TensorView{work.bytes.data() + es * (1 + hq * d), dtype, tokens, hkv, d, row, d};
      args.positions = std::span<const std::int64_t>(pos);
      posenc::apply_rope(f, args);
      // Compare each view against the reference by gathering it contiguously.
      auto gather = [&](const Buffer& src, std::int64_t first_head, std::int64_t heads) {
        Buffer g(dtype, static_cast<std::size_t>(tokens * heads * d));
        for (std::int64_t t = 0; t < tokens; ++t)
          for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t j = 0; j < d; ++j)
              g.set(static_cast<std::size_t>((t * heads + h) * d + j),
                    src.get(static_cast<std::size_t>(1 + t * row + (first_head + h) * d + j)));
        return g;
      };
      CheckRotation(f, gather(packed, 0, hq), gather(work, 0, hq), tokens, hq, pos, false,
                    "packed q");
      CheckRotation(f, gather(packed, hq, hkv), gather(work, hq, hkv), tokens, hkv, pos, false,
                    "packed k");
      // v is untouched, and so is the element in front.
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t j = (hq + hkv) * d; j < row; ++j)
          ASSERT_EQ(work.get(static_cast<std::size_t>(1 + t * row + j)),
                    packed.get(static_cast<std::size_t>(1 + t * row + j)));
      ASSERT_EQ(std::memcmp(work.bytes.data(), packed.bytes.data(), es), 0);

      // Out of place into a contiguous output: the input stays as it was.
      Buffer in = packed;
      Buffer out(dtype, static_cast<std::size_t>(tokens * hq * d));
      posenc::RopeArgs oop;
      oop.q = {in.bytes.data() + es, dtype, tokens, hq, d, row, d};
      oop.q_out = posenc::TensorView::contiguous(out.bytes.data(), dtype, tokens, hq, d);
      oop.positions = std::span<const std::int64_t>(pos);
      posenc::apply_rope(f, oop);
      EXPECT_EQ(in.bytes, packed.bytes);
      CheckRotation(f, gather(packed, 0, hq), out, tokens, hq, pos, false, "out of place");
    }
  });
}

TEST(ApplyRope, TableAndOnTheFlyAgreeBitForBit) {
  std::mt19937 rng(21);
  for (posenc::Numerics numerics :
       {posenc::Numerics::kPrecise, posenc::Numerics::kHf, posenc::Numerics::kGgml}) {
    const posenc::Frequencies f =
        posenc::compute_frequencies(YarnSpec(128, Layout::kHalfSplit), numerics);
    const posenc::CosSinTable table(f, 512);
    const std::int64_t tokens = 8, heads = 4;
    const Buffer in = Random(DType::kF32, static_cast<std::size_t>(tokens * heads * 128), rng);
    Buffer a = in, b = in;
    const std::vector<std::int64_t> pos = {0,    1, 511, 512,
                                           9000, 3, 200, 511};  // some past the table
    posenc::RopeArgs args;
    args.positions = std::span<const std::int64_t>(pos);
    args.q = posenc::TensorView::contiguous(a.bytes.data(), DType::kF32, tokens, heads, 128);
    args.table = &table;
    posenc::apply_rope(f, args);
    args.q = posenc::TensorView::contiguous(b.bytes.data(), DType::kF32, tokens, heads, 128);
    args.table = nullptr;
    posenc::apply_rope(f, args);
    EXPECT_EQ(a.bytes, b.bytes) << posenc::numerics_name(numerics);
  }
}

// With a table, apply_rope reads the rows of a block of 64 tokens straight from it where every
// position of the block is inside (CosSinRows::table_rows), and token by token otherwise (the
// forward direction; the inverse makes its rows 16 tokens at a time). 200 tokens: the first
// block inside the table, the second with one position past it, the third with a negative one,
// the fourth (8 tokens) inside; int64 and int32 positions, each dtype, both directions, every
// target: the same bits as the on-the-fly path, whose rows are computed (and whose bits the
// reference tests check) and, forward, read by blocks of 64 from runs made ahead.
TEST(ApplyRope, TableRowsReadByBlockEqualOnTheFly) {
  std::mt19937 rng(41);
  const posenc::Frequencies f = posenc::compute_frequencies(YarnSpec(128, Layout::kHalfSplit));
  const posenc::CosSinTable table(f, 1024);
  const std::int64_t tokens = 200, heads = 3, d = 128;
  std::vector<std::int64_t> pos64(static_cast<std::size_t>(tokens));
  std::uniform_int_distribution<std::int64_t> inside(0, 1023);
  for (std::int64_t& p : pos64) p = inside(rng);
  // A run of consecutive positions in the first block (stepped on the fly).
  for (std::size_t t = 10; t < 50; ++t) pos64[t] = 600 + static_cast<std::int64_t>(t);
  pos64[100] = 1024;  // the first position past the table
  pos64[150] = -7;
  const std::vector<std::int32_t> pos32(pos64.begin(), pos64.end());
  ForEachTarget([&](const std::string&) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (bool int32 : {false, true}) {
        for (posenc::Direction direction :
             {posenc::Direction::kForward, posenc::Direction::kInverse}) {
          const Buffer in = Random(dtype, static_cast<std::size_t>(tokens * heads * d), rng);
          Buffer with_table = in, on_the_fly = in;
          posenc::RopeArgs args;
          if (int32) {
            args.positions = std::span<const std::int32_t>(pos32);
          } else {
            args.positions = std::span<const std::int64_t>(pos64);
          }
          args.direction = direction;
          args.q = posenc::TensorView::contiguous(with_table.bytes.data(), dtype, tokens, heads, d);
          args.table = &table;
          posenc::apply_rope(f, args);
          args.q = posenc::TensorView::contiguous(on_the_fly.bytes.data(), dtype, tokens, heads, d);
          args.table = nullptr;
          posenc::apply_rope(f, args);
          EXPECT_EQ(with_table.bytes, on_the_fly.bytes)
              << posenc::dtype_name(dtype) << (int32 ? " int32" : " int64")
              << (direction == posenc::Direction::kInverse ? " inverse" : " forward");
          EXPECT_NE(with_table.bytes, in.bytes);
        }
      }
    }
  });
}

TEST(ApplyRope, TwoThreadsGiveTheSameBits) {
  std::mt19937 rng(31);
  const posenc::Frequencies f = posenc::compute_frequencies(YarnSpec(128, Layout::kInterleaved));
  for (std::int64_t tokens : {1, 3, 300}) {  // 1 and 3 tokens split heads; 300 splits tokens
    const std::int64_t heads = 256;
    const Buffer in = Random(DType::kF32, static_cast<std::size_t>(tokens * heads * 128), rng);
    Buffer a = in, b = in;
    std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens));
    for (std::size_t t = 0; t < pos.size(); ++t) pos[t] = static_cast<std::int64_t>(t * 37);
    posenc::RopeArgs args;
    args.positions = std::span<const std::int64_t>(pos);
    args.q = posenc::TensorView::contiguous(a.bytes.data(), DType::kF32, tokens, heads, 128);
    posenc::apply_rope(f, args);
    args.q = posenc::TensorView::contiguous(b.bytes.data(), DType::kF32, tokens, heads, 128);
    args.threads = 2;
    posenc::apply_rope(f, args);
    EXPECT_EQ(a.bytes, b.bytes) << tokens;
  }
}

// transformers keeps q as [batch, heads, seq, dim]: head-major views (each head a run of tokens)
// are as valid as token-major ones and rotate to the same values.
TEST(ApplyRope, HeadMajorViewsEqualTokenMajor) {
  std::mt19937 rng(47);
  const posenc::Frequencies f = posenc::compute_frequencies(YarnSpec(64, Layout::kHalfSplit));
  const std::int64_t tokens = 9, heads = 4, dim = 64;
  const Buffer token_major =
      Random(DType::kF32, static_cast<std::size_t>(tokens * heads * dim), rng);
  std::vector<float> a(static_cast<std::size_t>(tokens * heads * dim)), b(a.size());
  std::memcpy(a.data(), token_major.bytes.data(), a.size() * sizeof(float));
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      std::memcpy(&b[static_cast<std::size_t>((h * tokens + t) * dim)],
                  &a[static_cast<std::size_t>((t * heads + h) * dim)], dim * sizeof(float));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens));
  for (std::size_t t = 0; t < pos.size(); ++t) pos[t] = static_cast<std::int64_t>(t * 101);
  posenc::RopeArgs args;
  args.positions = std::span<const std::int64_t>(pos);
  args.q = posenc::TensorView::contiguous(a.data(), DType::kF32, tokens, heads, dim);
  posenc::apply_rope(f, args);
  args.q = {b.data(), DType::kF32, tokens, heads, dim, dim, tokens * dim};
  posenc::apply_rope(f, args);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      EXPECT_EQ(
          0, std::memcmp(&b[static_cast<std::size_t>((h * tokens + t) * dim)],
                         &a[static_cast<std::size_t>((t * heads + h) * dim)], dim * sizeof(float)))
          << t << " " << h;
  args.q = {b.data(), DType::kF32, tokens, heads, dim, dim, tokens * dim - 1};  // overlaps
  EXPECT_THROW(posenc::apply_rope(f, args), posenc::Error);
}

TEST(ApplyRope, ErrorsNameTheArgumentAndValue) {
  const posenc::Frequencies f = posenc::compute_frequencies(Spec(64, 64, 0, Layout::kHalfSplit));
  std::vector<float> data(2 * 4 * 64);
  const std::vector<std::int64_t> pos = {0, 1, 2};  // three positions, two tokens
  posenc::RopeArgs args;
  args.q = posenc::TensorView::contiguous(data.data(), DType::kF32, 2, 4, 64);
  args.positions = std::span<const std::int64_t>(pos);
  try {
    posenc::apply_rope(f, args);
    FAIL() << "no error";
  } catch (const posenc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokens (2)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(3)"), std::string::npos) << e.what();
  }
  const std::vector<std::int64_t> two = {0, 1};
  args.positions = std::span<const std::int64_t>(two);
  args.q = posenc::TensorView::contiguous(data.data(), DType::kF32, 2, 2, 128);
  try {
    posenc::apply_rope(f, args);
    FAIL() << "no error";
  } catch (const posenc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim (128)"), std::string::npos) << e.what();
  }
  args.q = {data.data(), DType::kF32, 2, 4, 64, 100, 64};
  try {
    posenc::apply_rope(f, args);
    FAIL() << "no error";
  } catch (const posenc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("token_stride (100)"), std::string::npos) << e.what();
  }
  args.q = posenc::TensorView::contiguous(data.data(), DType::kF32, 2, 4, 64);
  args.threads = 0;
  try {
    posenc::apply_rope(f, args);
    FAIL() << "no error";
  } catch (const posenc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("threads (0)"), std::string::npos) << e.what();
  }
}

TEST(SimdTargets, ListedForcedAndRefused) {
  const auto targets = posenc::simd_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(std::count_if(targets.begin(), targets.end(), [](const auto& t) { return t.active; }),
            1);
  try {
    posenc::force_simd_target("NOT_A_TARGET");
    FAIL() << "no error";
  } catch (const posenc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("NOT_A_TARGET"), std::string::npos) << e.what();
  }
#if defined(__x86_64__)
  // This machine's CPU has AVX-512 (the project's stated machine): the kernels must use it.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    EXPECT_EQ(posenc::active_simd_target().substr(0, 4), "AVX3");
  }
#endif
}

}  // namespace
