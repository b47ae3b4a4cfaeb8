// Kernel tests: apply_rope and rerotate_keys on every SIMD target this machine supports, against
// a long-double reference rotation (exact cos/sin of p * w from tests/reference, no src/ code).
//
// Tolerances, per dtype (x = input pair, |x| its norm, af the attention factor):
//   f32: the kernel rounds c and s to float32 (0.5 ulp each, relative to af), then forms
//        x_a c - x_b s with one rounded product and one fused multiply-add (<= 1.5 ulp of
//        af |x|). Total <= ~2.5 ulp of af |x|; the bound checked is 4 float32 ulps of af |x|
//        (the budget), i.e. 4 * 2^-23 * 2^floor(log2(af |x|)).
//   f16, bf16: inputs are exact in the storage type; the float32 math above adds at most
//        2.5 * 2^-24 af |x| before the final rounding to nearest even, which adds 0.5 ulp of the
//        storage type. So the output is within 1 storage ulp of the exact result whenever that
//        result is not tiny against the pair norm; for results below 2^-11 af |x| (f16) the
//        float32 term can dominate, so the bound is 1 storage ulp + 2.5 * 2^-24 af |x|.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/apply.h"
#include "posenc/cos_sin.h"
#include "posenc/error.h"
#include "posenc/frequencies.h"
#include "posenc/table.h"
#include "posenc/targets.h"
#include "reference/ggml_reference.h"
#include "reference/hf_float32_reference.h"
#include "reference/rope_reference.h"
#include "support/simd_targets.h"

namespace {

using posenc::DType;
using posenc::Layout;

// Storage conversions written here (round to nearest even), independent of src/kernels/half.h.
std::uint16_t ToBf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float FromBf16(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }
float FromF16(std::uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(1.0f + m / 1024.0f, e - 15);
  return (h & 0x8000) ? -mag : mag;
}
// float16 by arithmetic in double: scaling by a power of two is exact, and nearbyint rounds
// to nearest even in the default rounding mode (finite inputs below 65520).
std::uint16_t ToF16(float f) {
  const double a = std::abs(static_cast<double>(f));
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const int e = a == 0 ? -15 : std::max(std::ilogb(a), -14);
  const double steps = std::nearbyint(std::ldexp(a, 10 - e));  // multiples of the ulp at e
  if (e == -14 && steps < 1024) return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(steps));
  // steps is in [1024, 2048]; 2048 means the rounding carried into the next binade.
  const int exp = steps == 2048 ? e + 1 : e;
  const int mant = steps == 2048 ? 0 : static_cast<int>(steps) - 1024;
  return static_cast<std::uint16_t>(sign | ((exp + 15) << 10) | mant);
}

double StorageUlp(DType dtype, double v) {
  const int mant = dtype == DType::kF32 ? 23 : dtype == DType::kBF16 ? 7 : 10;
  const int min_exp = dtype == DType::kF16 ? -14 : -126;
  const int e = std::max(v == 0 ? min_exp : std::ilogb(v), min_exp);
  return std::ldexp(1.0, e - mant);
}

// A tensor of one dtype, stored as raw bytes, with float access.
struct Buffer {
  DType dtype;
  std::vector<std::uint8_t> bytes;
  Buffer(DType d, std::size_t n) : dtype(d), bytes(n * posenc::dtype_size(d)) {}
  float get(std::size_t i) const {
    if (dtype == DType::kF32) { float f; std::memcpy(&f, &bytes[4 * i], 4); return f; }
    std::uint16_t h; std::memcpy(&h, &bytes[2 * i], 2);
    return dtype == DType::kBF16 ? FromBf16(h) : FromF16(h);
  }
  void set(std::size_t i, float v) {
    if (dtype == DType::kF32) { std::memcpy(&bytes[4 * i], &v, 4); return; }
    const std::uint16_t h = dtype == DType::kBF16 ? ToBf16(v) : ToF16(v);
    std::memcpy(&bytes[2 * i], &h, 2);
  }
};

posenc::RopeSpec Spec(std::int64_t head_dim, std::int64_t rotary_dim, std::int64_t offset, Layout layout) {
  posenc::RopeSpec s;
  s.head_dim = head_dim;
  s.rotary_dim = rotary_dim;
  s.rotary_offset = offset;
  s.layout = layout;
  return s;
}

