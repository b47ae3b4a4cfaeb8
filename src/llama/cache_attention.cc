// The Llama forward pass's attention kernel, written once with Google Highway for every target
// and dispatched at run time (as kernels.cc), and its exp.
//
// Two paths compute the same bits (the same float32 operations on each (query, key) pair, in the
// same order): a tile of queries vectorised over the queries (prefill), and one query at a time
// vectorised over the keys (decoding, and tiles of few queries). Per query t and key j:
//   s_tj = sum_e (fl(scale log2 e) q_te) k_je      in order of e, MulAdd after the first product
//   p_tj = 2^(s_tj - max_j s_tj), 0 below 2^-64   (Exp2Weight)
//   out_t = (sum_j p_tj v_j) / (sum_j p_tj)        both sums in order of j, MulAdd / Add
// MulAdd is fused where the target has FMA (AVX2, AVX3, NEON, SVE) and Mul then Add elsewhere, so
// targets differ in the last bits; on one target nothing depends on the path, the tile, the
// thread or the step. The scores are in base 2 (log2 e folded into the query's scale) so that
// the exponential needs no range reduction by ln 2.
// foreach_target.h re-includes this file once per target, so the order of these lines is
// Highway's, not alphabetical.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "llama/cache_attention.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "llama/kernels.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::llama::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;

constexpr float kLog2e = 1.44269504088896340736f;
// Weights below 2^-64 are 0 and the exponential never sees an argument below -64: underflowing
// towards subnormals (in exp, in p v, in sums of tiny terms) made plain RoPE at ctx 2048 1.2x
// slower than ntk (docs/eval.md). Beside the weight 1 of the maximum, even 2^30 such weights
// (2^-34) stay below half an ulp of 1 (2^-25): the float32 sums do not see them.
constexpr float kMinLog2Weight = -64.0f;

// 2^x for x in [-64, 0], 0 for x < -64 (and for -inf, a masked score). Max may turn a NaN into
// -64, so the callers make a query whose scores give a NaN output NaN themselves.
//
// x = n + f with n = round(x) and f = x - n in [-1/2, 1/2]; 2^x = 2^n p(f).
// - n: x + M with M = 1.5 2^23 + 127 lies in [2^23, 2^24), where the float32 spacing is 1, so
//   the sum is rounded to M + n exactly; its bits are 0x4B400000 + 127 + n, and shifted left by
//   23 they are (127 + n) << 23 (the 2^22 and exponent bits fall off the top): the float 2^n,
//   normal for n >= -64.
// - f = x - n is exact (Sterbenz: n and x are within a factor 2 of each other, or n = 0).
// - p(f) = 1 + f (c1 + f (c2 + f (c3 + f (c4 + f c5)))): degree 5 with p(0) = 1 (so 2^0 = 1 and
//   every integer power of 2 is exact), minimax for the relative error of 2^f on [-1/2, 1/2]
//   (Lawson's iteration in float64 on 4001 Chebyshev points), coefficients rounded to float32:
//   9.2e-8 in exact arithmetic. In float32 each Horner step rounds once (MulAdd fused) or twice
//   (Mul then Add); a step's rounding is scaled by the steps after it by |f| <= 1/2 each, so they
//   add at most 2^-24 (1 + 1/2 + 1/4 + ...) = 1.2e-7 fused and 1.8e-7 unfused. Bound:
//   |2^x (computed) / 2^x - 1| <= 2.1e-7 (FMA targets), 2.7e-7 (SSE4, SSSE3, scalar); measured
//   on a dense grid of [-64, 0]: 1.5e-7 and 1.8e-7 (tests/llama/llama_attention_kernel_test.cc).
//   Degree 4 would give 2.6e-6, 40x float32's 2^-24 = 6e-8; Highway's hn::Exp (degree 6, Cody-
//   Waite reduction by ln 2, overflow handling) costs about twice the operations.
// - the product 2^n p(f) is exact (p(f) in [0.70, 1.42], 2^n >= 2^-64: no underflow).
// Eleven operations (five of them MulAdd) against about 25 for hn::Exp with its clamps.
template <class DF, class V>
HWY_INLINE V Exp2Weight(DF d, V x) {
  const hn::RebindToUnsigned<DF> du;
  const auto magic = hn::Set(d, 12583039.0f);  // 1.5 * 2^23 + 127
  const auto xc = hn::Max(x, hn::Set(d, kMinLog2Weight));
  const auto t = hn::Add(xc, magic);
  const auto f = hn::Sub(xc, hn::Sub(t, magic));
  const auto two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(du, t)));
  auto p = hn::MulAdd(hn::Set(d, 1.32647273e-3f), f, hn::Set(d, 9.67151299e-3f));
  p = hn::MulAdd(p, f, hn::Set(d, 5.55073358e-2f));
  p = hn::MulAdd(p, f, hn::Set(d, 2.40222424e-1f));
  p = hn::MulAdd(p, f, hn::Set(d, 6.93147004e-1f));
  p = hn::MulAdd(p, f, hn::Set(d, 1.0f));
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, kMinLog2Weight)), hn::Mul(p, two_n));
}

