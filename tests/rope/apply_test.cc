// Kernel tests: apply_rope on every SIMD target this machine supports, against a long-double
// reference rotation (exact cos/sin of p * w from tests/reference, no src/ code): accuracy,
// tails, and the algebraic properties. Tolerances: tests/support/rope_test_support.h.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/frequencies.h"
#include "posenc/core/threads.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/targets.h"
#include "reference/rope_reference.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

using posenc::DType;
using posenc::Layout;
using posenc::testing::Buffer;
using posenc::testing::CheckRotation;
using posenc::testing::PairDims;
using posenc::testing::Random;
using posenc::testing::Spec;
using posenc::testing::YarnSpec;
using posenc_test::AwkwardCounts;
using posenc_test::FloatLanes;
using posenc_test::ForEachTarget;

TEST(ApplyRope, AccuracyOnEveryTargetSweep) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::int64_t> position(0, (std::int64_t{1} << 24) - 1);
  ForEachTarget([&](const std::string& target) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (Layout layout : {Layout::kHalfSplit, Layout::kInterleaved}) {
        std::vector<std::int64_t> head_dims = {2,  4,  6,  8,  14,  16,  30, 32,
                                               34, 62, 64, 96, 128, 130, 256};
        for (std::int64_t pairs : AwkwardCounts(FloatLanes(target))) head_dims.push_back(2 * pairs);
        for (std::int64_t head_dim : head_dims) {
          for (std::int64_t offset : {std::int64_t{0}, head_dim >= 8 ? head_dim / 4 : 0}) {
            const std::int64_t rotary = offset ? (head_dim / 2) & ~std::int64_t{1} : head_dim;
            if (rotary < 2) continue;
            const posenc::RopeSpec spec = Spec(head_dim, rotary, offset, layout);
            const posenc::Frequencies f = posenc::compute_frequencies(spec);
            for (std::int64_t tokens : {1, 3}) {
              const std::int64_t heads = 3;
              const std::size_t n = static_cast<std::size_t>(tokens * heads * head_dim);
              const Buffer in = Random(dtype, n, rng);
              Buffer out = in;
              std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens));
              for (auto& p : pos) p = position(rng);
              posenc::RopeArgs args;
              args.q =
                  posenc::TensorView::contiguous(out.bytes.data(), dtype, tokens, heads, head_dim);
              args.positions = std::span<const std::int64_t>(pos);
              posenc::apply_rope(f, args);
              CheckRotation(f, in, out, tokens, heads, pos, false,
                            target + " " + std::string(posenc::dtype_name(dtype)) + " " +
                                std::string(posenc::layout_name(layout)) + " head_dim " +
                                std::to_string(head_dim) + " offset " + std::to_string(offset));
            }
          }
        }
      }
    }
  });
}

