// verify_claims: every claim of the seed document (docs/design.md §7) as a measurement.
#include "posenc/analysis/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/sinusoidal.h"
#include "util/format.h"

namespace posenc {
namespace {

using detail::num;
using Matrix = std::vector<double>;  // row-major

double distance(const double* a, const double* b, std::size_t d) {
  double s = 0;
  for (std::size_t j = 0; j < d; ++j) s += (a[j] - b[j]) * (a[j] - b[j]);
  return std::sqrt(s);
}

double dot(const double* a, const double* b, std::size_t d) {
  double s = 0;
  for (std::size_t j = 0; j < d; ++j) s += a[j] * b[j];
  return s;
}

// Single-head attention softmax(Q K^T / sqrt(d)) V with Q = X Wq, K = X Wk, V = X Wv.
Matrix attention(const Matrix& x, const Matrix& wq, const Matrix& wk, const Matrix& wv,
                 std::size_t n, std::size_t d) {
  auto mul = [&](const Matrix& a, const Matrix& w) {
    Matrix out(n * d, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k)
        for (std::size_t j = 0; j < d; ++j) out[i * d + j] += a[i * d + k] * w[k * d + j];
    return out;
  };
  const Matrix q = mul(x, wq), k = mul(x, wk), v = mul(x, wv);
  Matrix out(n * d, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> logits(n);
    for (std::size_t j = 0; j < n; ++j)
      logits[j] = dot(&q[i * d], &k[j * d], d) / std::sqrt(static_cast<double>(d));
    const double m = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (double& l : logits) z += (l = std::exp(l - m));
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t c = 0; c < d; ++c) out[i * d + c] += logits[j] / z * v[j * d + c];
  }
  return out;
}

// Rotates x (D = x.size(), half-split) by the precise angles of `f` at `position`.
std::vector<double> rotate(const Frequencies& f, std::int64_t position,
                           const std::vector<double>& x) {
  const std::size_t n = x.size() / 2;
  std::vector<double> c(n), s(n), y(x.size());
  cos_sin_at(f, position, c, s);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = x[i] * c[i] - x[i + n] * s[i];
    y[i + n] = x[i + n] * c[i] + x[i] * s[i];
  }
  return y;
}

class Verifier {
 public:
  explicit Verifier(const VerifyOptions& o)
      : o_(o),
        spec_{o.d_model, kDefaultRopeTheta, SinusoidalLayout::kInterleaved},
        d_(static_cast<std::size_t>(o.d_model)),
        n_(static_cast<std::size_t>(o.positions)),
        table_(sinusoidal_table(spec_, o.positions)),
        rng_(o.seed) {}

  std::vector<ClaimResult> run() {
    unique_codes();
    distance_invariance();
    bounded();
    deterministic();
    generalisation();
    wavelengths();
    shift_matrix();
    attention_order();
    rope_relative();
    scaling_methods();
    constant_dims();
    high_frequency_energy();
    relative_offset_in_practice();
    return std::move(results_);
  }

 private:
  const double* row(std::size_t p) const { return &table_[p * d_]; }

  void add(std::string id, std::string claim, std::string measured, double value, bool pass,
           bool question = false) {
    results_.push_back(
        {std::move(id), std::move(claim), std::move(measured), value, pass, question});
  }

  void unique_codes() {
    double best = INFINITY;
    std::size_t a = 0, b = 0;
    for (std::size_t p = 0; p < n_; ++p)
      for (std::size_t q = p + 1; q < n_; ++q) {
        const double dist = distance(row(p), row(q), d_);
        if (dist < best) best = dist, a = p, b = q;
      }
    add("unique-codes", "each position gets a unique code",
        "smallest distance between two of " + std::to_string(n_) +
            " positions: " + detail::sig(best, 3) + " (positions " + std::to_string(a) + " and " +
            std::to_string(b) + ")",
        best, best > 1e-6);
  }