posenc::RopeSpec YarnSpec(std::int64_t head_dim, Layout layout) {
  posenc::RopeSpec s = Spec(head_dim, head_dim, 0, layout);
  s.method = posenc::Method::kYarn;
  s.factor = 16;
  s.original_max_position_embeddings = 4096;
  return s;
}

// Pair i's two dims within a head.
std::pair<std::int64_t, std::int64_t> PairDims(const posenc::RopeSpec& s, std::int64_t i) {
  if (s.layout == Layout::kHalfSplit) return {s.rotary_offset + i, s.rotary_offset + i + s.rotary_dim / 2};
  return {s.rotary_offset + 2 * i, s.rotary_offset + 2 * i + 1};
}

// Checks `out` (from `in`) against the exact rotation; returns the number of elements checked.
int CheckRotation(const posenc::Frequencies& f, const Buffer& in, const Buffer& out, std::int64_t tokens,
                  std::int64_t heads, const std::vector<std::int64_t>& pos, bool inverse, const std::string& what) {
  const posenc::RopeSpec& s = f.spec;
  const long double af = f.attention_factor;
  int checked = 0, failures = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::size_t base = static_cast<std::size_t>((t * heads + h) * s.head_dim);
      for (std::int64_t i = 0; i < s.rotary_dim / 2; ++i) {
        long double sn, cs;
        posenc_ref::ExactSinCosL(pos[static_cast<std::size_t>(t)], f.inv_freq[static_cast<std::size_t>(i)], sn, cs);
        if (inverse) sn = -sn;
        const auto [a, b] = PairDims(s, i);
        const long double xa = in.get(base + static_cast<std::size_t>(a)), xb = in.get(base + static_cast<std::size_t>(b));
        const long double ya = af * (xa * cs - xb * sn), yb = af * (xb * cs + xa * sn);
        const double norm = static_cast<double>(af * std::sqrt(xa * xa + xb * xb));
        for (auto [dim, exact] : {std::pair{a, ya}, std::pair{b, yb}}) {
          const double got = out.get(base + static_cast<std::size_t>(dim));
          const double err = std::abs(got - static_cast<double>(exact));
          const double tol = in.dtype == DType::kF32 ? 4 * StorageUlp(DType::kF32, norm)
                                                     : StorageUlp(in.dtype, std::abs(static_cast<double>(exact))) +
                                                           2.5 * std::ldexp(norm, -24);
          ++checked;
          if (!(err <= tol) && failures++ < 5) {
            ADD_FAILURE() << what << ": token " << t << " head " << h << " pair " << i << " dim " << dim
                          << " position " << pos[static_cast<std::size_t>(t)] << ": got " << got << ", exact "
                          << static_cast<double>(exact) << ", error " << err << " > " << tol;
          }
        }
      }
      // Dims outside the rotated range: untouched, bit for bit.
      for (std::int64_t d = 0; d < s.head_dim; ++d) {
        if (d >= s.rotary_offset && d < s.rotary_offset + s.rotary_dim) continue;
        const std::size_t k = (base + static_cast<std::size_t>(d)) * posenc::dtype_size(in.dtype);
        if (std::memcmp(&in.bytes[k], &out.bytes[k], posenc::dtype_size(in.dtype)) != 0 && failures++ < 5) {
          ADD_FAILURE() << what << ": dim " << d << " outside the rotary range changed";
        }
      }
    }
  }
  return checked;
}

Buffer Random(DType dtype, std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Buffer b(dtype, n);
  for (std::size_t i = 0; i < n; ++i) b.set(i, dist(rng));
  return b;
}

using posenc_test::AwkwardCounts;
using posenc_test::FloatLanes;
using posenc_test::ForEachTarget;

