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

// Register-blocked sweeps over a run of rows (keys or queries), C dims at a time: the C vectors
// of the tile stay in registers while the rows stream past. Both keep each sum in order of the
// head dim (Sweep) or of the rows (Accumulate), so blocking changes no bits.

// out[r] = (e0 > 0 ? out[r] : 0) + sum_{e in [e0, e0 + C)} tile[e] * (row_r[e] * mul), r in
// [0, rows): tile[e] at tile + e * n (n lanes), row_r at rows_at + r * stride.
template <int C, class D>
HWY_INLINE void Sweep(D d, const hn::TFromD<D>* tile, std::int64_t n, std::int64_t e0,
                      const hn::TFromD<D>* rows_at, std::int64_t stride, std::int64_t rows,
                      hn::TFromD<D> mul, hn::TFromD<D>* out) {
  hn::Vec<D> t[C];
  for (int c = 0; c < C; ++c) t[c] = hn::LoadU(d, tile + (e0 + c) * n);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto* row = rows_at + r * stride + e0;
    auto s = hn::Mul(t[0], hn::Set(d, row[0] * mul));
    if (e0 > 0) s = hn::Add(hn::LoadU(d, out + r * n), s);
    for (int c = 1; c < C; ++c) s = hn::Add(s, hn::Mul(t[c], hn::Set(d, row[c] * mul)));
    hn::StoreU(s, d, out + r * n);
  }
}

// acc[e] += sum_r w[r] * (row_r[e] * mul) in order of r, for e in [e0, e0 + C): acc[e] at
// acc + e * n, w[r] at w + r * n.
template <int C, class D>
HWY_INLINE void Accumulate(D d, const hn::TFromD<D>* w, std::int64_t n, std::int64_t e0,
                           const hn::TFromD<D>* rows_at, std::int64_t stride, std::int64_t rows,
                           hn::TFromD<D> mul, hn::TFromD<D>* acc) {
  hn::Vec<D> a[C];
  for (int c = 0; c < C; ++c) a[c] = hn::LoadU(d, acc + (e0 + c) * n);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto* row = rows_at + r * stride + e0;
    const auto wr = hn::LoadU(d, w + r * n);
    for (int c = 0; c < C; ++c) a[c] = hn::Add(a[c], hn::Mul(wr, hn::Set(d, row[c] * mul)));
  }
  for (int c = 0; c < C; ++c) hn::StoreU(a[c], d, acc + (e0 + c) * n);
}

constexpr std::int64_t kDims = 8;  // dims per sweep: 8 tile vectors + temporaries in registers

template <class D>
void SweepAll(D d, const hn::TFromD<D>* tile, std::int64_t n, std::int64_t hd,
              const hn::TFromD<D>* rows_at, std::int64_t stride, std::int64_t rows,
              hn::TFromD<D> mul, hn::TFromD<D>* out) {
  std::int64_t e = 0;
  for (; e + kDims <= hd; e += kDims) Sweep<kDims>(d, tile, n, e, rows_at, stride, rows, mul, out);
  for (; e < hd; ++e) Sweep<1>(d, tile, n, e, rows_at, stride, rows, mul, out);
}