// Keys per block: a block of scores (kBlock x lanes floats, 8 KiB at 16 lanes) stays in L1
// between the passes over the head dims. A multiple of kKeyBlock.
constexpr std::int64_t kBlock = 128;
static_assert(kBlock % kKeyBlock == 0);

float QueryScale(const AttentionArgs& a) { return a.scale * kLog2e; }

// A tile of queries, one per lane (lanes past the tile: q = 0 at the last position, dropped).
void AttendTile(const AttentionArgs& a) {
  const D d;
  const hn::RebindToSigned<D> di;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t hd = a.head_dim;
  const float scale = QueryScale(a);
  thread_local std::vector<float> scores, qt, acc, tmp;
  thread_local std::vector<std::int32_t> pos;

  std::int32_t pmin = a.positions[0], pmax = a.positions[0];
  for (std::int64_t t = 1; t < a.tokens; ++t) {
    pmin = std::min(pmin, a.positions[t]);
    pmax = std::max(pmax, a.positions[t]);
  }
  const auto ln = static_cast<std::size_t>(n);
  pos.assign(ln, pmax);
  qt.assign(static_cast<std::size_t>(hd) * ln, 0.0f);
  acc.assign(static_cast<std::size_t>(hd) * ln, 0.0f);
  tmp.resize(ln);
  for (std::int64_t t = 0; t < a.tokens; ++t) {
    pos[static_cast<std::size_t>(t)] = a.positions[t];
    for (std::int64_t e = 0; e < hd; ++e)
      qt[static_cast<std::size_t>(e * n + t)] = a.q[t * a.q_stride + e] * scale;
  }
  const std::int64_t keys = std::int64_t{pmax} + 1;
  scores.resize(static_cast<std::size_t>(keys * n));
  float* s = scores.data();
  const auto posv = hn::LoadU(di, pos.data());
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());

  // Pass 1: scores, masked past each lane's position; four dims per sweep over the block (four
  // products per load and store of s_j).
  auto m = neg_inf;
  auto nan = hn::FirstN(d, 0);  // lanes with a NaN score
  for (std::int64_t jb = 0; jb < keys; jb += kBlock) {
    const std::int64_t je = std::min(keys, jb + kBlock);
    std::int64_t e = 0;
    for (; e + 4 <= hd; e += 4) {
      const auto q0 = hn::LoadU(d, qt.data() + e * n), q1 = hn::LoadU(d, qt.data() + (e + 1) * n);
      const auto q2 = hn::LoadU(d, qt.data() + (e + 2) * n),
                 q3 = hn::LoadU(d, qt.data() + (e + 3) * n);
      for (std::int64_t j = jb; j < je; ++j) {
        const float* kp = a.k + j * a.k_stride + e;
        auto v = e == 0 ? hn::Mul(q0, hn::Set(d, kp[0]))
                        : hn::MulAdd(q0, hn::Set(d, kp[0]), hn::LoadU(d, s + j * n));
        v = hn::MulAdd(q1, hn::Set(d, kp[1]), v);
        v = hn::MulAdd(q2, hn::Set(d, kp[2]), v);
        v = hn::MulAdd(q3, hn::Set(d, kp[3]), v);
        hn::StoreU(v, d, s + j * n);
      }
    }
    for (; e < hd; ++e) {
      const auto qe = hn::LoadU(d, qt.data() + e * n);
      for (std::int64_t j = jb; j < je; ++j) {
        const auto ke = hn::Set(d, a.k[j * a.k_stride + e]);
        const auto v = e == 0 ? hn::Mul(qe, ke) : hn::MulAdd(qe, ke, hn::LoadU(d, s + j * n));
        hn::StoreU(v, d, s + j * n);
      }
    }
    for (std::int64_t j = jb; j < je; ++j) {
      auto v = hn::LoadU(d, s + j * n);
      if (j > pmin) {
        v = hn::IfThenElse(
            hn::RebindMask(d, hn::Lt(posv, hn::Set(di, static_cast<std::int32_t>(j)))), neg_inf, v);
        hn::StoreU(v, d, s + j * n);
      }
      m = hn::Max(m, v);
      nan = hn::Or(nan, hn::IsNaN(v));
    }
  }

  // Pass 2: the weights (0 where masked: the score is -inf), their sum, and sum_j p_j v_j.
  auto sum = hn::Zero(d);
  for (std::int64_t jb = 0; jb < keys; jb += kBlock) {
    const std::int64_t je = std::min(keys, jb + kBlock);
    for (std::int64_t j = jb; j < je; ++j) {
      const auto p = Exp2Weight(d, hn::Sub(hn::LoadU(d, s + j * n), m));
      hn::StoreU(p, d, s + j * n);
      sum = hn::Add(sum, p);
    }
    // Eight dims at a time: one chain of MulAdd per dim, each waiting for its last MulAdd (4
    // cycles), so eight chains keep two FMA ports busy (2 x 4 = 8); four did half of that.
    std::int64_t e = 0;
    for (; e + 8 <= hd; e += 8) {
      float* ap = acc.data() + e * n;
      hn::Vec<D> c[8];
      for (int i = 0; i < 8; ++i) c[i] = hn::LoadU(d, ap + i * n);
      for (std::int64_t j = jb; j < je; ++j) {
        const auto p = hn::LoadU(d, s + j * n);
        const float* vp = a.v + j * a.v_stride + e;
        for (int i = 0; i < 8; ++i) c[i] = hn::MulAdd(p, hn::Set(d, vp[i]), c[i]);
      }
      for (int i = 0; i < 8; ++i) hn::StoreU(c[i], d, ap + i * n);
    }
    for (; e + 4 <= hd; e += 4) {
      float* ap = acc.data() + e * n;
      auto c0 = hn::LoadU(d, ap), c1 = hn::LoadU(d, ap + n), c2 = hn::LoadU(d, ap + 2 * n),
           c3 = hn::LoadU(d, ap + 3 * n);
      for (std::int64_t j = jb; j < je; ++j) {
        const auto p = hn::LoadU(d, s + j * n);
        const float* vp = a.v + j * a.v_stride + e;
        c0 = hn::MulAdd(p, hn::Set(d, vp[0]), c0);
        c1 = hn::MulAdd(p, hn::Set(d, vp[1]), c1);
        c2 = hn::MulAdd(p, hn::Set(d, vp[2]), c2);
        c3 = hn::MulAdd(p, hn::Set(d, vp[3]), c3);
      }
      hn::StoreU(c0, d, ap);
      hn::StoreU(c1, d, ap + n);
      hn::StoreU(c2, d, ap + 2 * n);
      hn::StoreU(c3, d, ap + 3 * n);
    }
    for (; e < hd; ++e) {
      auto c = hn::LoadU(d, acc.data() + e * n);
      for (std::int64_t j = jb; j < je; ++j)
        c = hn::MulAdd(hn::LoadU(d, s + j * n), hn::Set(d, a.v[j * a.v_stride + e]), c);
      hn::StoreU(c, d, acc.data() + e * n);
    }
  }
  // A NaN score, or an infinite maximum (s - max = inf - inf), would reach exp as NaN, which its
  // clamp turns into a weight of 2^-64: such a query's output is NaN instead.
  nan = hn::Or(nan, hn::Not(hn::IsFinite(m)));
  sum = hn::IfThenElse(nan, hn::Set(d, std::numeric_limits<float>::quiet_NaN()), sum);
  for (std::int64_t e = 0; e < hd; ++e) {
    hn::StoreU(hn::Div(hn::LoadU(d, acc.data() + e * n), sum), d, tmp.data());
    for (std::int64_t t = 0; t < a.tokens; ++t)
      a.out[t * a.out_stride + e] = tmp[static_cast<std::size_t>(t)];
  }
}

