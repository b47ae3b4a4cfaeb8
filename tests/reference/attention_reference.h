// tests/reference/attention_reference.h: causal softmax attention and its gradients in float64,
// written from the definitions with every score and probability materialised (S x S per head),
// independent of src/llama/attention.cc. Includes no posenc header.
//
// Layouts as posenc/llama/attention.h: q, dout [B, S, H, hd], k, v [B, S, KV, hd], contiguous;
// query head h reads kv head h / (H / KV).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace posenc_ref {

struct AttentionRef {
  std::int64_t batch, seq, heads, kv_heads, head_dim;
  double scale;

  std::size_t Q(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t e) const {
    return static_cast<std::size_t>(((b * seq + s) * heads + h) * head_dim + e);
  }
  std::size_t K(std::int64_t b, std::int64_t s, std::int64_t g, std::int64_t e) const {
    return static_cast<std::size_t>(((b * seq + s) * kv_heads + g) * head_dim + e);
  }

  // P[i][j] = softmax_j(scale q_i . k_j) over j <= i (0 above the diagonal), of one (b, h).
  std::vector<std::vector<double>> Probabilities(const std::vector<double>& q,
                                                 const std::vector<double>& k, std::int64_t b,
                                                 std::int64_t h) const {
    const std::int64_t g = h / (heads / kv_heads);
    std::vector<std::vector<double>> p(static_cast<std::size_t>(seq),
                                       std::vector<double>(static_cast<std::size_t>(seq), 0.0));
    for (std::int64_t i = 0; i < seq; ++i) {
      std::vector<double> s(static_cast<std::size_t>(i + 1));
      double m = -INFINITY;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (std::int64_t e = 0; e < head_dim; ++e) dot += q[Q(b, i, h, e)] * k[K(b, j, g, e)];
        s[static_cast<std::size_t>(j)] = scale * dot;
        m = std::fmax(m, scale * dot);
      }
      double z = 0;
      for (double x : s) z += std::exp(x - m);
      for (std::int64_t j = 0; j <= i; ++j)
        p[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] =
            std::exp(s[static_cast<std::size_t>(j)] - m) / z;
    }
    return p;
  }

  std::vector<double> Forward(const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v) const {
    std::vector<double> out(q.size(), 0.0);
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t g = h / (heads / kv_heads);
        const auto p = Probabilities(q, k, b, h);
        for (std::int64_t i = 0; i < seq; ++i)
          for (std::int64_t j = 0; j <= i; ++j)
            for (std::int64_t e = 0; e < head_dim; ++e)
              out[Q(b, i, h, e)] +=
                  p[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] * v[K(b, j, g, e)];
      }
    }
    return out;
  }

  // Backpropagation through the materialised graph: dP = dO V^T, dS = P * (dP - rowsum(P * dP))
  // (the softmax's Jacobian), dq = scale dS K, dk = scale dS^T Q, dv = P^T dO.
  void Backward(const std::vector<double>& q, const std::vector<double>& k,
                const std::vector<double>& v, const std::vector<double>& dout,
                std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) const {
    dq.assign(q.size(), 0.0);
    dk.assign(k.size(), 0.0);
    dv.assign(v.size(), 0.0);
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t g = h / (heads / kv_heads);
        const auto p = Probabilities(q, k, b, h);
        for (std::int64_t i = 0; i < seq; ++i) {
          const auto& pi = p[static_cast<std::size_t>(i)];
          std::vector<double> dp(static_cast<std::size_t>(i + 1));
          double row = 0;
          for (std::int64_t j = 0; j <= i; ++j) {
            double x = 0;
            for (std::int64_t e = 0; e < head_dim; ++e) x += dout[Q(b, i, h, e)] * v[K(b, j, g, e)];
            dp[static_cast<std::size_t>(j)] = x;
            row += pi[static_cast<std::size_t>(j)] * x;
          }
          for (std::int64_t j = 0; j <= i; ++j) {
            const double pij = pi[static_cast<std::size_t>(j)];
            const double ds = pij * (dp[static_cast<std::size_t>(j)] - row);
            for (std::int64_t e = 0; e < head_dim; ++e) {
              dq[Q(b, i, h, e)] += scale * ds * k[K(b, j, g, e)];
              dk[K(b, j, g, e)] += scale * ds * q[Q(b, i, h, e)];
              dv[K(b, j, g, e)] += pij * dout[Q(b, i, h, e)];
            }
          }
        }
      }
    }
  }
};

}  // namespace posenc_ref
