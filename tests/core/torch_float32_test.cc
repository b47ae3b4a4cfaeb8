// tests/core/torch_float32_test.cc: hf numerics compute pow, cos and sin with the functions torch
// 1.13 calls (docs/numerics.md), checked against Sleef and the C library called directly.
//
// - TorchCapability: posenc::torch_capability() follows ATEN_CPU_CAPABILITY, then CPUID
//   (tests/CMakeLists.txt also runs this binary with the variable set to each value and to junk).
// - TorchPow: the index at which hf's inv_freq stops using Sleef's powf and starts using the C
//   library's is W * floor(n / W) for the capability's W (16, 32; DEFAULT: libm throughout), for
//   n = 12..40 pairs; each checked entry is one where the two functions give different results.
// - TorchCosSin: hf's cos/sin at positions where Sleef and the C library differ, and where a
//   Sleef vector's large lane changes a small lane's result (the value torch 1.13 printed); the
//   flat rule (posenc computes four lanes at a time) against that rule written lane by lane here,
//   on buffers mixing fast and slow lanes, and the row rule against the flat rule on emb.
#include <gtest/gtest.h>
#if defined(__x86_64__)
#include <immintrin.h>  // before sleef.h: it declares the 4-lane kernels
#endif
#include <sleef.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/torch_float32.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/numerics.h"
#include "support/error_of.h"
#include "support/spec_builder.h"

// sleef.h declares these only under FP_FAST_FMA (-mfma).
extern "C" {
float Sleef_powf1_u10purecfma(float, float);
float Sleef_cosf1_u10purecfma(float);
float Sleef_sinf1_u10purecfma(float);
}

