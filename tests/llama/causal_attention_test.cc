// posenc::llama's fused causal attention (posenc/llama/attention.h), forward and backward, against
// the float64 reference that materialises every score (tests/reference/attention_reference.h),
// on every SIMD target; the reference itself against finite differences.
//
// Tolerances, relative to max(1, the largest |reference value|) of each output:
// - float64: 1e-12. Every output is a sum of at most S * group (<= 400 here) products of O(1)
//   terms, each rounded once (2^-53 = 1.1e-16): 400 x 1.1e-16 = 4.4e-14 bounds the worst case
//   with margin, and what ran stayed below 2e-14.
// - float32: 2e-5. The same sums in float (2^-24 = 6e-8) after a softmax whose exp is accurate to
//   a few ulp: 400 x 6e-8 = 2.4e-5 in the worst case; the runs below stay near 3e-6.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/llama/attention.h"
#include "reference/attention_reference.h"
#include "support/error_of.h"
#include "support/simd_targets.h"

namespace {

using posenc::llama::AttentionBackward;
using posenc::llama::AttentionForward;
using posenc::llama::AttentionShape;
using posenc::llama::HeadsView;

struct Case {
  std::int64_t batch, seq, heads, kv_heads, head_dim;
  double scale;
};

std::vector<double> Random(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

template <class T>
std::vector<T> As(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// A contiguous [B, S, heads, hd] view.
template <class T>
HeadsView<T> View(T* data, const Case& c, std::int64_t heads) {
  return {data, c.seq * heads * c.head_dim, heads * c.head_dim, c.head_dim};
}

template <class T>
double MaxError(const std::vector<T>& got, const std::vector<double>& want) {
  double scale = 1, err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::fmax(scale, std::fabs(want[i]));
    err = std::fmax(err, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return err / scale;
}

struct Outputs {
  std::vector<double> out, dq, dk, dv;
};

// posenc's forward and backward in T on the case's inputs, widened to double.
template <class T>
Outputs RunAttention(const Case& c, const std::vector<double>& q, const std::vector<double>& k,
                     const std::vector<double>& v, const std::vector<double>& dout, int threads) {
  const AttentionShape shape{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
  std::vector<T> qt = As<T>(q), kt = As<T>(k), vt = As<T>(v), dot = As<T>(dout);
  std::vector<T> out(q.size()), lse(static_cast<std::size_t>(c.batch * c.heads * c.seq));
  std::vector<T> dq(q.size()), dk(k.size()), dv(v.size());
  AttentionForward<T> f;
  f.shape = shape;
  f.scale = static_cast<T>(c.scale);
  f.q = View<const T>(qt.data(), c, c.heads);
  f.k = View<const T>(kt.data(), c, c.kv_heads);
  f.v = View<const T>(vt.data(), c, c.kv_heads);
  f.out = View<T>(out.data(), c, c.heads);
  f.lse = lse.data();
  posenc::llama::causal_attention_forward(f, threads);
  AttentionBackward<T> b;
  b.shape = shape;
  b.scale = f.scale;
  b.q = f.q;
  b.k = f.k;
  b.v = f.v;
  b.out = View<const T>(out.data(), c, c.heads);
  b.dout = View<const T>(dot.data(), c, c.heads);
  b.lse = lse.data();
  b.dq = View<T>(dq.data(), c, c.heads);
  b.dk = View<T>(dk.data(), c, c.kv_heads);
  b.dv = View<T>(dv.data(), c, c.kv_heads);
  posenc::llama::causal_attention_backward(b, threads);
  auto wide = [](const std::vector<T>& x) { return std::vector<double>(x.begin(), x.end()); };
  return {wide(out), wide(dq), wide(dk), wide(dv)};
}

struct Inputs {
  std::vector<double> q, k, v, dout;
};

Inputs Draw(const Case& c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto nq = static_cast<std::size_t>(c.batch * c.seq * c.heads * c.head_dim);
  const auto nk = static_cast<std::size_t>(c.batch * c.seq * c.kv_heads * c.head_dim);
  Inputs in;
  in.q = Random(nq, rng);
  in.k = Random(nk, rng);
  in.v = Random(nk, rng);
  in.dout = Random(nq, rng);
  return in;
}

posenc_ref::AttentionRef RefOf(const Case& c) {
  return {c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, c.scale};
}

// Sizes around the lane count: one query; a tile and one; several tiles and a ragged one; head
// dims of one sweep (8), four (32), eight (64) and with a remainder (6, 12); GQA groups 1-4.
std::vector<Case> Cases(std::int64_t lanes) {
  return {{1, 1, 2, 1, 8, 0.35},
          {2, lanes + 1, 4, 2, 8, 0.35},
          {1, 2 * lanes + 1, 4, 1, 32, 0.18},
          {2, 3 * lanes + lanes / 2, 2, 2, 64, 0.125},
          {1, lanes > 1 ? lanes - 1 : 2, 3, 3, 6, 0.4},
          {1, 37, 8, 4, 12, 2.0}};  // a large scale: peaked softmax, many weights below 2^-64
}

template <class T>
void CheckAgainstReference(const std::string& target, double tolerance) {
  const std::int64_t lanes = posenc_test::FloatLanes(target) / (sizeof(T) == 8 ? 2 : 1);
  ASSERT_EQ(posenc::llama::causal_attention_tile(sizeof(T) == 8), std::max<std::int64_t>(1, lanes))
      << "the attention kernel did not run on the forced target";
  for (const Case& c : Cases(std::max<std::int64_t>(1, lanes))) {
    SCOPED_TRACE("B " + std::to_string(c.batch) + " S " + std::to_string(c.seq) + " H " +
                 std::to_string(c.heads) + " KV " + std::to_string(c.kv_heads) + " hd " +
                 std::to_string(c.head_dim));
    const Inputs in = Draw(c, 7);
    const auto ref = RefOf(c);
    std::vector<double> dq, dk, dv;
    ref.Backward(in.q, in.k, in.v, in.dout, dq, dk, dv);
    const Outputs got = RunAttention<T>(c, in.q, in.k, in.v, in.dout, 2);
    EXPECT_LE(MaxError(got.out, ref.Forward(in.q, in.k, in.v)), tolerance);
    EXPECT_LE(MaxError(got.dq, dq), tolerance);
    EXPECT_LE(MaxError(got.dk, dk), tolerance);
    EXPECT_LE(MaxError(got.dv, dv), tolerance);
  }
}

TEST(CausalAttention, Float64MatchesReference) {
  posenc_test::ForEachTarget([](const std::string& t) { CheckAgainstReference<double>(t, 1e-12); });
}

TEST(CausalAttention, Float32MatchesReference) {
  posenc_test::ForEachTarget([](const std::string& t) { CheckAgainstReference<float>(t, 2e-5); });
}

// The reference's gradients are those of L = sum(dout * out): central differences with step 1e-5
// (truncation ~1e-10, rounding ~1e-16 / 1e-5 = 1e-11) agree to 1e-7.
TEST(CausalAttention, ReferenceGradientsMatchFiniteDifferences) {
  const Case c{1, 5, 2, 1, 4, 0.7};
  Inputs in = Draw(c, 3);
  const auto ref = RefOf(c);
  std::vector<double> dq, dk, dv;
  ref.Backward(in.q, in.k, in.v, in.dout, dq, dk, dv);
  auto loss = [&] {
    const auto out = ref.Forward(in.q, in.k, in.v);
    double l = 0;
    for (std::size_t i = 0; i < out.size(); ++i) l += out[i] * in.dout[i];
    return l;
  };
  const double h = 1e-5;
  for (auto [x, grad] : {std::pair{&in.q, &dq}, std::pair{&in.k, &dk}, std::pair{&in.v, &dv}}) {
    for (std::size_t i = 0; i < x->size(); ++i) {
      const double x0 = (*x)[i];
      (*x)[i] = x0 + h;
      const double up = loss();
      (*x)[i] = x0 - h;
      const double down = loss();
      (*x)[i] = x0;
      EXPECT_NEAR((*grad)[i], (up - down) / (2 * h), 1e-7) << "element " << i;
    }
  }
}

// Each output is summed by one task in a fixed order: the bits do not depend on the threads.
TEST(CausalAttention, SameBitsOnAnyThreadCount) {
  const Case c{2, 100, 8, 4, 8, 0.35};
  const Inputs in = Draw(c, 11);
  const Outputs one = RunAttention<float>(c, in.q, in.k, in.v, in.dout, 1);
  for (int threads : {2, 3, 8}) {
    const Outputs many = RunAttention<float>(c, in.q, in.k, in.v, in.dout, threads);
    EXPECT_EQ(many.out, one.out) << threads << " threads";
    EXPECT_EQ(many.dq, one.dq) << threads << " threads";
    EXPECT_EQ(many.dk, one.dk) << threads << " threads";
    EXPECT_EQ(many.dv, one.dv) << threads << " threads";
  }
}

// Strided views (the head dim contiguous, padding between heads and tokens) read the same values.
TEST(CausalAttention, StridedInputs) {
  const Case c{2, 19, 4, 2, 8, 0.35};
  const Inputs in = Draw(c, 5);
  const Outputs dense = RunAttention<double>(c, in.q, in.k, in.v, in.dout, 1);
  const std::int64_t pad = 3, hs = c.head_dim + pad;
  auto spread = [&](const std::vector<double>& x, std::int64_t heads) {
    std::vector<double> out(static_cast<std::size_t>(c.batch * c.seq * heads * hs), NAN);
    for (std::int64_t r = 0; r < c.batch * c.seq * heads; ++r)
      for (std::int64_t e = 0; e < c.head_dim; ++e)
        out[static_cast<std::size_t>(r * hs + e)] = x[static_cast<std::size_t>(r * c.head_dim + e)];
    return out;
  };
  const auto q = spread(in.q, c.heads), k = spread(in.k, c.kv_heads), v = spread(in.v, c.kv_heads);
  auto strided = [&](const double* p, std::int64_t heads) {
    return HeadsView<const double>{p, c.seq * heads * hs, heads * hs, hs};
  };
  std::vector<double> out(in.q.size()), lse(static_cast<std::size_t>(c.batch * c.heads * c.seq));
  AttentionForward<double> f;
  f.shape = {c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
  f.scale = c.scale;
  f.q = strided(q.data(), c.heads);
  f.k = strided(k.data(), c.kv_heads);
  f.v = strided(v.data(), c.kv_heads);
  f.out = View<double>(out.data(), c, c.heads);
  f.lse = lse.data();
  posenc::llama::causal_attention_forward(f, 1);
  EXPECT_EQ(out, dense.out);
}

TEST(CausalAttention, RefusesBadShapes) {
  std::vector<float> buf(64), lse(8);
  AttentionForward<float> f;
  f.shape = {1, 2, 4, 3, 8};
  f.q = f.k = f.v = {buf.data(), 64, 32, 8};
  f.out = {buf.data(), 64, 32, 8};
  f.lse = lse.data();
  EXPECT_EQ(posenc::testing::error_of([&] { posenc::llama::causal_attention_forward(f, 1); }),
            "causal attention: kv_heads (3) must divide heads (4)");
  f.shape = {1, 0, 4, 2, 8};
  EXPECT_EQ(posenc::testing::error_of([&] { posenc::llama::causal_attention_forward(f, 1); }),
            "causal attention: seq (0) must be at least 1");
  f.shape = {1, 2, 4, 2, 8};
  EXPECT_EQ(posenc::testing::error_of([&] { posenc::llama::causal_attention_forward(f, 0); }),
            "causal attention: threads (0) must be in [1, 256]");
  f.lse = nullptr;
  EXPECT_EQ(posenc::testing::error_of([&] { posenc::llama::causal_attention_forward(f, 1); }),
            "causal attention: a tensor pointer is null");
}

}  // namespace