TEST(ApplyRope, AccuracyOnEveryTargetSweep) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::int64_t> position(0, (std::int64_t{1} << 24) - 1);
  ForEachTarget([&](const std::string& target) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (Layout layout : {Layout::kHalfSplit, Layout::kInterleaved}) {
        std::vector<std::int64_t> head_dims = {2, 4, 6, 8, 14, 16, 30, 32, 34, 62, 64, 96, 128, 130, 256};
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
              args.q = posenc::TensorView::contiguous(out.bytes.data(), dtype, tokens, heads, head_dim);
              args.positions = std::span<const std::int64_t>(pos);
              posenc::apply_rope(f, args);
              CheckRotation(f, in, out, tokens, heads, pos, false,
                            target + " " + std::string(posenc::dtype_name(dtype)) + " " +
                                std::string(posenc::layout_name(layout)) + " head_dim " + std::to_string(head_dim) +
                                " offset " + std::to_string(offset));
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
  // Raw storage bits: zeros, the smallest subnormal, the largest finite, infinities, a NaN, 1 + 1 ulp.
  const std::uint32_t f32_specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x7F7FFFFFu, 0xFF7FFFFFu,
                                        0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x3F800001u, 0x33800000u};
  const std::uint16_t f16_specials[] = {0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x3C01};
  const std::uint16_t bf16_specials[] = {0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x3F81};
  ForEachTarget([&](const std::string& target) {
    const std::int64_t lanes = FloatLanes(target);
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (Layout layout : {Layout::kHalfSplit, Layout::kInterleaved}) {
        for (std::int64_t n : AwkwardCounts(lanes)) {
          const std::int64_t m = n * lanes, tokens = 3, heads = 2;
          const posenc::Frequencies f = posenc::compute_frequencies(Spec(2 * n, 2 * n, 0, layout));
          posenc::Frequencies g = posenc::compute_frequencies(Spec(2 * m, 2 * m, 0, layout));
          for (std::int64_t k = 0; k < m; ++k) {
            g.inv_freq[static_cast<std::size_t>(k)] = f.inv_freq[static_cast<std::size_t>(k / lanes)];
          }
          Buffer shortb = Random(dtype, static_cast<std::size_t>(tokens * heads * 2 * n), rng);
          for (std::size_t i = 0, k = 0; i < shortb.bytes.size() / posenc::dtype_size(dtype); i += 3, k = (k + 1) % 10) {
            if (dtype == DType::kF32) {
              std::memcpy(&shortb.bytes[4 * i], &f32_specials[k], 4);
            } else {
              std::memcpy(&shortb.bytes[2 * i], dtype == DType::kF16 ? &f16_specials[k] : &bf16_specials[k], 2);
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
                std::memcpy(&longb.bytes[at(t, h, la, 2 * m)], &shortb.bytes[at(t, h, sa, 2 * n)], es);
                std::memcpy(&longb.bytes[at(t, h, lb, 2 * m)], &shortb.bytes[at(t, h, sb, 2 * n)], es);
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
                  const bool same = std::memcmp(&so.bytes[at(t, h, sa, 2 * n)], &lo.bytes[at(t, h, la, 2 * m)], es) == 0 &&
                                    std::memcmp(&so.bytes[at(t, h, sb, 2 * n)], &lo.bytes[at(t, h, lb, 2 * m)], es) == 0;
                  if (!same && ++differ <= 3) {
                    ADD_FAILURE() << target << " " << posenc::dtype_name(dtype) << " " << posenc::layout_name(layout)
                                  << " pairs " << n << " token " << t << " head " << h << " pair " << i << ": "
                                  << so.get(at(t, h, sa, 2 * n) / es) << ", " << so.get(at(t, h, sb, 2 * n) / es)
                                  << " in the short row, " << lo.get(at(t, h, la, 2 * m) / es) << ", "
                                  << lo.get(at(t, h, lb, 2 * m) / es) << " in the body";
                  }
                }
              }
            }
            EXPECT_EQ(differ, 0) << target << " " << posenc::dtype_name(dtype) << " " << posenc::layout_name(layout)
                                 << " pairs " << n;
          }
        }
      }
    }
  });
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
    const posenc::Frequencies f = posenc::compute_frequencies(Spec(128, 128, 0, Layout::kHalfSplit));
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
    EXPECT_NEAR(dot_at(10, 10 + delta), dot_at(1010, 1010 + delta), 64 * 2 * 36 * std::ldexp(1.0, -22));
  }
}