// sum_j p_ij v_j / sum_j p_ij for Q queries i (weights p_i = p + i * stride), in order of j,
// vectorised over the head dims (the lanes of DV) from e0. Q independent chains of MulAdd hide
// each other's latency (one chain waits 4 cycles a key); the first dims' pass also sums the
// weights, a chain of its own.
template <int Q, class DV>
HWY_INLINE void WeightedValues(DV dv, const AttentionArgs& a, const float* p, std::int64_t stride,
                               std::int64_t keys, std::int64_t e0, const bool* poison, float* sum,
                               float* const* out) {
  hn::Vec<DV> c[Q];
  float acc[Q];
  for (int i = 0; i < Q; ++i) c[i] = hn::Zero(dv), acc[i] = 0.0f;
  const float* vp = a.v + e0;
  for (std::int64_t j = 0; j < keys; ++j, vp += a.v_stride) {
    const auto v = hn::LoadU(dv, vp);
    for (int i = 0; i < Q; ++i) {
      const float pij = p[i * stride + j];
      c[i] = hn::MulAdd(hn::Set(dv, pij), v, c[i]);
      if (e0 == 0) acc[i] += pij;
    }
  }
  for (int i = 0; i < Q; ++i) {
    if (e0 == 0) sum[i] = poison[i] ? std::numeric_limits<float>::quiet_NaN() : acc[i];
    hn::StoreU(hn::Div(c[i], hn::Set(dv, sum[i])), dv, out[i] + e0);
  }
}

