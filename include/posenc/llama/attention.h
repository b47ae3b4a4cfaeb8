// posenc/llama/attention.h: fused causal attention with its backward pass, for training
// (posenc.llama's attention="fused"; the C++ forward pass of llama.h has its own kernel).
//
// For batch b, query head h (reading kv head g = h / (heads / kv_heads): grouped-query
// attention without repeating k and v), query token i and key token j <= i (causal):
//   s_ij = scale * q_i . k_j                      (q_i = q[b, i, h, :], k_j = k[b, j, g, :])
//   lse_i = ln sum_{j<=i} exp(s_ij)               (log-sum-exp, kept for the backward pass)
//   p_ij = exp(s_ij - lse_i)                      (softmax over j <= i)
//   o_i = sum_{j<=i} p_ij v_j
// Backward, from dO = dL/dO (flash-attention's recomputation; nothing of size S x S is stored):
//   D_i = dO_i . o_i
//   dP_ij = dO_i . v_j,   dS_ij = p_ij (dP_ij - D_i)
//   dq_i = scale * sum_{j<=i} dS_ij k_j
//   dk_j = scale * sum_{h in g's group} sum_{i>=j} dS_ij q_i
//   dv_j = sum_{h in g's group} sum_{i>=j} p_ij dO_i
// Weights p below 2^-64 are taken as 0 (as the forward pass's kernel does: their exp would reach
// subnormals, which are slow, and beside the largest weight they are below the sums' rounding).
//
// Layouts: q, out, dout, dq are [batch, seq, heads, head_dim]; k, v, dk, dv
// [batch, seq, kv_heads, head_dim] (the model's projections viewed per head, no transpose);
// strides in elements for the first three dims, the head dim contiguous. lse is [batch, heads,
// seq], contiguous. dq, dk, dv are overwritten.
//
// Determinism: the forward pass and dq are split into tasks (b, h, tile of queries), dk and dv
// into (b, g, tile of keys); each output element is summed by one task in a fixed order (over
// keys, or over the group's heads then queries). The results are therefore the same bits on any
// number of threads (on a given SIMD target). Float32 and float64 (the latter for gradient
// checks against float64 references).
#pragma once

#include <cstdint>

namespace posenc::llama {

struct AttentionShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  // divides heads
  std::int64_t head_dim = 0;
};

// One [batch, seq, heads, head_dim] tensor: element (b, s, h, e) at
// data[b * batch_stride + s * seq_stride + h * head_stride + e].
template <class T>
struct HeadsView {
  T* data = nullptr;
  std::int64_t batch_stride = 0;
  std::int64_t seq_stride = 0;
  std::int64_t head_stride = 0;
};

template <class T>
struct AttentionForward {
  AttentionShape shape;
  T scale = 1;
  HeadsView<const T> q, k, v;
  HeadsView<T> out;
  T* lse = nullptr;  // [batch, heads, seq]
};

template <class T>
struct AttentionBackward {
  AttentionShape shape;
  T scale = 1;
  HeadsView<const T> q, k, v, out, dout;
  const T* lse = nullptr;  // the forward pass's
  HeadsView<T> dq, dk, dv;
};

// Throws posenc::Error naming the field when the shape is not positive, kv_heads does not divide
// heads, a pointer is null or threads is outside [1, kMaxThreads]. Runs on
// run_threads(threads) threads.
void causal_attention_forward(const AttentionForward<float>& args, int threads);
void causal_attention_forward(const AttentionForward<double>& args, int threads);
void causal_attention_backward(const AttentionBackward<float>& args, int threads);
void causal_attention_backward(const AttentionBackward<double>& args, int threads);

// Query or key tokens per task: the SIMD width of T on the dispatched target.
std::int64_t causal_attention_tile(bool float64);

}  // namespace posenc::llama
