// The Llama forward pass's SIMD kernels, written once with Google Highway for every target and
// dispatched at run time (as rope/kernels/rotate.cc).
//
// Vectorised across independent outputs only (matmul across output columns), so each output
// element is a plain left-to-right sum whose operations do not depend on the vector width nor on
// how the caller splits the work; separate Mul and Add (never MulAdd) keep every target's sums the
// same. Tails run the body's code on a one-lane tag (matmul) or on a padded full vector (silu,
// log-sum-exp). Attention is in cache_attention.cc. The exception is the keys' re-rotation,
// which must give rerotate_keys' bits, so it runs apply_rope's own arithmetic (rotate-inl.h:
// MulAdd, fused where the target has FMA).
// foreach_target.h re-includes this file once per target, so the order of these lines is
// Highway's, not alphabetical.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "llama/kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "llama/kernels.h"
#include "posenc/rope/table.h"
#include "rope/cos_sin_fast.h"
#include "rope/kernels/rotate-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::llama::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;

template <class DT, class V>
HWY_INLINE void Put(DT d, V v, float* p, bool accumulate) {
  hn::StoreU(accumulate ? hn::Add(hn::LoadU(d, p), v) : v, d, p);
}

// Four rows, two column vectors: eight independent sums hide the latency of Add.
HWY_INLINE void MatMul4x2(const MatMulArgs& a, const float* x, float* out, std::int64_t j) {
  const D d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  const float* x0 = x;
  const float* x1 = x + a.x_stride;
  const float* x2 = x + 2 * a.x_stride;
  const float* x3 = x + 3 * a.x_stride;
  auto c00 = hn::Zero(d), c01 = hn::Zero(d), c10 = hn::Zero(d), c11 = hn::Zero(d);
  auto c20 = hn::Zero(d), c21 = hn::Zero(d), c30 = hn::Zero(d), c31 = hn::Zero(d);
  const float* w = a.w + j;
  for (std::int64_t k = 0; k < a.depth; ++k, w += a.cols) {
    const auto w0 = hn::LoadU(d, w);
    const auto w1 = hn::LoadU(d, w + n);
    const auto v0 = hn::Set(d, x0[k]), v1 = hn::Set(d, x1[k]), v2 = hn::Set(d, x2[k]),
               v3 = hn::Set(d, x3[k]);
    c00 = hn::Add(c00, hn::Mul(v0, w0));
    c01 = hn::Add(c01, hn::Mul(v0, w1));
    c10 = hn::Add(c10, hn::Mul(v1, w0));
    c11 = hn::Add(c11, hn::Mul(v1, w1));
    c20 = hn::Add(c20, hn::Mul(v2, w0));
    c21 = hn::Add(c21, hn::Mul(v2, w1));
    c30 = hn::Add(c30, hn::Mul(v3, w0));
    c31 = hn::Add(c31, hn::Mul(v3, w1));
  }
  const std::int64_t os = a.out_stride;
  Put(d, c00, out + j, a.accumulate);
  Put(d, c01, out + j + n, a.accumulate);
  Put(d, c10, out + os + j, a.accumulate);
  Put(d, c11, out + os + j + n, a.accumulate);
  Put(d, c20, out + 2 * os + j, a.accumulate);
  Put(d, c21, out + 2 * os + j + n, a.accumulate);
  Put(d, c30, out + 3 * os + j, a.accumulate);
  Put(d, c31, out + 3 * os + j + n, a.accumulate);
}

// One row, one vector of columns; on a one-lane tag, the columns past the last full vector.
template <class DT>
HWY_INLINE void MatMul1x1(DT d, const MatMulArgs& a, const float* x, float* out, std::int64_t j) {
  auto c = hn::Zero(d);
  const float* w = a.w + j;
  for (std::int64_t k = 0; k < a.depth; ++k, w += a.cols)
    c = hn::Add(c, hn::Mul(hn::Set(d, x[k]), hn::LoadU(d, w)));
  Put(d, c, out + j, a.accumulate);
}

void MatMul(const MatMulArgs& a) {
  const D d;
  const hn::CappedTag<float, 1> d1;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t t = 0;
  for (; t + 4 <= a.rows; t += 4) {
    const float* x = a.x + t * a.x_stride;
    float* out = a.out + t * a.out_stride;
    std::int64_t j = 0;
    for (; j + 2 * n <= a.cols; j += 2 * n) MatMul4x2(a, x, out, j);
    for (; j + n <= a.cols; j += n) {
      for (std::int64_t r = 0; r < 4; ++r)
        MatMul1x1(d, a, x + r * a.x_stride, out + r * a.out_stride, j);
    }
    for (; j < a.cols; ++j) {
      for (std::int64_t r = 0; r < 4; ++r)
        MatMul1x1(d1, a, x + r * a.x_stride, out + r * a.out_stride, j);
    }
  }
  for (; t < a.rows; ++t) {
    const float* x = a.x + t * a.x_stride;
    float* out = a.out + t * a.out_stride;
    std::int64_t j = 0;
    for (; j + n <= a.cols; j += n) MatMul1x1(d, a, x, out, j);
    for (; j < a.cols; ++j) MatMul1x1(d1, a, x, out, j);
  }
}