// Q queries (t0 .. t0 + Q - 1), vectorised over keys. Keys in blocks of kKeyBlock positions,
// [block][e][position in block], so that a vector holds dim e of consecutive keys: a.k_blocks when
// the caller keeps them (decoding), else the keys of each kBlock are transposed into kt first.
// Weights past a query's position are 0, which leaves its sums unchanged (x + 0 = x): the bits
// are those of the tile.
template <int Q>
void AttendFew(const AttentionArgs& a, std::int64_t t0) {
  const hn::CappedTag<float, kKeyBlock> d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t hd = a.head_dim;
  const std::int64_t block = hd * kKeyBlock;  // floats of one key block
  const float scale = QueryScale(a);
  thread_local std::vector<float> scores, kt, qs;
  std::int64_t own[Q], keys = 0;  // keys of each query, of all
  for (int i = 0; i < Q; ++i) {
    own[i] = std::int64_t{a.positions[t0 + i]} + 1;
    keys = std::max(keys, own[i]);
  }
  const std::int64_t padded = (keys + n - 1) / n * n;
  scores.resize(static_cast<std::size_t>(Q * padded));
  if (a.k_blocks == nullptr) kt.assign(static_cast<std::size_t>(hd * kBlock), 0.0f);
  qs.resize(static_cast<std::size_t>(Q * hd));
  for (int i = 0; i < Q; ++i) {
    for (std::int64_t e = 0; e < hd; ++e)
      qs[static_cast<std::size_t>(i * hd + e)] = a.q[(t0 + i) * a.q_stride + e] * scale;
  }
  float* s = scores.data();
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());

  hn::Vec<decltype(d)> m[Q];
  hn::Mask<decltype(d)> nan[Q];
  for (int i = 0; i < Q; ++i) m[i] = neg_inf, nan[i] = hn::FirstN(d, 0);
  for (std::int64_t jb = 0; jb < keys; jb += kBlock) {
    const std::int64_t je = std::min(keys, jb + kBlock);
    // (No pointer arithmetic on a null k_blocks: the keys are transposed into kt instead.)
    const float* kb = a.k_blocks != nullptr ? a.k_blocks + jb / kKeyBlock * block : nullptr;
    if (a.k_blocks == nullptr) {
      for (std::int64_t j = jb; j < je; ++j) {
        const float* kp = a.k + j * a.k_stride;
        float* dst = kt.data() + (j - jb) / kKeyBlock * block + (j - jb) % kKeyBlock;
        for (std::int64_t e = 0; e < hd; ++e) dst[e * kKeyBlock] = kp[e];
      }
      kb = kt.data();
    }
    for (std::int64_t j = jb; j < je; j += n) {
      const float* kp = kb + (j - jb) / kKeyBlock * block + (j - jb) % kKeyBlock;
      for (int i = 0; i < Q; ++i) {
        const float* q = qs.data() + i * hd;
        auto v = hn::Mul(hn::Set(d, q[0]), hn::LoadU(d, kp));
        for (std::int64_t e = 1; e < hd; ++e)
          v = hn::MulAdd(hn::Set(d, q[e]), hn::LoadU(d, kp + e * kKeyBlock), v);
        if (j + n > own[i]) {
          const std::int64_t valid = std::max<std::int64_t>(0, own[i] - j);
          v = hn::IfThenElse(hn::FirstN(d, static_cast<std::size_t>(valid)), v, neg_inf);
        }
        hn::StoreU(v, d, s + i * padded + j);
        m[i] = hn::Max(m[i], v);
        nan[i] = hn::Or(nan[i], hn::IsNaN(v));
      }
    }
  }
  for (int i = 0; i < Q; ++i) {
    const auto mx = hn::MaxOfLanes(d, m[i]);
    float* si = s + i * padded;
    for (std::int64_t j = 0; j < padded; j += n)
      hn::StoreU(Exp2Weight(d, hn::Sub(hn::LoadU(d, si + j), mx)), d, si + j);
  }

  const hn::CappedTag<float, 8> d8;
  const hn::CappedTag<float, 1> d1;
  const std::int64_t n8 = static_cast<std::int64_t>(hn::Lanes(d8));
  float sum[Q];
  bool poison[Q];  // a NaN score: the output is NaN, as the tile's
  for (int i = 0; i < Q; ++i)
    poison[i] = !hn::AllFalse(d, hn::Or(nan[i], hn::Not(hn::IsFinite(hn::MaxOfLanes(d, m[i])))));
  float* out[Q];
  for (int i = 0; i < Q; ++i) out[i] = a.out + (t0 + i) * a.out_stride;
  std::int64_t e = 0;
  for (; e + n8 <= hd; e += n8) WeightedValues<Q>(d8, a, s, padded, keys, e, poison, sum, out);
  for (; e < hd; ++e) WeightedValues<Q>(d1, a, s, padded, keys, e, poison, sum, out);
}