// Tails: a row of n = N k + r pairs runs r of them through the one-lane tail. Each of its pairs
// must come out with the same bits as the same values at the same frequency inside a row of
// n N pairs (a multiple of N: all body). Pair i of the short row sits at pair i N of the long
// one, whose frequencies are set to match; the inputs include the values that exercise
// rounding, subnormals, overflow to infinity and NaN in each storage type.
TEST(ApplyRope, TailPairsGiveTheBitsOfBodyPairsOnEveryTarget) {
  std::mt19937 rng(77);
  // Raw storage bits: zeros, the smallest subnormal, the largest finite, infinities, a NaN, 1 + 1
  // ulp.
  const std::uint32_t f32_specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x7F7FFFFFu,
                                        0xFF7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                        0x3F800001u, 0x33800000u};
  const std::uint16_t f16_specials[] = {0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF,
                                        0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x3C01};
  const std::uint16_t bf16_specials[] = {0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F,
                                         0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x3F81};
  ForEachTarget([&](const std::string& target) {
    const std::int64_t lanes = FloatLanes(target);
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (Layout layout : {Layout::kHalfSplit, Layout::kInterleaved}) {
        for (std::int64_t n : AwkwardCounts(lanes)) {
          const std::int64_t m = n * lanes, tokens = 3, heads = 2;
          const posenc::Frequencies f = posenc::compute_frequencies(Spec(2 * n, 2 * n, 0, layout));
          posenc::Frequencies g = posenc::compute_frequencies(Spec(2 * m, 2 * m, 0, layout));
          for (std::int64_t k = 0; k < m; ++k) {
            g.inv_freq[static_cast<std::size_t>(k)] =
                f.inv_freq[static_cast<std::size_t>(k / lanes)];
          }
          Buffer shortb = Random(dtype, static_cast<std::size_t>(tokens * heads * 2 * n), rng);
          for (std::size_t i = 0, k = 0; i < shortb.bytes.size() / posenc::dtype_size(dtype);
               i += 3, k = (k + 1) % 10) {
            if (dtype == DType::kF32) {
              std::memcpy(&shortb.bytes[4 * i], &f32_specials[k], 4);
            } else {
              std::memcpy(&shortb.bytes[2 * i],
                          dtype == DType::kF16 ? &f16_specials[k] : &bf16_specials[k], 2);
            }
          }
          Buffer longb = Random(dtype, static_cast<std::size_t>(tokens * heads * 2 * m), rng);
          const std::size_t es = posenc::dtype_size(dtype);
          auto at = [&](std::int64_t t, std::int64_t h, std::int64_t dim, std::int64_t hd) {
            return static_cast<std::size_t>(((t * heads + h) * hd + dim)) * es;
          };
          const posenc::RopeSpec& ss = f.spec;
          const posenc::RopeSpec& ls = g.spec;
          for (std::int64_t t = 0; t < tokens; ++t) {
            for (std::int64_t h = 0; h < heads; ++h) {
              for (std::int64_t i = 0; i < n; ++i) {
                const auto [sa, sb] = PairDims(ss, i);
                const auto [la, lb] = PairDims(ls, i * lanes);
                std::memcpy(&longb.bytes[at(t, h, la, 2 * m)], &shortb.bytes[at(t, h, sa, 2 * n)],
                            es);
                std::memcpy(&longb.bytes[at(t, h, lb, 2 * m)], &shortb.bytes[at(t, h, sb, 2 * n)],
                            es);
              }
            }
          }
          const std::vector<std::int64_t> pos = {1, 4097, 123457};
          for (posenc::Direction dir : {posenc::Direction::kForward, posenc::Direction::kInverse}) {
            Buffer so = shortb, lo = longb;
            posenc::RopeArgs sargs, largs;
            sargs.q = posenc::TensorView::contiguous(so.bytes.data(), dtype, tokens, heads, 2 * n);
            largs.q = posenc::TensorView::contiguous(lo.bytes.data(), dtype, tokens, heads, 2 * m);
            sargs.positions = largs.positions = std::span<const std::int64_t>(pos);
            sargs.direction = largs.direction = dir;
            posenc::apply_rope(f, sargs);
            posenc::apply_rope(g, largs);
            int differ = 0;
            for (std::int64_t t = 0; t < tokens; ++t) {
              for (std::int64_t h = 0; h < heads; ++h) {
                for (std::int64_t i = 0; i < n; ++i) {
                  const auto [sa, sb] = PairDims(ss, i);
                  const auto [la, lb] = PairDims(ls, i * lanes);
                  const bool same = std::memcmp(&so.bytes[at(t, h, sa, 2 * n)],
                                                &lo.bytes[at(t, h, la, 2 * m)], es) == 0 &&
                                    std::memcmp(&so.bytes[at(t, h, sb, 2 * n)],
                                                &lo.bytes[at(t, h, lb, 2 * m)], es) == 0;
                  if (!same && ++differ <= 3) {
                    ADD_FAILURE() << target << " " << posenc::dtype_name(dtype) << " "
                                  << posenc::layout_name(layout) << " pairs " << n << " token " << t
                                  << " head " << h << " pair " << i << ": "
                                  << so.get(at(t, h, sa, 2 * n) / es) << ", "
                                  << so.get(at(t, h, sb, 2 * n) / es) << " in the short row, "
                                  << lo.get(at(t, h, la, 2 * m) / es) << ", "
                                  << lo.get(at(t, h, lb, 2 * m) / es) << " in the body";
                  }
                }
              }
            }
            EXPECT_EQ(differ, 0) << target << " " << posenc::dtype_name(dtype) << " "
                                 << posenc::layout_name(layout) << " pairs " << n;
          }
        }
      }
    }
  });
}