namespace {

using posenc::Numerics;
using posenc::TorchCapability;

// The rule, written here from torch's DispatchStub.cpp (not from posenc).
TorchCapability Expected() {
  if (const char* v = std::getenv("ATEN_CPU_CAPABILITY")) {
    if (std::strcmp(v, "default") == 0) return TorchCapability::kDefault;
    if (std::strcmp(v, "avx2") == 0) return TorchCapability::kAvx2;
    if (std::strcmp(v, "avx512") == 0) return TorchCapability::kAvx512;
  }
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
             ? TorchCapability::kAvx2
             : TorchCapability::kDefault;
}

std::size_t Width(TorchCapability c) {
  return c == TorchCapability::kAvx512 ? 32 : c == TorchCapability::kAvx2 ? 16 : 0;
}

float Exponent(std::int64_t i, std::int64_t d) {
  const float two_i = static_cast<float>(2 * i);
  return two_i / static_cast<float>(d);
}

float SleefInv(float base, float e) { return 1.0f / Sleef_powf1_u10purecfma(base, e); }
float LibmInv(float base, float e) { return 1.0f / ::powf(base, e); }

bool Differs(float base, std::int64_t i, std::int64_t d) {
  const float e = Exponent(i, d);
  return SleefInv(base, e) != LibmInv(base, e);
}

TEST(TorchCapability, FollowsTheEnvironmentThenTheCpu) {
  const char* env = std::getenv("ATEN_CPU_CAPABILITY");
  SCOPED_TRACE(std::string("ATEN_CPU_CAPABILITY=") + (env ? env : "(unset)"));
  EXPECT_EQ(posenc::torch_capability(), Expected());
  EXPECT_EQ(posenc::torch_capability(), posenc::torch_capability());  // computed once
}

TEST(TorchCapability, NamesAndParsing) {
  for (TorchCapability c :
       {TorchCapability::kDefault, TorchCapability::kAvx2, TorchCapability::kAvx512}) {
    EXPECT_EQ(posenc::parse_torch_capability(posenc::torch_capability_name(c)), c);
  }
  EXPECT_EQ(posenc::torch_capability_name(TorchCapability::kAvx512), "avx512");
  EXPECT_EQ(posenc::testing::error_of([] { posenc::parse_torch_capability("AVX2", "capability"); }),
            "capability (\"AVX2\") must be one of default, avx2, avx512");
}

// For n pairs (D = 2n), a base at which Sleef and libm give different inv_freq at both entries
// `a` and `b` (b < 0: only a).
float BaseDifferingAt(std::int64_t d, std::int64_t a, std::int64_t b) {
  for (int k = 0; k < 1000000; ++k) {
    const float base = static_cast<float>(10000.0 + 7.0 * k);
    if (Differs(base, a, d) && (b < 0 || Differs(base, b, d))) return base;
  }
  ADD_FAILURE() << "no base found for D " << d;
  return 10000.0f;
}

TEST(TorchPow, SwitchesFromSleefToLibmAtTheBlockBoundary) {
  const TorchCapability cap = posenc::torch_capability();
  const std::size_t w = Width(cap);
  SCOPED_TRACE(std::string("capability ") + std::string(posenc::torch_capability_name(cap)));
  int sleef_checked = 0, libm_checked = 0;
  for (std::int64_t n = 12; n <= 40; ++n) {
    const std::int64_t d = 2 * n;
    const std::int64_t body = w == 0 ? 0 : static_cast<std::int64_t>(n / w * w);
    // The last Sleef entry and the first libm one, where they exist.
    const std::int64_t a = body > 0 ? body - 1 : n - 1;
    const std::int64_t b = body > 0 && body < n ? body : -1;
    const float base = BaseDifferingAt(d, a, b);
    const posenc::Frequencies f = posenc::compute_frequencies(
        posenc::testing::make_spec(posenc::Method::kNone, d, static_cast<double>(base)),
        Numerics::kHf);
    ASSERT_EQ(f.pair_count(), n);
    for (std::int64_t i : {a, b}) {
      if (i < 0) continue;
      const float e = Exponent(i, d);
      const bool sleef = i < body;
      const float want = sleef ? SleefInv(base, e) : LibmInv(base, e);
      const float other = sleef ? LibmInv(base, e) : SleefInv(base, e);
      ASSERT_NE(want, other);
      EXPECT_EQ(f.inv_freq[static_cast<std::size_t>(i)], static_cast<double>(want))
          << "n " << n << " base " << base << " entry " << i << " (block boundary " << body
          << "): expected " << (sleef ? "Sleef" : "libm") << "'s powf";
      (sleef ? sleef_checked : libm_checked) += 1;
    }
  }
  // Every capability checks libm entries; AVX2/AVX512 also Sleef ones.
  EXPECT_GT(libm_checked, 0);
  if (w != 0) {
    EXPECT_GT(sleef_checked, 0);
  }
}

TEST(TorchCosSin, HfUsesTheCapabilitysFunctions) {
  const TorchCapability cap = posenc::torch_capability();
  const bool sleef = cap != TorchCapability::kDefault;
  // Pair 0 has inv_freq 1 exactly, so the angle is the position.
  const posenc::Frequencies f = posenc::compute_frequencies(
      posenc::testing::make_spec(posenc::Method::kNone, 32), Numerics::kHf);
  ASSERT_EQ(f.inv_freq[0], 1.0);
  std::vector<double> c(16), s(16);
  int cos_checked = 0, sin_checked = 0;
  for (std::int64_t p = 1 << 19; p < (1 << 20) && (cos_checked < 50 || sin_checked < 50); ++p) {
    const float x = static_cast<float>(p);
    const float sc = Sleef_cosf1_u10purecfma(x), lc = ::cosf(x);
    const float ss = Sleef_sinf1_u10purecfma(x), ls = ::sinf(x);
    if (sc == lc && ss == ls) continue;
    posenc::cos_sin_at(f, p, c, s);
    if (sc != lc) {
      EXPECT_EQ(c[0], static_cast<double>(sleef ? sc : lc)) << "cos at " << p;
      ++cos_checked;
    }
    if (ss != ls) {
      EXPECT_EQ(s[0], static_cast<double>(sleef ? ss : ls)) << "sin at " << p;
      ++sin_checked;
    }
  }
  EXPECT_GE(cos_checked, 50);
  EXPECT_GE(sin_checked, 50);
}

// Llama 2 (D = 128, b = 1e4) at position 4095: pair 31's angle 47.288322 is below 125, but its
// 8-lane group (pairs 24..31) holds larger angles, so Sleef's vector cos reduces it the
// Payne-Hanek way. torch 1.13 (AVX2) gives cos = -0.9865114092826843 (emb.cos()), where the
// angle alone gives -0.9865113496780396.
TEST(TorchCosSin, ALargeLaneInTheVectorChangesTheSmallOnes) {
  const TorchCapability cap = posenc::torch_capability();
  const posenc::Frequencies f = posenc::compute_frequencies(
      posenc::testing::make_spec(posenc::Method::kNone, 128), Numerics::kHf);
  std::vector<double> c(64), s(64);
  posenc::cos_sin_at(f, 4095, c, s);
  const float angle = static_cast<float>(f.inv_freq[31]) * 4095.0f;
  ASSERT_EQ(angle, 47.28832244873047f);
  if (cap == TorchCapability::kDefault) {
    EXPECT_EQ(c[31], static_cast<double>(::cosf(angle)));
  } else {
    EXPECT_EQ(Sleef_cosf1_u10purecfma(angle), -0.9865113496780396f);
    EXPECT_EQ(c[31], -0.9865114092826843);
  }
}

#if defined(__x86_64__)
// torch's vec::map over a contiguous buffer, one lane at a time (the rule of docs/numerics.md,
// written here from Sleef's and ATen's sources, not from posenc): groups of `lanes` from the
// start; a group with any |x| >= 125 reduces every lane the Payne-Hanek way. Sleef's scalar
// purecfma kernels reduce |x| >= 125 that way and smaller ones the Cody-Waite way; a small lane of
// such a group is lane 0 of Sleef's 4-lane kernel with three lanes of 125 beside it.
void LaneByLane(const std::vector<float>& x, std::size_t lanes, std::vector<float>& c,
                std::vector<float>& s) {
  for (std::size_t lo = 0; lo < x.size(); lo += lanes) {
    const std::size_t hi = std::min(lo + lanes, x.size());
    bool slow_group = false;
    for (std::size_t i = lo; i < hi; ++i) slow_group = slow_group || !(std::fabs(x[i]) < 125.0f);
    for (std::size_t i = lo; i < hi; ++i) {
      if (!slow_group || !(std::fabs(x[i]) < 125.0f)) {
        c[i] = Sleef_cosf1_u10purecfma(x[i]);
        s[i] = Sleef_sinf1_u10purecfma(x[i]);
      } else {
        const __m128 v = _mm_setr_ps(x[i], 125.0f, 125.0f, 125.0f);
        c[i] = _mm_cvtss_f32(Sleef_cosf4_u10avx2128(v));
        s[i] = _mm_cvtss_f32(Sleef_sinf4_u10avx2128(v));
      }
    }
  }
}

TEST(TorchCosSin, FourLanesAtATimeGiveTheLaneByLaneRule) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    // Sleef's FMA kernels would fault here: the rule is refused instead, naming the capability.
    std::vector<float> x(8, 1.0f), c(8), s(8);
    EXPECT_THROW(posenc::detail::torch_cos_sin_flat(x, c, s, TorchCapability::kAvx2),
                 posenc::Error);
    return;
  }
  std::mt19937 rng(5);
  for (TorchCapability cap : {TorchCapability::kAvx2, TorchCapability::kAvx512}) {
    const std::size_t lanes = cap == TorchCapability::kAvx512 ? 16 : 8;
    for (std::size_t n : {3u, 4u, 8u, 12u, 13u, 16u, 40u, 128u, 257u}) {
      for (int round = 0; round < 40; ++round) {
        // Mostly fast lanes, some slow ones (rounds with none, with a few, with many), and the
        // edges: +-125, the largest float below it, zeros, huge angles.
        const double slow_share = round % 4 == 0 ? 0.0 : round % 4 == 1 ? 0.05 : 0.4;
        std::uniform_real_distribution<float> small(-125.0f, 125.0f), large(125.0f, 1e7f);
        std::bernoulli_distribution slow(slow_share), edge(0.05);
        std::vector<float> x(n);
        for (float& v : x) {
          v = slow(rng) ? large(rng) : small(rng);
          if (edge(rng)) {
            const float edges[] = {125.0f, -125.0f, std::nextafter(125.0f, 0.0f),
                                   0.0f,   -0.0f,   3.0e38f};
            v = edges[rng() % 6];
          }
          if (rng() % 2) v = -v;
        }
        std::vector<float> want_c(n), want_s(n), c(n), s(n);
        LaneByLane(x, lanes, want_c, want_s);
        posenc::detail::torch_cos_sin_flat(x, c, s, cap);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(c[i]), std::bit_cast<std::uint32_t>(want_c[i]))
              << "cos lane " << i << " of " << n << ", x " << x[i] << ", lanes " << lanes;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(s[i]), std::bit_cast<std::uint32_t>(want_s[i]))
              << "sin lane " << i << " of " << n << ", x " << x[i] << ", lanes " << lanes;
        }
        // The row rule: emb = [x, x] through the flat rule, its first half.
        std::vector<float> emb(x);
        emb.insert(emb.end(), x.begin(), x.end());
        std::vector<float> emb_c(2 * n), emb_s(2 * n);
        LaneByLane(emb, lanes, emb_c, emb_s);
        posenc::detail::torch_cos_sin_row(x, c, s, cap);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(c[i]), std::bit_cast<std::uint32_t>(emb_c[i]))
              << "row cos " << i << " of " << n << ", lanes " << lanes;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(s[i]), std::bit_cast<std::uint32_t>(emb_s[i]))
              << "row sin " << i << " of " << n << ", lanes " << lanes;
        }
      }
    }
  }
}
#endif  // __x86_64__

}  // namespace
