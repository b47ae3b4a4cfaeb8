// Fused causal attention, forward and backward (posenc/llama/attention.h), written once with
// Google Highway for every target and dispatched at run time (as llama/kernels.cc).
//
// Three kinds of task, each vectorised across independent outputs so that no sum runs across
// lanes: the forward pass and dq take a tile of queries (one per lane) and loop over keys; dk and
// dv take a tile of keys (one per lane) and loop over the group's heads and their queries. The
// scores s_ij are computed the same way in all three (q pre-multiplied by scale, then summed in
// order of the head dim with separate Mul and Add), so the backward pass's p_ij = exp(s_ij -
// lse_i) recomputes the forward pass's scores bit for bit.
// foreach_target.h re-includes this file once per target, so the order of these lines is
// Highway's, not alphabetical.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "llama/attention.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/core/threads.h"
#include "posenc/llama/attention.h"
#include "util/thread_pool.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::llama::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ln(2^-64): weights below it are 0 (attention.h).
template <class T>
constexpr T kMinLogWeight = static_cast<T>(-44.3614195558365);

template <class View>
auto At(const View& t, std::int64_t b, std::int64_t s, std::int64_t h) {
  return t.data + b * t.batch_stride + s * t.seq_stride + h * t.head_stride;
}

// p = exp(x) with x below the cut giving 0 (exp never sees an argument below it).
template <class D, class V>
HWY_INLINE V Weight(D d, V x) {
  using T = hn::TFromD<D>;
  const auto cut = hn::Set(d, kMinLogWeight<T>);
  return hn::IfThenZeroElse(hn::Lt(x, cut), hn::Exp(d, hn::Max(x, cut)));
}

// Zero the lanes whose token (first + lane) is before `j` (query lanes) or after `i` (key lanes).
template <class D, class V>
HWY_INLINE V ZeroWhere(D d, V v, std::int64_t lo_lane_token, std::int64_t bound, bool keys) {
  using T = hn::TFromD<D>;
  const auto token = hn::Add(hn::Iota(d, 0), hn::Set(d, static_cast<T>(lo_lane_token)));
  const auto b = hn::Set(d, static_cast<T>(bound));
  return keys ? hn::IfThenZeroElse(hn::Gt(token, b), v) : hn::IfThenZeroElse(hn::Lt(token, b), v);
}

// s = sum_e qt[e] * k[e] in order of e (qt: the tile's scaled queries, one vector per dim).
template <class D>
HWY_INLINE hn::Vec<D> Score(D d, const hn::TFromD<D>* qt, const hn::TFromD<D>* k, std::int64_t hd,
                            std::int64_t n) {
  auto s = hn::Mul(hn::LoadU(d, qt), hn::Set(d, k[0]));
  for (std::int64_t e = 1; e < hd; ++e) s = hn::Add(s, hn::Mul(hn::LoadU(d, qt + e * n), hn::Set(d, k[e])));
  return s;
}

// The tile's rows (token first + lane, the last valid one repeated in the padding lanes) of one
// head, transposed to one vector per dim and multiplied by `mul`.
template <class T>
void LoadTile(const HeadsView<const T>& t, std::int64_t b, std::int64_t h, std::int64_t first,
              std::int64_t valid, std::int64_t hd, std::int64_t n, T mul, T* out) {
  for (std::int64_t l = 0; l < n; ++l) {
    const T* row = At(t, b, first + std::min(l, valid - 1), h);
    for (std::int64_t e = 0; e < hd; ++e) out[e * n + l] = row[e] * mul;
  }
}