// Results in the subnormal range round like every other value: AVX3_BF16's conversion
// instruction flushes subnormals to zero, so its kernel must route them through the software
// rounding (avx512_bf16.h), which it finds by a zero word in the converted output. Two inputs:
// tiny values everywhere (a few times the smallest normal, some subnormal themselves: subnormal
// results in every vector), and a mix where one head of one token is tiny, every fifth pair is
// zero in both halves (zero results: zero words without a subnormal, the fast path after the
// class test) and the rest is normal. Every FMA target must give the bits of the first one,
// including the row-in-registers head sizes. The test checks it met subnormal results at all.
TEST(ApplyRope, SubnormalResultsAgreeAcrossTargets) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (const bool mixed : {false, true}) {
    for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
      const float tiny = dtype == DType::kF16 ? 0x1p-13f : 0x1p-125f;  // smallest normals x 2
      for (std::int64_t head_dim : {64, 128, 256, 96}) {
        const std::int64_t tokens = 3, heads = 3, n = head_dim / 2;
        const auto count = static_cast<std::size_t>(tokens * heads * head_dim);
        Buffer in(dtype, count);
        for (std::size_t i = 0; i < count; ++i) {
          const auto j = static_cast<std::int64_t>(i) % head_dim;
          const auto head = static_cast<std::int64_t>(i) / head_dim;  // token * heads + head
          float v = unit(rng) * tiny;
          if (mixed && head != heads + 2) v = (j % n) % 5 == 0 ? 0.0f : unit(rng);
          in.set(i, v);
        }
        const posenc::Frequencies f =
            posenc::compute_frequencies(Spec(head_dim, head_dim, 0, Layout::kHalfSplit));
        const std::vector<std::int64_t> pos = {7, 4099, 77777};
        std::vector<std::uint8_t> first;
        std::string first_target;
        posenc_test::ForEachTarget([&](const std::string& target) {
          // Targets with FMA only (SSE4, SSSE3, EMU128 and SCALAR round the products apart).
          if (target.rfind("AVX", 0) != 0 && target.rfind("SVE", 0) != 0 && target != "NEON")
            return;
          Buffer out = in;
          posenc::RopeArgs args;
          args.q = posenc::TensorView::contiguous(out.bytes.data(), dtype, tokens, heads, head_dim);
          args.positions = std::span<const std::int64_t>(pos);
          posenc::apply_rope(f, args);
          if (first.empty()) {
            first = out.bytes;
            first_target = target;
            std::size_t subnormal = 0, zero = 0;
            for (std::size_t i = 0; i < count; ++i) {
              std::uint32_t bits = 0;  // the stored value's bits: exponent field 0, mantissa not
              std::memcpy(&bits, &out.bytes[i * posenc::dtype_size(dtype)],
                          posenc::dtype_size(dtype));
              const std::uint32_t exp_mask = dtype == DType::kF32   ? 0x7F800000u
                                             : dtype == DType::kF16 ? 0x7C00u
                                                                    : 0x7F80u;
              const std::uint32_t mant_mask = dtype == DType::kF32   ? 0x7FFFFFu
                                              : dtype == DType::kF16 ? 0x3FFu
                                                                     : 0x7Fu;
              subnormal += (bits & exp_mask) == 0 && (bits & mant_mask) != 0;
              zero += (bits & (exp_mask | mant_mask)) == 0;
            }
            const std::size_t tiny_count =
                mixed ? static_cast<std::size_t>(head_dim) : count;  // elements of tiny heads
            EXPECT_GT(subnormal, tiny_count / 4) << posenc::dtype_name(dtype) << " " << head_dim;
            if (mixed) {
              EXPECT_GT(zero, count / 8) << posenc::dtype_name(dtype) << " " << head_dim;
            }
            return;
          }
          EXPECT_TRUE(out.bytes == first)
              << target << " differs from " << first_target << ", " << posenc::dtype_name(dtype)
              << " head_dim " << head_dim << (mixed ? " (mixed)" : " (tiny)");
        });
      }
    }
  }
}