  void distance_invariance() {
    double worst = 0;
    for (std::size_t k : {std::size_t{1}, std::size_t{2}, std::size_t{10}, std::size_t{100}}) {
      if (k >= n_) continue;
      const double ref = distance(row(k), row(0), d_);
      for (std::size_t p = 0; p + k < n_; ++p)
        worst = std::max(worst, std::abs(distance(row(p + k), row(p), d_) - ref));
    }
    // The encoding of a position does not depend on how long the sequence is: a table twice as
    // long starts with the same rows, bit for bit.
    const std::vector<double> longer = sinusoidal_table(spec_, o_.positions * 2);
    const bool same = std::equal(table_.begin(), table_.end(), longer.begin());
    add("distance-invariance",
        "the distance between positions p and p + k does not depend on p or on the sequence length",
        "largest |dist(p, p+k) - dist(0, k)| over p, k in {1, 2, 10, 100}: " +
            detail::sig(worst, 3) + "; rows of a " + std::to_string(2 * n_) + "-position table " +
            (same ? "equal" : "differ from") + " the " + std::to_string(n_) +
            "-position table bit for bit",
        worst, worst < 1e-9 && same);
  }

  void bounded() {
    double m = 0;
    for (double v : table_) m = std::max(m, std::abs(v));
    add("bounded", "values are bounded (|PE| <= 1)", "largest |PE| over the table: " + num(m), m,
        m <= 1.0);
  }