template <class T>
void ForwardTask(const AttentionForward<T>& a, std::int64_t b, std::int64_t h, std::int64_t i0) {
  const hn::ScalableTag<T> d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  const AttentionShape& sh = a.shape;
  const std::int64_t hd = sh.head_dim, g = h / (sh.heads / sh.kv_heads);
  const std::int64_t valid = std::min(n, sh.seq - i0), keys = i0 + valid;
  thread_local std::vector<T> qt, acc, scores;
  qt.resize(static_cast<std::size_t>(hd * n));
  acc.assign(static_cast<std::size_t>(hd * n), T(0));
  scores.resize(static_cast<std::size_t>(keys * n));
  LoadTile(a.q, b, h, i0, valid, hd, n, a.scale, qt.data());

  // Pass 1: the scores, masked (-inf) past each lane's token, and their maximum.
  const auto neg_inf = hn::Set(d, -std::numeric_limits<T>::infinity());
  auto m = neg_inf;
  for (std::int64_t j = 0; j < keys; ++j) {
    auto s = Score(d, qt.data(), At(a.k, b, j, g), hd, n);
    if (j > i0) {
      const auto token = hn::Add(hn::Iota(d, 0), hn::Set(d, static_cast<T>(i0)));
      s = hn::IfThenElse(hn::Lt(token, hn::Set(d, static_cast<T>(j))), neg_inf, s);
    }
    hn::StoreU(s, d, scores.data() + j * n);
    m = hn::Max(m, s);
  }
  // Pass 2: p_j = exp(s_j - max), their sum, and sum_j p_j v_j in order of j.
  auto sum = hn::Zero(d);
  for (std::int64_t j = 0; j < keys; ++j) {
    const auto p = Weight(d, hn::Sub(hn::LoadU(d, scores.data() + j * n), m));
    sum = hn::Add(sum, p);
    const T* v = At(a.v, b, j, g);
    for (std::int64_t e = 0; e < hd; ++e) {
      T* o = acc.data() + e * n;
      hn::StoreU(hn::Add(hn::LoadU(d, o), hn::Mul(p, hn::Set(d, v[e]))), d, o);
    }
  }
  thread_local std::vector<T> ms, sums;
  ms.resize(static_cast<std::size_t>(n));
  sums.resize(static_cast<std::size_t>(n));
  hn::StoreU(m, d, ms.data());
  hn::StoreU(sum, d, sums.data());
  for (std::int64_t l = 0; l < valid; ++l) {
    const auto ul = static_cast<std::size_t>(l);
    T* o = At(a.out, b, i0 + l, h);
    for (std::int64_t e = 0; e < hd; ++e) o[e] = acc[static_cast<std::size_t>(e * n + l)] / sums[ul];
    a.lse[(b * sh.heads + h) * sh.seq + i0 + l] = ms[ul] + std::log(sums[ul]);
  }
}

// D_i = dO_i . o_i for every (b, h, i), in order of the head dim; [batch, heads, seq].
template <class T>
void DeltaRows(const AttentionBackward<T>& a, std::int64_t b, std::int64_t h, T* delta) {
  for (std::int64_t i = 0; i < a.shape.seq; ++i) {
    const T* o = At(a.out, b, i, h);
    const T* dout = At(a.dout, b, i, h);
    T s = 0;
    for (std::int64_t e = 0; e < a.shape.head_dim; ++e) s += dout[e] * o[e];
    delta[(b * a.shape.heads + h) * a.shape.seq + i] = s;
  }
}

// dq for a tile of queries: sum_j dS_ij k_j, times scale.
template <class T>
void QueryTask(const AttentionBackward<T>& a, const T* delta, std::int64_t b, std::int64_t h,
               std::int64_t i0) {
  const hn::ScalableTag<T> d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  const AttentionShape& sh = a.shape;
  const std::int64_t hd = sh.head_dim, g = h / (sh.heads / sh.kv_heads);
  const std::int64_t valid = std::min(n, sh.seq - i0), keys = i0 + valid;
  thread_local std::vector<T> qt, dot, acc, lane_lse, lane_delta;
  qt.resize(static_cast<std::size_t>(hd * n));
  dot.resize(static_cast<std::size_t>(hd * n));
  acc.assign(static_cast<std::size_t>(hd * n), T(0));
  lane_lse.resize(static_cast<std::size_t>(n));
  lane_delta.resize(static_cast<std::size_t>(n));
  LoadTile(a.q, b, h, i0, valid, hd, n, a.scale, qt.data());
  LoadTile(a.dout, b, h, i0, valid, hd, n, T(1), dot.data());
  const std::int64_t row = (b * sh.heads + h) * sh.seq + i0;
  for (std::int64_t l = 0; l < n; ++l) {
    lane_lse[static_cast<std::size_t>(l)] = a.lse[row + std::min(l, valid - 1)];
    lane_delta[static_cast<std::size_t>(l)] = delta[row + std::min(l, valid - 1)];
  }
  const auto lse = hn::LoadU(d, lane_lse.data());
  const auto dl = hn::LoadU(d, lane_delta.data());
  for (std::int64_t j = 0; j < keys; ++j) {
    const T* k = At(a.k, b, j, g);
    auto p = Weight(d, hn::Sub(Score(d, qt.data(), k, hd, n), lse));
    if (j > i0) p = ZeroWhere(d, p, i0, j, false);
    const auto dp = Score(d, dot.data(), At(a.v, b, j, g), hd, n);
    const auto ds = hn::Mul(p, hn::Sub(dp, dl));
    for (std::int64_t e = 0; e < hd; ++e) {
      T* q = acc.data() + e * n;
      hn::StoreU(hn::Add(hn::LoadU(d, q), hn::Mul(ds, hn::Set(d, k[e]))), d, q);
    }
  }
  for (std::int64_t l = 0; l < valid; ++l) {
    T* dq = At(a.dq, b, i0 + l, h);
    for (std::int64_t e = 0; e < hd; ++e) dq[e] = acc[static_cast<std::size_t>(e * n + l)] * a.scale;
  }
}