// A valid count above the hardware threads runs on hardware_threads() of them (threads.h), and
// apply_rope says so in its return value; the rotation is the one-thread rotation, bit for bit.
TEST(ApplyRope, ThreadCountsAboveTheHardwareAreCappedToIt) {
  const posenc::Frequencies f = posenc::compute_frequencies(Spec(128, 128, 0, Layout::kHalfSplit));
  const std::int64_t tokens = 1024;  // 2^17 rotated elements: above the one-thread limit
  std::mt19937 rng(5);
  const Buffer in = Random(DType::kF32, static_cast<std::size_t>(tokens * 128), rng);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens));
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int64_t>(i);
  Buffer one = in, many = in;
  posenc::RopeArgs args;
  args.positions = std::span<const std::int64_t>(pos);
  args.q = posenc::TensorView::contiguous(one.bytes.data(), DType::kF32, tokens, 1, 128);
  EXPECT_EQ(posenc::apply_rope(f, args), 1);
  args.q = posenc::TensorView::contiguous(many.bytes.data(), DType::kF32, tokens, 1, 128);
  args.threads = posenc::kMaxThreads;
  EXPECT_EQ(posenc::apply_rope(f, args), std::min(posenc::kMaxThreads, posenc::hardware_threads()));
  EXPECT_EQ(posenc::run_threads(posenc::kMaxThreads),
            std::min(posenc::kMaxThreads, posenc::hardware_threads()));
  EXPECT_EQ(posenc::run_threads(1), 1);
  EXPECT_TRUE(one.bytes == many.bytes);
}

TEST(ApplyRope, YarnAttentionFactorInverseAndInt32Positions) {
  std::mt19937 rng(7);
  ForEachTarget([&](const std::string&) {
    for (Layout layout : {Layout::kHalfSplit, Layout::kInterleaved}) {
      const posenc::Frequencies f = posenc::compute_frequencies(YarnSpec(128, layout));
      const std::int64_t tokens = 5, heads = 4;
      const Buffer in = Random(DType::kF32, static_cast<std::size_t>(tokens * heads * 128), rng);
      Buffer out = in;
      const std::vector<std::int32_t> pos32 = {0, 1, 4095, 65535, 2000000};
      const std::vector<std::int64_t> pos(pos32.begin(), pos32.end());
      posenc::RopeArgs args;
      args.q = posenc::TensorView::contiguous(out.bytes.data(), DType::kF32, tokens, heads, 128);
      args.positions = std::span<const std::int32_t>(pos32);
      args.direction = posenc::Direction::kInverse;
      posenc::apply_rope(f, args);
      CheckRotation(f, in, out, tokens, heads, pos, true, "yarn inverse");
    }
  });
}

TEST(ApplyRope, ForwardThenInverseIsIdentityAndPositionZeroIsExact) {
  std::mt19937 rng(11);
  ForEachTarget([&](const std::string&) {
    const posenc::Frequencies f =
        posenc::compute_frequencies(Spec(128, 128, 0, Layout::kHalfSplit));
    const std::int64_t tokens = 4, heads = 2;
    const Buffer in = Random(DType::kF32, static_cast<std::size_t>(tokens * heads * 128), rng);
    Buffer out = in;
    const std::vector<std::int64_t> pos = {0, 17, 4096, 1 << 20};
    posenc::RopeArgs args;
    args.q = posenc::TensorView::contiguous(out.bytes.data(), DType::kF32, tokens, heads, 128);
    args.positions = std::span<const std::int64_t>(pos);
    posenc::apply_rope(f, args);
    // Position 0: cos 1, sin 0, so the first token is unchanged bit for bit.
    EXPECT_EQ(std::memcmp(out.bytes.data(), in.bytes.data(), heads * 128 * 4), 0);
    args.direction = posenc::Direction::kInverse;
    posenc::apply_rope(f, args);
    for (std::size_t i = 0; i < static_cast<std::size_t>(tokens * heads * 128); ++i) {
      // Two rotations: 2 x 2.5 ulps of the pair norm (|x| < 6 for N(0,1) data).
      EXPECT_NEAR(out.get(i), in.get(i), 5 * std::ldexp(8.0, -23)) << i;
    }
  });
}