// silu(g) u = g u / (1 + exp(-g)); exp's argument is capped at 88 (exp(88) < FLT_MAX), where
// the sigmoid is already below 1e-38.
template <class V>
HWY_INLINE V SiluMul(D d, V g, V u) {
  const auto e = hn::Exp(d, hn::Min(hn::Neg(g), hn::Set(d, 88.0f)));
  return hn::Mul(hn::Div(g, hn::Add(hn::Set(d, 1.0f), e)), u);
}

void SiluMulKernel(float* gate, const float* up, std::int64_t count) {
  const D d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + n <= count; i += n)
    hn::StoreU(SiluMul(d, hn::LoadU(d, gate + i), hn::LoadU(d, up + i)), d, gate + i);
  if (i < count) {  // the tail through a full vector, so every element gets the same operations
    thread_local std::vector<float> g, u;
    g.assign(static_cast<std::size_t>(n), 0.0f);
    u.assign(static_cast<std::size_t>(n), 0.0f);
    std::copy(gate + i, gate + count, g.begin());
    std::copy(up + i, up + count, u.begin());
    hn::StoreU(SiluMul(d, hn::LoadU(d, g.data()), hn::LoadU(d, u.data())), d, g.data());
    std::copy(g.begin(), g.begin() + (count - i), gate + i);
  }
}

double LogSumExp(const float* x, std::int64_t count) {
  const D d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  float mx = x[0];
  for (std::int64_t i = 1; i < count; ++i) mx = std::max(mx, x[i]);
  const auto vm = hn::Set(d, mx);
  auto sum = hn::Zero(d);
  std::int64_t i = 0;
  for (; i + n <= count; i += n) sum = hn::Add(sum, hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vm)));
  if (i < count) {
    thread_local std::vector<float> tail;
    tail.assign(static_cast<std::size_t>(n),
                -std::numeric_limits<float>::infinity());  // exp gives 0
    std::copy(x + i, x + count, tail.begin());
    sum = hn::Add(sum, hn::Exp(d, hn::Sub(hn::LoadU(d, tail.data()), vm)));
  }
  return std::log(static_cast<double>(hn::GetLane(hn::SumOfLanes(d, sum)))) +
         static_cast<double>(mx);
}

// Interleaved pairs of x[0, count) with rows c2, s2 of as many entries: whole vectors, then the
// tail pair by pair on one-lane vectors (as rotate.cc's RotateInterleaved), every element through
// InterleavedMath's two operations.
HWY_INLINE void RerotateSpan(float* x, const float* c2, const float* s2, std::int64_t count) {
  std::int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR  // one lane holds no pair to swap: the tail loop does it all
  const D d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  for (; i + n <= count; i += n) {
    const auto v = hn::LoadU(d, x + i);
    hn::StoreU(posenc::detail::HWY_NAMESPACE::InterleavedMath(
                   d, v, hn::Shuffle2301(v), hn::LoadU(d, c2 + i), hn::LoadU(d, s2 + i)),
               d, x + i);
  }
#endif
  const hn::CappedTag<float, 1> d1;
  for (; i < count; i += 2) {
    const auto a = hn::LoadU(d1, x + i), b = hn::LoadU(d1, x + i + 1);
    hn::StoreU(posenc::detail::HWY_NAMESPACE::InterleavedMath(d1, a, b, hn::LoadU(d1, c2 + i),
                                                              hn::LoadU(d1, s2 + i)),
               d1, x + i);
    hn::StoreU(posenc::detail::HWY_NAMESPACE::InterleavedMath(d1, b, a, hn::LoadU(d1, c2 + i + 1),
                                                              hn::LoadU(d1, s2 + i + 1)),
               d1, x + i + 1);
  }
}

#if HWY_TARGET != HWY_SCALAR
// One key row of kv floats, whole vectors, with the row's c2, s2 repeated across a vector.
HWY_INLINE void RerotateRepeated(D d, float* x, std::int64_t kv, hn::Vec<D> vc, hn::Vec<D> vs) {
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t j = 0; j < kv; j += n) {
    const auto v = hn::LoadU(d, x + j);
    hn::StoreU(posenc::detail::HWY_NAMESPACE::InterleavedMath(d, v, hn::Shuffle2301(v), vc, vs), d,
               x + j);
  }
}
#endif