template <class D>
void AccumulateAll(D d, const hn::TFromD<D>* w, std::int64_t n, std::int64_t hd,
                   const hn::TFromD<D>* rows_at, std::int64_t stride, std::int64_t rows,
                   hn::TFromD<D> mul, hn::TFromD<D>* acc) {
  std::int64_t e = 0;
  for (; e + kDims <= hd; e += kDims)
    Accumulate<kDims>(d, w, n, e, rows_at, stride, rows, mul, acc);
  for (; e < hd; ++e) Accumulate<1>(d, w, n, e, rows_at, stride, rows, mul, acc);
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
std::vector<T>& Sized(std::vector<T>& v, std::int64_t n) {
  v.resize(static_cast<std::size_t>(n));
  return v;
}

template <class T>
void ForwardTask(const AttentionForward<T>& a, std::int64_t b, std::int64_t h, std::int64_t i0) {
  const hn::ScalableTag<T> d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  const AttentionShape& sh = a.shape;
  const std::int64_t hd = sh.head_dim, g = h / (sh.heads / sh.kv_heads);
  const std::int64_t valid = std::min(n, sh.seq - i0), keys = i0 + valid;
  thread_local std::vector<T> qt, acc, scores, lanes;
  LoadTile(a.q, b, h, i0, valid, hd, n, a.scale, Sized(qt, hd * n).data());
  T* s = Sized(scores, keys * n).data();
  // The scores (scaled q times k), masked (-inf) past each lane's token, and their maximum.
  SweepAll(d, qt.data(), n, hd, At(a.k, b, 0, g), a.k.seq_stride, keys, T(1), s);
  const auto neg_inf = hn::Set(d, -std::numeric_limits<T>::infinity());
  const auto token = hn::Add(hn::Iota(d, 0), hn::Set(d, static_cast<T>(i0)));
  auto m = neg_inf;
  for (std::int64_t j = 0; j < keys; ++j) {
    auto v = hn::LoadU(d, s + j * n);
    if (j > i0) {
      v = hn::IfThenElse(hn::Lt(token, hn::Set(d, static_cast<T>(j))), neg_inf, v);
      hn::StoreU(v, d, s + j * n);
    }
    m = hn::Max(m, v);
  }
  // p_j = exp(s_j - max) and their sum, then sum_j p_j v_j in order of j.
  auto sum = hn::Zero(d);
  for (std::int64_t j = 0; j < keys; ++j) {
    const auto p = Weight(d, hn::Sub(hn::LoadU(d, s + j * n), m));
    sum = hn::Add(sum, p);
    hn::StoreU(p, d, s + j * n);
  }
  T* o = Sized(acc, hd * n).data();
  std::fill(acc.begin(), acc.end(), T(0));
  AccumulateAll(d, s, n, hd, At(a.v, b, 0, g), a.v.seq_stride, keys, T(1), o);
  T* ms = Sized(lanes, 2 * n).data();
  hn::StoreU(m, d, ms);
  hn::StoreU(sum, d, ms + n);
  for (std::int64_t l = 0; l < valid; ++l) {
    T* out = At(a.out, b, i0 + l, h);
    for (std::int64_t e = 0; e < hd; ++e) out[e] = o[e * n + l] / ms[n + l];
    a.lse[(b * sh.heads + h) * sh.seq + i0 + l] = ms[l] + std::log(ms[n + l]);
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
  thread_local std::vector<T> qt, dot, acc, s_buf, dp_buf, lanes;
  LoadTile(a.q, b, h, i0, valid, hd, n, a.scale, Sized(qt, hd * n).data());
  LoadTile(a.dout, b, h, i0, valid, hd, n, T(1), Sized(dot, hd * n).data());
  T* ld = Sized(lanes, 2 * n).data();
  const std::int64_t row = (b * sh.heads + h) * sh.seq + i0;
  for (std::int64_t l = 0; l < n; ++l) {
    ld[l] = a.lse[row + std::min(l, valid - 1)];
    ld[n + l] = delta[row + std::min(l, valid - 1)];
  }
  T* s = Sized(s_buf, keys * n).data();
  T* dp = Sized(dp_buf, keys * n).data();
  SweepAll(d, qt.data(), n, hd, At(a.k, b, 0, g), a.k.seq_stride, keys, T(1), s);
  SweepAll(d, dot.data(), n, hd, At(a.v, b, 0, g), a.v.seq_stride, keys, T(1), dp);
  const auto lse = hn::LoadU(d, ld);
  const auto dl = hn::LoadU(d, ld + n);
  for (std::int64_t j = 0; j < keys; ++j) {  // dS_ij, into s
    auto p = Weight(d, hn::Sub(hn::LoadU(d, s + j * n), lse));
    if (j > i0) p = ZeroWhere(d, p, i0, j, false);
    hn::StoreU(hn::Mul(p, hn::Sub(hn::LoadU(d, dp + j * n), dl)), d, s + j * n);
  }
  T* dq_t = Sized(acc, hd * n).data();
  std::fill(acc.begin(), acc.end(), T(0));
  AccumulateAll(d, s, n, hd, At(a.k, b, 0, g), a.k.seq_stride, keys, T(1), dq_t);
  for (std::int64_t l = 0; l < valid; ++l) {
    T* dq = At(a.dq, b, i0 + l, h);
    for (std::int64_t e = 0; e < hd; ++e) dq[e] = dq_t[e * n + l] * a.scale;
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
  const std::int64_t valid = std::min(n, sh.seq - j0), queries = sh.seq - j0;
  thread_local std::vector<T> kt, vt, dk, dv, s_buf, dp_buf;
  LoadTile(a.k, b, g, j0, valid, hd, n, T(1), Sized(kt, hd * n).data());
  LoadTile(a.v, b, g, j0, valid, hd, n, T(1), Sized(vt, hd * n).data());
  T* dk_t = Sized(dk, hd * n).data();
  T* dv_t = Sized(dv, hd * n).data();
  std::fill(dk.begin(), dk.end(), T(0));
  std::fill(dv.begin(), dv.end(), T(0));
  T* s = Sized(s_buf, queries * n).data();
  T* dp = Sized(dp_buf, queries * n).data();
  for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
    const T* lse = a.lse + (b * sh.heads + h) * sh.seq + j0;
    const T* dl = delta + (b * sh.heads + h) * sh.seq + j0;
    // The same scores as the forward pass's (q times scale, then times k, in order of e).
    SweepAll(d, kt.data(), n, hd, At(a.q, b, j0, h), a.q.seq_stride, queries, a.scale, s);
    SweepAll(d, vt.data(), n, hd, At(a.dout, b, j0, h), a.dout.seq_stride, queries, T(1), dp);
    for (std::int64_t r = 0; r < queries; ++r) {  // p into s, dS into dp
      auto p = Weight(d, hn::Sub(hn::LoadU(d, s + r * n), hn::Set(d, lse[r])));
      if (r < n - 1) p = ZeroWhere(d, p, j0, j0 + r, true);
      hn::StoreU(p, d, s + r * n);
      hn::StoreU(hn::Mul(p, hn::Sub(hn::LoadU(d, dp + r * n), hn::Set(d, dl[r]))), d, dp + r * n);
    }
    AccumulateAll(d, s, n, hd, At(a.dout, b, j0, h), a.dout.seq_stride, queries, T(1), dv_t);
    AccumulateAll(d, dp, n, hd, At(a.q, b, j0, h), a.q.seq_stride, queries, a.scale, dk_t);
  }
  for (std::int64_t l = 0; l < valid; ++l) {
    T* k = At(a.dk, b, j0 + l, g);
    T* v = At(a.dv, b, j0 + l, g);
    for (std::int64_t e = 0; e < hd; ++e) {
      k[e] = dk_t[e * n + l];
      v[e] = dv_t[e * n + l];
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
                                                    for (std::int64_t t = begin; t < end; ++t)
                                                      task(t);
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
              a.q.data && a.k.data && a.v.data && a.out.data && a.dout.data && a.lse && a.dq.data &&
                  a.dk.data && a.dv.data);
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
  return float64 ? HWY_DYNAMIC_DISPATCH(detail::TileF64)()
                 : HWY_DYNAMIC_DISPATCH(detail::TileF32)();
}

}  // namespace posenc::llama
#endif  // HWY_ONCE