TEST(ApplyRope, RelativePositionProperty) {
  // <R(m) q, R(n) k> depends only on n - m: shift both positions by 1000 and compare.
  std::mt19937 rng(3);
  const posenc::Frequencies f = posenc::compute_frequencies(Spec(64, 64, 0, Layout::kInterleaved));
  const Buffer q = Random(DType::kF32, 64, rng), k = Random(DType::kF32, 64, rng);
  auto dot_at = [&](std::int64_t m, std::int64_t n) {
    Buffer qr = q, kr = k;
    posenc::RopeArgs a;
    const std::vector<std::int64_t> pm = {m}, pn = {n};
    a.q = posenc::TensorView::contiguous(qr.bytes.data(), DType::kF32, 1, 1, 64);
    a.positions = std::span<const std::int64_t>(pm);
    posenc::apply_rope(f, a);
    a.q = posenc::TensorView::contiguous(kr.bytes.data(), DType::kF32, 1, 1, 64);
    a.positions = std::span<const std::int64_t>(pn);
    posenc::apply_rope(f, a);
    double dot = 0;
    for (std::size_t i = 0; i < 64; ++i) dot += static_cast<double>(qr.get(i)) * kr.get(i);
    return dot;
  };
  for (std::int64_t delta : {0, 1, 7, 100, 3000}) {
    // 64 products of values below ~6 rotated with 2.5-ulp errors: |error| < 64 * 2 * 6 * 6 * 2^-22.
    EXPECT_NEAR(dot_at(10, 10 + delta), dot_at(1010, 1010 + delta),
                64 * 2 * 36 * std::ldexp(1.0, -22));
  }
}

TEST(ApplyRope, LayoutsAgreeUnderThePermutation) {
  std::mt19937 rng(5);
  const std::int64_t d = 96, n = d / 2;
  const posenc::Frequencies half = posenc::compute_frequencies(Spec(d, d, 0, Layout::kHalfSplit));
  const posenc::Frequencies inter =
      posenc::compute_frequencies(Spec(d, d, 0, Layout::kInterleaved));
  const Buffer x = Random(DType::kF32, static_cast<std::size_t>(d), rng);
  Buffer a = x, b(DType::kF32, static_cast<std::size_t>(d));
  for (std::int64_t i = 0; i < n; ++i) {  // interleaved (2i, 2i+1) <- half-split (i, i+n)
    b.set(static_cast<std::size_t>(2 * i), x.get(static_cast<std::size_t>(i)));
    b.set(static_cast<std::size_t>(2 * i + 1), x.get(static_cast<std::size_t>(i + n)));
  }
  const std::vector<std::int64_t> pos = {12345};
  posenc::RopeArgs args;
  args.positions = std::span<const std::int64_t>(pos);
  args.q = posenc::TensorView::contiguous(a.bytes.data(), DType::kF32, 1, 1, d);
  posenc::apply_rope(half, args);
  args.q = posenc::TensorView::contiguous(b.bytes.data(), DType::kF32, 1, 1, d);
  posenc::apply_rope(inter, args);
  for (std::int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(a.get(static_cast<std::size_t>(i)), b.get(static_cast<std::size_t>(2 * i))) << i;
    EXPECT_EQ(a.get(static_cast<std::size_t>(i + n)), b.get(static_cast<std::size_t>(2 * i + 1)))
        << i;
  }
}

}  // namespace