void RerotateRowsKernel(const RerotateArgs& a) {
#if HWY_TARGET != HWY_SCALAR
  // Heads narrower than a vector (head_dim 8 on AVX3's 16 lanes) would all be one-lane tails:
  // the row is repeated across a vector instead, which then rotates lanes / width heads at once.
  const D d;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(d)), kv = a.heads * a.width;
  constexpr std::int64_t kMaxLanes = 64;  // 2048-bit SVE
  if (n > a.width && n <= kMaxLanes && n % a.width == 0 && kv % n == 0) {
    std::int64_t r = 0;
    if (2 * a.width == n) {  // two rows a load: each half repeated by ConcatLowerLower / UpperUpper
      for (; r + 2 <= a.rows; r += 2) {
        const auto c = hn::LoadU(d, a.c2 + r * a.width), s = hn::LoadU(d, a.s2 + r * a.width);
        RerotateRepeated(d, a.x + r * a.x_stride, kv, hn::ConcatLowerLower(d, c, c),
                         hn::ConcatLowerLower(d, s, s));
        RerotateRepeated(d, a.x + (r + 1) * a.x_stride, kv, hn::ConcatUpperUpper(d, c, c),
                         hn::ConcatUpperUpper(d, s, s));
      }
    }
    HWY_ALIGN float c[kMaxLanes], s[kMaxLanes];
    for (; r < a.rows; ++r) {
      for (std::int64_t j = 0; j < n; ++j) {
        c[j] = a.c2[r * a.width + j % a.width];
        s[j] = a.s2[r * a.width + j % a.width];
      }
      RerotateRepeated(d, a.x + r * a.x_stride, kv, hn::Load(d, c), hn::Load(d, s));
    }
    return;
  }
#endif
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int64_t h = 0; h < a.heads; ++h)
      RerotateSpan(a.x + r * a.x_stride + h * a.width, a.c2 + r * a.width, a.s2 + r * a.width,
                   a.width);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::llama::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::llama::detail {

HWY_EXPORT(MatMul);
HWY_EXPORT(SiluMulKernel);
HWY_EXPORT(LogSumExp);
HWY_EXPORT(RerotateRowsKernel);

void matmul(const MatMulArgs& args) { HWY_DYNAMIC_DISPATCH(MatMul)(args); }
void silu_mul(float* gate, const float* up, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMulKernel)(gate, up, n);
}
double log_sum_exp(const float* x, std::int64_t n) { return HWY_DYNAMIC_DISPATCH(LogSumExp)(x, n); }
void rerotate_rows(const RerotateArgs& args) { HWY_DYNAMIC_DISPATCH(RerotateRowsKernel)(args); }

bool Rerotation::applies(const Frequencies& from, const Frequencies& to) {
  const auto whole_head = [](const RopeSpec& s) {
    return s.layout == Layout::kInterleaved && s.rotary_offset == 0 && s.rotary_dim == s.head_dim &&
           axis_count(s) == 1;
  };
  return from.numerics == Numerics::kPrecise && to.numerics == Numerics::kPrecise &&
         whole_head(from.spec) && whole_head(to.spec) && from.spec.head_dim == to.spec.head_dim &&
         from.pair_count() == to.pair_count() && 2 * from.pair_count() == from.spec.head_dim;
}

// The frequencies rerotate_keys makes its precise rows from (src/rope/apply.cc): w_to - w_from,
// attention factor af_to / af_from.
Rerotation::Rerotation(const Frequencies& from, const Frequencies& to) : delta_(to) {
  for (std::size_t i = 0; i < delta_.inv_freq.size(); ++i)
    delta_.inv_freq[i] = to.inv_freq[i] - from.inv_freq[i];
  delta_.attention_factor = to.attention_factor / from.attention_factor;
}

void Rerotation::rows(std::int64_t p0, std::int64_t p1, float* c2, float* s2) const {
  const std::int64_t n = delta_.pair_count();
  std::vector<float> c(static_cast<std::size_t>(n)), s(c.size());
  // As rerotate_keys' rows (rope_rows.cc, CosSinRows): stepped where the stepper applies, else
  // cos_sin_row_f32; the same bits either way.
  std::optional<posenc::detail::CosSinStepper> stepper;
  if (posenc::detail::CosSinStepper::applies(delta_)) stepper.emplace(delta_);
  for (std::int64_t p = p0; p < p1; ++p) {
    if (stepper) {
      stepper->row(std::span<const std::int64_t>(&p, 1), c.data(), s.data());
    } else {
      cos_sin_row_f32(delta_, p, c, s);
    }
    float* cr = c2 + (p - p0) * 2 * n;
    float* sr = s2 + (p - p0) * 2 * n;
    for (std::int64_t i = 0; i < n; ++i) {
      cr[2 * i] = cr[2 * i + 1] = c[static_cast<std::size_t>(i)];
      sr[2 * i] = -s[static_cast<std::size_t>(i)];
      sr[2 * i + 1] = s[static_cast<std::size_t>(i)];
    }
  }
}

}  // namespace posenc::llama::detail
#endif  // HWY_ONCE