TEST(ApplyRope, LayoutsAgreeUnderThePermutation) {
  std::mt19937 rng(5);
  const std::int64_t d = 96, n = d / 2;
  const posenc::Frequencies half = posenc::compute_frequencies(Spec(d, d, 0, Layout::kHalfSplit));
  const posenc::Frequencies inter = posenc::compute_frequencies(Spec(d, d, 0, Layout::kInterleaved));
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
    EXPECT_EQ(a.get(static_cast<std::size_t>(i + n)), b.get(static_cast<std::size_t>(2 * i + 1))) << i;
  }
}

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
      args.k = posenc::TensorView{work.bytes.data() + es * (1 + hq * d), dtype, tokens, hkv, d, row, d};
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
      CheckRotation(f, gather(packed, 0, hq), gather(work, 0, hq), tokens, hq, pos, false, "packed q");
      CheckRotation(f, gather(packed, hq, hkv), gather(work, hq, hkv), tokens, hkv, pos, false, "packed k");
      // v is untouched, and so is the element in front.
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t j = (hq + hkv) * d; j < row; ++j)
          ASSERT_EQ(work.get(static_cast<std::size_t>(1 + t * row + j)), packed.get(static_cast<std::size_t>(1 + t * row + j)));
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
  for (posenc::Numerics numerics : {posenc::Numerics::kPrecise, posenc::Numerics::kHf, posenc::Numerics::kGgml}) {
    const posenc::Frequencies f = posenc::compute_frequencies(YarnSpec(128, Layout::kHalfSplit), numerics);
    const posenc::CosSinTable table(f, 512);
    const std::int64_t tokens = 8, heads = 4;
    const Buffer in = Random(DType::kF32, static_cast<std::size_t>(tokens * heads * 128), rng);
    Buffer a = in, b = in;
    const std::vector<std::int64_t> pos = {0, 1, 511, 512, 9000, 3, 200, 511};  // some past the table
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

TEST(CosSinTable, PreciseEntriesAreTheExactValuesRoundedOnce) {
  const posenc::Frequencies f = posenc::compute_frequencies(YarnSpec(128, Layout::kHalfSplit));
  const posenc::CosSinTable table(f, 4096);
  int off = 0;
  for (std::int64_t p : {0, 1, 2, 100, 4095}) {
    for (std::int64_t i = 0; i < 64; ++i) {
      long double s, c;
      posenc_ref::ExactSinCosL(p, f.inv_freq[static_cast<std::size_t>(i)], s, c);
      const float want_c = static_cast<float>(c * f.attention_factor);
      const float want_s = static_cast<float>(s * f.attention_factor);
      // Equal, or (a tie-breaking double rounding) one float32 ulp away; count those.
      const float got_c = table.cos_row(p)[static_cast<std::size_t>(i)];
      const float got_s = table.sin_row(p)[static_cast<std::size_t>(i)];
      off += (got_c != want_c) + (got_s != want_s);
      EXPECT_LE(std::abs(got_c - want_c), std::nextafter(std::abs(want_c), INFINITY) - std::abs(want_c));
      EXPECT_LE(std::abs(got_s - want_s), std::nextafter(std::abs(want_s), INFINITY) - std::abs(want_s));
    }
  }
  EXPECT_LE(off, 2) << "entries not exactly rounded";
}

TEST(CosSinTable, HfAndGgmlTablesFollowTheirReferences) {
  posenc::RopeSpec spec = YarnSpec(128, Layout::kHalfSplit);
  const posenc::Frequencies hf = posenc::compute_frequencies(spec, posenc::Numerics::kHf);
  const posenc::CosSinTable hf_table(hf, 140000);
  std::vector<float> inv(hf.inv_freq.begin(), hf.inv_freq.end()), c, s;
  for (std::int64_t p : {0, 1, 4095, 131071, 139999}) {
    posenc_hf::CosSinAt(inv, hf.attention_factor, p, c, s);
    for (std::size_t i = 0; i < inv.size(); ++i) {
      EXPECT_EQ(hf_table.cos_row(p)[i], c[i]) << p << " " << i;
      EXPECT_EQ(hf_table.sin_row(p)[i], s[i]) << p << " " << i;
    }
  }
  const posenc::Frequencies gg = posenc::compute_frequencies(spec, posenc::Numerics::kGgml);
  const posenc::CosSinTable gg_table(gg, 5000);
  posenc_ggml::Params gp;
  gp.n_dims = gg.ggml->n_dims;
  gp.n_ctx_orig = gg.ggml->n_ctx_orig;
  gp.freq_base = gg.ggml->freq_base;
  gp.freq_scale = gg.ggml->freq_scale;
  gp.ext_factor = gg.ggml->ext_factor;
  gp.attn_factor = gg.ggml->attn_factor;
  gp.beta_fast = gg.ggml->beta_fast;
  gp.beta_slow = gg.ggml->beta_slow;
  for (std::int64_t p : {0, 1, 4095, 4999}) {
    posenc_ggml::CosSinAt(gp, p, c, s);
    for (std::size_t i = 0; i < c.size(); ++i) {
      EXPECT_EQ(gg_table.cos_row(p)[i], c[i]) << p << " " << i;
      EXPECT_EQ(gg_table.sin_row(p)[i], s[i]) << p << " " << i;
    }
  }
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

// Re-rotating cached keys from the old frequencies to the new ones equals rotating the keys
// directly with the new ones. Two roundings instead of one: twice the f32 budget.
void CheckRerotation(const posenc::Frequencies& from, const posenc::Frequencies& to, const std::string& what) {
  std::mt19937 rng(41);
  const std::int64_t tokens = 7, heads = 2, d = from.spec.head_dim;
  const Buffer keys = Random(DType::kF32, static_cast<std::size_t>(tokens * heads * d), rng);
  const std::vector<std::int64_t> pos = {0, 1, 100, 4095, 4096, 9000, 16383};
  Buffer cached = keys, direct = keys;
  posenc::RopeArgs args;
  args.positions = std::span<const std::int64_t>(pos);
  args.q = posenc::TensorView::contiguous(cached.bytes.data(), DType::kF32, tokens, heads, d);
  posenc::apply_rope(from, args);
  posenc::rerotate_keys(from, to, args.q, args.positions);
  args.q = posenc::TensorView::contiguous(direct.bytes.data(), DType::kF32, tokens, heads, d);
  posenc::apply_rope(to, args);
  for (std::size_t i = 0; i < cached.bytes.size() / 4; ++i) {
    EXPECT_NEAR(cached.get(i), direct.get(i), 8 * std::ldexp(8.0, -23) * to.attention_factor) << what << " " << i;
  }
}

TEST(RerotateKeys, DynamicNtkGrowth) {
  posenc::RopeSpec s = Spec(128, 128, 0, Layout::kHalfSplit);
  s.method = posenc::Method::kDynamic;
  s.factor = 4;
  s.max_position_embeddings = 4096;
  CheckRerotation(posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 4096),
                  posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 16384), "dynamic");
}

TEST(RerotateKeys, DynamicYarnChangesTheAttentionFactor) {
  posenc::RopeSpec s = YarnSpec(64, Layout::kInterleaved);
  s.method = posenc::Method::kDynamicYarn;
  const auto from = posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 4096);
  const auto to = posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 16384);
  ASSERT_NE(from.attention_factor, to.attention_factor);
  CheckRerotation(from, to, "dynamic-yarn");
}

TEST(RerotateKeys, LongropeShortToLong) {
  posenc::RopeSpec s = Spec(64, 64, 0, Layout::kHalfSplit);
  s.method = posenc::Method::kLongrope;
  s.factor = 8;
  s.original_max_position_embeddings = 4096;
  for (int i = 0; i < 32; ++i) {
    s.longrope.short_factor.push_back(1.0 + 0.05 * i);
    s.longrope.long_factor.push_back(1.0 + 0.5 * i);
  }
  CheckRerotation(posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 4096),
                  posenc::compute_frequencies(s, posenc::Numerics::kPrecise, 8192), "longrope");
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
  EXPECT_EQ(std::count_if(targets.begin(), targets.end(), [](const auto& t) { return t.active; }), 1);
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