// dk and dv for a tile of keys of kv head g: sums over the group's heads (in order), then over
// the queries i >= j (in order).
template <class T>
void KeyTask(const AttentionBackward<T>& a, const T* delta, std::int64_t b, std::int64_t g,
             std::int64_t j0) {
  const hn::ScalableTag<T> d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  const AttentionShape& sh = a.shape;
  const std::int64_t hd = sh.head_dim, group = sh.heads / sh.kv_heads;
  const std::int64_t valid = std::min(n, sh.seq - j0);
  thread_local std::vector<T> kt, vt, dk, dv, qs;
  kt.resize(static_cast<std::size_t>(hd * n));
  vt.resize(static_cast<std::size_t>(hd * n));
  dk.assign(static_cast<std::size_t>(hd * n), T(0));
  dv.assign(static_cast<std::size_t>(hd * n), T(0));
  qs.resize(static_cast<std::size_t>(hd));
  LoadTile(a.k, b, g, j0, valid, hd, n, T(1), kt.data());
  LoadTile(a.v, b, g, j0, valid, hd, n, T(1), vt.data());
  for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
    const T* lse = a.lse + (b * sh.heads + h) * sh.seq;
    const T* dl = delta + (b * sh.heads + h) * sh.seq;
    for (std::int64_t i = j0; i < sh.seq; ++i) {
      const T* q = At(a.q, b, i, h);
      const T* dout = At(a.dout, b, i, h);
      for (std::int64_t e = 0; e < hd; ++e) qs[static_cast<std::size_t>(e)] = q[e] * a.scale;
      // The same score as Score's (scaled q times k, in order of e), with the lanes the other way.
      auto s = hn::Mul(hn::Set(d, qs[0]), hn::LoadU(d, kt.data()));
      for (std::int64_t e = 1; e < hd; ++e)
        s = hn::Add(s, hn::Mul(hn::Set(d, qs[static_cast<std::size_t>(e)]), hn::LoadU(d, kt.data() + e * n)));
      auto p = Weight(d, hn::Sub(s, hn::Set(d, lse[i])));
      if (i < j0 + n - 1) p = ZeroWhere(d, p, j0, i, true);
      auto dp = hn::Mul(hn::Set(d, dout[0]), hn::LoadU(d, vt.data()));
      for (std::int64_t e = 1; e < hd; ++e)
        dp = hn::Add(dp, hn::Mul(hn::Set(d, dout[e]), hn::LoadU(d, vt.data() + e * n)));
      const auto ds = hn::Mul(p, hn::Sub(dp, hn::Set(d, dl[i])));
      for (std::int64_t e = 0; e < hd; ++e) {
        T* kp = dk.data() + e * n;
        T* vp = dv.data() + e * n;
        hn::StoreU(hn::Add(hn::LoadU(d, kp), hn::Mul(ds, hn::Set(d, qs[static_cast<std::size_t>(e)]))), d, kp);
        hn::StoreU(hn::Add(hn::LoadU(d, vp), hn::Mul(p, hn::Set(d, dout[e]))), d, vp);
      }
    }
  }
  for (std::int64_t l = 0; l < valid; ++l) {
    T* k = At(a.dk, b, j0 + l, g);
    T* v = At(a.dv, b, j0 + l, g);
    for (std::int64_t e = 0; e < hd; ++e) {
      k[e] = dk[static_cast<std::size_t>(e * n + l)];
      v[e] = dv[static_cast<std::size_t>(e * n + l)];
    }
  }
}

template <class T>
std::int64_t Lanes() {
  return static_cast<std::int64_t>(hn::Lanes(hn::ScalableTag<T>()));
}

void Run(int threads, std::int64_t tasks, const std::function<void(std::int64_t)>& task) {
  posenc::detail::ThreadPool::shared(threads).run(threads, tasks,
                                                   [&](std::int64_t begin, std::int64_t end) {
                                                     for (std::int64_t t = begin; t < end; ++t) task(t);
                                                   });
}

template <class T>
void Forward(const AttentionForward<T>& a, int threads) {
  const AttentionShape& sh = a.shape;
  const std::int64_t n = Lanes<T>(), tiles = (sh.seq + n - 1) / n;
  Run(threads, sh.batch * sh.heads * tiles, [&](std::int64_t t) {
    const std::int64_t bh = t / tiles;
    ForwardTask(a, bh / sh.heads, bh % sh.heads, (t % tiles) * n);
  });
}