void Attend(const AttentionArgs& a) {
  const bool per_query = a.path == AttentionPath::kPerQuery ||
                         (a.path == AttentionPath::kAuto && a.tokens <= kPerQueryMaxTokens);
  if (!per_query) return AttendTile(a);
  std::int64_t t = 0;
  for (; t + 4 <= a.tokens; t += 4) AttendFew<4>(a, t);
  switch (a.tokens - t) {
    case 3:
      return AttendFew<3>(a, t);
    case 2:
      return AttendFew<2>(a, t);
    case 1:
      return AttendFew<1>(a, t);
    default:
      return;
  }
}

std::int64_t AttentionTileTokens() { return static_cast<std::int64_t>(hn::Lanes(D())); }

void Exp2Weights(const float* x, float* out, std::int64_t count) {
  const D d;
  const hn::CappedTag<float, 1> d1;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + n <= count; i += n) hn::StoreU(Exp2Weight(d, hn::LoadU(d, x + i)), d, out + i);
  for (; i < count; ++i) hn::StoreU(Exp2Weight(d1, hn::LoadU(d1, x + i)), d1, out + i);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::llama::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::llama::detail {

HWY_EXPORT(Attend);
HWY_EXPORT(AttentionTileTokens);
HWY_EXPORT(Exp2Weights);

void attend(const AttentionArgs& args) { HWY_DYNAMIC_DISPATCH(Attend)(args); }
std::int64_t attention_tile_tokens() { return HWY_DYNAMIC_DISPATCH(AttentionTileTokens)(); }
void exp2_weights(const float* x, float* out, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(Exp2Weights)(x, out, n);
}

}  // namespace posenc::llama::detail
#endif  // HWY_ONCE