  void deterministic() {
    const std::vector<double> again = sinusoidal_table(spec_, o_.positions);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < table_.size(); ++i)
      differ += std::memcmp(&table_[i], &again[i], sizeof(double)) != 0;
    add("deterministic", "the encoding is deterministic",
        "two computations of the table differ in " + std::to_string(differ) + " of " +
            std::to_string(table_.size()) + " values",
        static_cast<double>(differ), differ == 0);
  }

  void generalisation() {
    // Positions never seen (N .. 10N): still bounded, still distinct from every seen position,
    // and reached from the last seen one by the same linear map T(delta).
    double min_dist = INFINITY, max_abs = 0, shift_err = 0;
    std::vector<double> fresh(d_), shifted(d_);
    const std::vector<double> last(row(n_ - 1), row(n_ - 1) + d_);
    for (std::int64_t p = o_.positions; p < 10 * o_.positions; p += 7) {
      sinusoidal_row(spec_, p, fresh);
      for (double v : fresh) max_abs = std::max(max_abs, std::abs(v));
      for (std::size_t q = 0; q < n_; q += 3)
        min_dist = std::min(min_dist, distance(fresh.data(), row(q), d_));
      if ((p - o_.positions) % 301 == 0) {
        const std::vector<double> t = sinusoidal_shift_matrix(spec_, p - (o_.positions - 1));
        for (std::size_t i = 0; i < d_; ++i) shifted[i] = dot(&t[i * d_], last.data(), d_);
        for (std::size_t i = 0; i < d_; ++i)
          shift_err = std::max(shift_err, std::abs(shifted[i] - fresh[i]));
      }
    }
    add("generalisation", "the encoding extends to positions longer than any seen",
        "positions " + std::to_string(n_) + ".." + std::to_string(10 * n_) + ": largest |PE| " +
            num(max_abs) + ", smallest distance to a seen position " + detail::sig(min_dist, 3) +
            ", largest error of T(delta) from the last seen position " + detail::sig(shift_err, 3),
        min_dist, max_abs <= 1.0 && min_dist > 1e-6 && shift_err < 1e-9);
  }

  void wavelengths() {
    const std::vector<double> w = sinusoidal_frequencies(spec_);
    const double two_pi = 2 * std::numbers::pi;
    const double first = two_pi / w.front(), last = two_pi / w.back();
    const double step = std::pow(kDefaultRopeTheta, 2.0 / static_cast<double>(d_));
    double worst = 0;
    for (std::size_t k = 0; k + 1 < w.size(); ++k)
      worst = std::max(worst, std::abs(w[k] / w[k + 1] / step - 1));
    const double expected_last =
        two_pi * std::pow(kDefaultRopeTheta, static_cast<double>(d_ - 2) / static_cast<double>(d_));
    const bool geometric = worst < 1e-12 && std::abs(first / two_pi - 1) < 1e-15 &&
                           std::abs(last / expected_last - 1) < 1e-12 &&
                           last < kDefaultRopeTheta * two_pi;
    add("wavelength-range",
        "wavelengths form a geometric progression from 2π towards 10000·2π (the seed writes "
        "1000·2π)",
        "from " + num(first) + " (2π) to " + detail::sig(last, 3) + " = 2π·" +
            detail::sig(last / two_pi, 3) + " = 2π·10000^((d-2)/d); ratio " + num(step) +
            " per pair (largest deviation " + detail::sig(worst, 3) +
            "); the seed's 1000·2π is wrong by a factor " + detail::sig(last / (1000 * two_pi), 3) +
            ": the limit is 10000·2π",
        last, geometric);
  }

  void shift_matrix() {
    double worst = 0;
    std::vector<double> target(d_);
    for (std::int64_t delta :
         {std::int64_t{-100}, std::int64_t{-1}, std::int64_t{1}, std::int64_t{7}, std::int64_t{100},
          std::int64_t{1000}, o_.positions, std::int64_t{100000}}) {
      const std::vector<double> t = sinusoidal_shift_matrix(spec_, delta);
      for (std::size_t p = 0; p < n_; p += 17) {
        sinusoidal_row(spec_, static_cast<std::int64_t>(p) + delta, target);
        for (std::size_t i = 0; i < d_; ++i)
          worst = std::max(worst, std::abs(dot(&t[i * d_], row(p), d_) - target[i]));
      }
    }
    add("shift-matrix", "PE(p + Δ) = T(Δ)·PE(p) with T(Δ) independent of p",
        "largest |PE(p+Δ) - T(Δ)PE(p)| over p in [0, N) and Δ in {-100, -1, 1, 7, 100, 1000, N, "
        "100000}: " +
            detail::sig(worst, 3),
        worst, worst < 1e-9);
  }

  void attention_order() {
    const std::size_t n = 16, d = 64;
    std::normal_distribution<double> g(0.0, 1.0);
    auto random = [&](std::size_t count, double scale) {
      Matrix m(count);
      for (double& v : m) v = g(rng_) * scale;
      return m;
    };
    const Matrix x = random(n * d, 1.0);
    const Matrix wq = random(d * d, 1 / std::sqrt(double(d))),
                 wk = random(d * d, 1 / std::sqrt(double(d))),
                 wv = random(d * d, 1 / std::sqrt(double(d)));
    std::vector<std::size_t> perm(n);
    for (std::size_t i = 0; i < n; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng_);
    auto permute = [&](const Matrix& m) {
      Matrix out(m.size());
      for (std::size_t i = 0; i < n; ++i) std::copy_n(&m[perm[i] * d], d, &out[i * d]);
      return out;
    };
    auto max_diff = [](const Matrix& a, const Matrix& b) {
      double m = 0;
      for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
      return m;
    };
    const double plain =
        max_diff(attention(permute(x), wq, wk, wv, n, d), permute(attention(x, wq, wk, wv, n, d)));
    const SinusoidalSpec pe_spec{static_cast<std::int64_t>(d), kDefaultRopeTheta,
                                 SinusoidalLayout::kInterleaved};
    const std::vector<double> pe = sinusoidal_table(pe_spec, static_cast<std::int64_t>(n));
    auto with_pe = [&](Matrix m) {
      for (std::size_t i = 0; i < m.size(); ++i) m[i] += pe[i];
      return m;
    };
    const double encoded = max_diff(attention(with_pe(permute(x)), wq, wk, wv, n, d),
                                    permute(attention(with_pe(x), wq, wk, wv, n, d)));
    add("attention-blind-to-order",
        "without an encoding, permuting the input rows only permutes attention's output rows",
        "largest |Attn(PX) - P·Attn(X)| on random X, W (16 tokens, d 64): " + detail::sig(plain, 3),
        plain, plain < 1e-12);
    add("encoding-breaks-symmetry", "with the encoding added, attention sees the order",
        "largest |Attn(PX + E) - P·Attn(X + E)|: " + detail::sig(encoded, 3), encoded,
        encoded > 1e-3);
  }

  RopeSpec llama2(Method method) const {
    RopeSpec s;
    s.method = method;
    s.head_dim = s.rotary_dim = 128;
    s.factor = 16;
    s.original_max_position_embeddings = 4096;
    s.max_position_embeddings = method == Method::kDynamic ? 4096 : 65536;
    return s;
  }

  void rope_relative() {
    const Frequencies f = compute_frequencies(llama2(Method::kNone));
    std::normal_distribution<double> g(0.0, 1.0);
    std::uniform_int_distribution<std::int64_t> pos(0, 1 << 20);
    double worst = 0, scale = 0;
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<double> q(128), k(128);
      for (double& v : q) v = g(rng_);
      for (double& v : k) v = g(rng_);
      const std::int64_t m = pos(rng_), n = pos(rng_), shift = pos(rng_);
      const auto qm = rotate(f, m, q), kn = rotate(f, n, k);
      const auto qs = rotate(f, m + shift, q), ks = rotate(f, n + shift, k);
      const double a = dot(qm.data(), kn.data(), 128), b = dot(qs.data(), ks.data(), 128);
      worst = std::max(worst, std::abs(a - b));
      scale = std::max(scale, std::abs(a));
    }
    add("rope-relative", "RoPE: q_m·k_n depends only on n - m",
        "largest |<R(m)q, R(n)k> - <R(m+s)q, R(n+s)k>| over 200 random q, k, m, n, s < 2^20: " +
            detail::sig(worst, 3) + " (logits up to " + detail::sig(scale, 3) + ")",
        worst, worst < 1e-9 * std::max(1.0, scale));
  }

  // How a scaling method changes attention logits: inside the original context (disturbance,
  // relative RMS against plain RoPE over random q, k) and at the extended context (pairs rotated
  // past anything seen in training: pairs that never completed a turn within L and now exceed
  // their trained angle at sL).
  struct MethodEffect {
    double local;   // relative RMS change of logits at distances below 256
    double window;  // the same over the whole original window
    int out_of_range;
    double attention_factor;
    double first_ratio;  // highest-frequency pair: scaled / plain
    double last_ratio;   // lowest-frequency pair: scaled / plain
    double scale;        // the scale in effect (dynamic: grows with the sequence)
  };
  MethodEffect effect(const RopeSpec& spec, std::int64_t seq_len) {
    const Frequencies plain = compute_frequencies(llama2(Method::kNone));
    const Frequencies f = compute_frequencies(spec, Numerics::kPrecise, seq_len);
    // Positions span [0, L) in training and [0, sL) extended; compare the angles they reach.
    const double L = 4096, ext = 65536;
    int out = 0;
    for (std::size_t i = 0; i < f.inv_freq.size(); ++i) {
      const double trained = plain.inv_freq[i] * L;
      if (trained < 2 * std::numbers::pi && f.inv_freq[i] * ext > trained * (1 + 1e-9)) ++out;
    }
    std::normal_distribution<double> g(0.0, 1.0);
    std::mt19937_64 local(o_.seed);
    // Relative RMS change of the logits <R(0)q, R(delta)k> against plain RoPE, over random q, k:
    // for local attention (delta < 256, where high frequencies matter) and over the whole window.
    double near_num = 0, near_den = 0, all_num = 0, all_den = 0;
    for (int trial = 0; trial < 16; ++trial) {
      std::vector<double> q(128), k(128);
      for (double& v : q) v = g(local);
      for (double& v : k) v = g(local);
      const auto q_plain = rotate(plain, 0, q), q_scaled = rotate(f, 0, q);
      // The attention factor is a deliberate temperature, reported on its own: divided out here
      // so that the numbers measure what the angles do.
      const double af2 = f.attention_factor * f.attention_factor;
      for (std::int64_t delta = 0; delta < 4096; delta += delta < 256 ? 1 : 37) {
        const double a = dot(q_plain.data(), rotate(plain, delta, k).data(), 128);
        const double b = dot(q_scaled.data(), rotate(f, delta, k).data(), 128) / af2;
        (delta < 256 ? near_num : all_num) += (b - a) * (b - a);
        (delta < 256 ? near_den : all_den) += a * a;
      }
    }
    all_num += near_num;
    all_den += near_den;
    return {std::sqrt(near_num / near_den),
            std::sqrt(all_num / all_den),
            out,
            f.attention_factor,
            f.inv_freq.front() / plain.inv_freq.front(),
            f.inv_freq.back() / plain.inv_freq.back(),
            f.scale};
  }

  void scaling_methods() {
    const MethodEffect none = effect(llama2(Method::kNone), 0);
    const MethodEffect linear = effect(llama2(Method::kLinear), 0);
    const MethodEffect ntk = effect(llama2(Method::kNtk), 0);
    const MethodEffect dynamic = effect(llama2(Method::kDynamic), 65536);
    const MethodEffect yarn = effect(llama2(Method::kYarn), 0);
    RopeSpec paper = llama2(Method::kYarn);
    paper.yarn.ramp = YarnRamp::kPaper;
    const MethodEffect yarn_paper = effect(paper, 0);
    RopeSpec l3 = llama2(Method::kLlama3);
    const MethodEffect llama3 = effect(l3, 0);
    auto describe = [](const char* name, const MethodEffect& e) {
      return std::string(name) + ": logits move by " + detail::sig(e.local, 3) +
             " at distances < 256 and " + detail::sig(e.window, 3) +
             " over L (relative RMS, attention factor " + detail::sig(e.attention_factor, 3) +
             " divided out); " + std::to_string(e.out_of_range) +
             " pairs past their trained range at 16L; highest / lowest pair scaled by " +
             detail::sig(e.first_ratio, 3) + " / " + detail::sig(e.last_ratio, 3);
    };
    const std::string setup = " (Llama 2 7B: head_dim 128, L 4096, s 16)";
    add("scaling-none",
        "extrapolation (no scaling) leaves logits inside L alone but rotates low-frequency pairs "
        "past anything seen in training" +
            setup,
        describe("none", none), none.out_of_range, none.out_of_range > 0 && none.window == 0);
    add("scaling-linear",
        "Position Interpolation keeps every pair in its trained range, at the cost of moving even "
        "local logits inside L" +
            setup,
        describe("linear", linear), linear.local, linear.out_of_range == 0 && linear.local > 0.1);
    add("scaling-ntk",
        "NTK-aware scaling keeps the highest frequency and divides the lowest by s, but leaves "
        "pairs in between past their trained range (YaRN paper §3.1)" +
            setup,
        describe("ntk", ntk) + "; " +
            describe(("dynamic at 16L (transformers' formula: scale in effect " +
                      detail::sig(dynamic.scale, 3) + ")")
                         .c_str(),
                     dynamic),
        ntk.out_of_range,
        ntk.out_of_range > 0 && ntk.first_ratio == 1.0 &&
            std::abs(ntk.last_ratio * 16 - 1) < 1e-12);
    add("scaling-yarn",
        "YaRN keeps every pair in its trained range and moves local logits less than PI" + setup,
        describe("yarn", yarn) + "; " + describe("yarn-paper", yarn_paper), yarn.local,
        yarn.out_of_range == 0 && yarn_paper.out_of_range == 0 && yarn.local < linear.local &&
            yarn.first_ratio == 1.0);
    add("scaling-llama3",
        "Llama 3 scaling keeps every pair in its trained range and moves local logits less than "
        "PI" +
            setup,
        describe("llama3", llama3), llama3.local,
        llama3.out_of_range == 0 && llama3.local < linear.local && llama3.first_ratio == 1.0);
  }

  // Open question: do high dimensions carry any position information? Fixed at the seed's
  // d_model = 512 over 512 positions.
  void constant_dims() {
    const SinusoidalSpec s{512, kDefaultRopeTheta, SinusoidalLayout::kInterleaved};
    const std::vector<double> t = sinusoidal_table(s, 512);
    int flat = 0, first_flat = -1;
    for (int j = 0; j < 512; ++j) {
      double dev = 0;
      for (int p = 0; p < 512; ++p)
        dev = std::max(dev, std::abs(t[static_cast<std::size_t>(p * 512 + j)] -
                                     t[static_cast<std::size_t>(j)]));
      if (dev <= 0.01) {
        ++flat;
        if (first_flat < 0) first_flat = j;
      }
    }
    add("q-constant-dims",
        "open question: how many dimensions of a d_model = 512 encoding stay within 1% of constant "
        "over 512 positions?",
        std::to_string(flat) +
            " of 512 dimensions never move more than 0.01 from their value at position 0 (the "
            "first is dim " +
            std::to_string(first_flat) + ")",
        flat, true, true);
  }

  void high_frequency_energy() {
    // Variance across positions per dimension; the high-frequency half is pairs k < d/4.
    double high = 0, total = 0;
    for (std::size_t j = 0; j < d_; ++j) {
      double mean = 0, sq = 0;
      for (std::size_t p = 0; p < n_; ++p) mean += row(p)[j];
      mean /= static_cast<double>(n_);
      for (std::size_t p = 0; p < n_; ++p) sq += (row(p)[j] - mean) * (row(p)[j] - mean);
      total += sq;
      if (j / 2 < d_ / 4) high += sq;
    }
    add("q-high-frequency-energy",
        "open question: do the high-frequency dimensions drown the low-frequency ones?",
        "the high-frequency half of the pairs carries " + detail::sig(100 * high / total, 3) +
            "% of the encoding's variance over " + std::to_string(n_) + " positions",
        high / total, true, true);
  }

  void relative_offset_in_practice() {
    // <PE(p), PE(p + k)> = sum_k cos(k w): exact in float64; in a float32 table (how models
    // store it) the rounding of each entry shows at large positions.
    double worst64 = 0, worst32 = 0;
    std::vector<double> a(d_), b(d_), a32(d_), b32(d_);
    for (std::int64_t k : {1, 10, 100}) {
      sinusoidal_row(spec_, 0, a);
      sinusoidal_row(spec_, k, b);
      const double ref = dot(a.data(), b.data(), d_);
      for (std::int64_t p = 1; p < 100000; p += 997) {
        sinusoidal_row(spec_, p, a);
        sinusoidal_row(spec_, p + k, b);
        worst64 = std::max(worst64, std::abs(dot(a.data(), b.data(), d_) - ref));
        for (std::size_t j = 0; j < d_; ++j)
          a32[j] = static_cast<float>(a[j]), b32[j] = static_cast<float>(b[j]);
        worst32 = std::max(worst32, std::abs(dot(a32.data(), b32.data(), d_) - ref));
      }
    }
    add("q-relative-offset", "open question: does the relative-offset property hold in practice?",
        "<PE(p), PE(p+k)> depends on k alone to " + detail::sig(worst64, 3) +
            " in float64 and to " + detail::sig(worst32, 3) +
            " with the table stored in float32 (p < 100000, k in {1, 10, 100}; the dot product is "
            "up to " +
            std::to_string(d_ / 2) + ")",
        worst32, true, true);
  }

  VerifyOptions o_;
  SinusoidalSpec spec_;
  std::size_t d_, n_;
  std::vector<double> table_;
  std::mt19937_64 rng_;
  std::vector<ClaimResult> results_;
};

}  // namespace

std::vector<ClaimResult> verify_claims(const VerifyOptions& options) {
  if (options.d_model < 4 || options.d_model % 2 != 0 || options.d_model > kMaxVerifyDModel) {
    throw Error("verify: d_model (" + std::to_string(options.d_model) +
                ") must be an even number in [4, " + std::to_string(kMaxVerifyDModel) + "]");
  }
  if (options.positions < 2 || options.positions > kMaxVerifyPositions) {
    throw Error("verify: positions (" + std::to_string(options.positions) + ") must be in [2, " +
                std::to_string(kMaxVerifyPositions) + "] (the pairwise checks grow as positions²)");
  }
  if (options.positions * options.d_model > kMaxVerifyCells) {
    throw Error("verify: positions * d_model (" + std::to_string(options.positions) + " * " +
                std::to_string(options.d_model) + ") must be at most " +
                std::to_string(kMaxVerifyCells) +
                " (the pairwise checks grow as positions² * d_model)");
  }
  return Verifier(options).run();
}

}  // namespace posenc