template <class T>
void Backward(const AttentionBackward<T>& a, int threads) {
  const AttentionShape& sh = a.shape;
  const std::int64_t n = Lanes<T>(), tiles = (sh.seq + n - 1) / n;
  std::vector<T> delta(static_cast<std::size_t>(sh.batch * sh.heads * sh.seq));
  Run(threads, sh.batch * sh.heads,
      [&](std::int64_t t) { DeltaRows(a, t / sh.heads, t % sh.heads, delta.data()); });
  Run(threads, sh.batch * sh.heads * tiles, [&](std::int64_t t) {
    const std::int64_t bh = t / tiles;
    QueryTask(a, delta.data(), bh / sh.heads, bh % sh.heads, (t % tiles) * n);
  });
  Run(threads, sh.batch * sh.kv_heads * tiles, [&](std::int64_t t) {
    const std::int64_t bg = t / tiles;
    KeyTask(a, delta.data(), bg / sh.kv_heads, bg % sh.kv_heads, (t % tiles) * n);
  });
}

void ForwardF32(const AttentionForward<float>& a, int threads) { Forward(a, threads); }
void ForwardF64(const AttentionForward<double>& a, int threads) { Forward(a, threads); }
void BackwardF32(const AttentionBackward<float>& a, int threads) { Backward(a, threads); }
void BackwardF64(const AttentionBackward<double>& a, int threads) { Backward(a, threads); }
std::int64_t TileF32() { return Lanes<float>(); }
std::int64_t TileF64() { return Lanes<double>(); }

}  // namespace HWY_NAMESPACE
}  // namespace posenc::llama::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::llama {
namespace detail {
HWY_EXPORT(ForwardF32);
HWY_EXPORT(ForwardF64);
HWY_EXPORT(BackwardF32);
HWY_EXPORT(BackwardF64);
HWY_EXPORT(TileF32);
HWY_EXPORT(TileF64);
}  // namespace detail
namespace {

void check_shape(const AttentionShape& s, int threads, bool pointers_ok) {
  const std::pair<const char*, std::int64_t> dims[] = {{"batch", s.batch},
                                                       {"seq", s.seq},
                                                       {"heads", s.heads},
                                                       {"kv_heads", s.kv_heads},
                                                       {"head_dim", s.head_dim}};
  for (const auto& [name, v] : dims) {
    if (v < 1) {
      throw Error(std::string("causal attention: ") + name + " (" + std::to_string(v) +
                  ") must be at least 1");
    }
  }
  if (s.heads % s.kv_heads != 0) {
    throw Error("causal attention: kv_heads (" + std::to_string(s.kv_heads) +
                ") must divide heads (" + std::to_string(s.heads) + ")");
  }
  if (!pointers_ok) throw Error("causal attention: a tensor pointer is null");
  check_threads(threads, "causal attention");
}

template <class T>
void forward_impl(const AttentionForward<T>& a, int threads) {
  check_shape(a.shape, threads, a.q.data && a.k.data && a.v.data && a.out.data && a.lse);
  if constexpr (sizeof(T) == 4) {
    HWY_DYNAMIC_DISPATCH(detail::ForwardF32)(a, run_threads(threads));
  } else {
    HWY_DYNAMIC_DISPATCH(detail::ForwardF64)(a, run_threads(threads));
  }
}

template <class T>
void backward_impl(const AttentionBackward<T>& a, int threads) {
  check_shape(a.shape, threads,
              a.q.data && a.k.data && a.v.data && a.out.data && a.dout.data && a.lse &&
                  a.dq.data && a.dk.data && a.dv.data);
  if constexpr (sizeof(T) == 4) {
    HWY_DYNAMIC_DISPATCH(detail::BackwardF32)(a, run_threads(threads));
  } else {
    HWY_DYNAMIC_DISPATCH(detail::BackwardF64)(a, run_threads(threads));
  }
}

}  // namespace

void causal_attention_forward(const AttentionForward<float>& a, int threads) {
  forward_impl(a, threads);
}
void causal_attention_forward(const AttentionForward<double>& a, int threads) {
  forward_impl(a, threads);
}
void causal_attention_backward(const AttentionBackward<float>& a, int threads) {
  backward_impl(a, threads);
}
void causal_attention_backward(const AttentionBackward<double>& a, int threads) {
  backward_impl(a, threads);
}
std::int64_t causal_attention_tile(bool float64) {
  return float64 ? HWY_DYNAMIC_DISPATCH(detail::TileF64)() : HWY_DYNAMIC_DISPATCH(detail::TileF32)();
}

}  // namespace posenc::llama
#endif  // HWY_ONCE
