// src/llama/kernels.h: the SIMD kernels of the Llama forward pass (internal).
//
// Each kernel computes every output element with the same float32 operations in the same order
// whatever rows, tiles or threads the caller splits the work into: matmul is vectorised across
// output columns, attention across the queries of a tile or the keys of one query, never across a
// sum. A forward pass is therefore bit for bit the same on 1 or 2 threads and with any step size,
// on a given SIMD target.
#pragma once

#include <cstdint>

#include "posenc/core/frequencies.h"

namespace posenc::llama::detail {

// out[t, j] (=|+=) sum_k x[t, k] * w[k, j] for t in [0, rows), j in [0, cols), k in [0, depth),
// summed in order of k with separate multiply and add (no fused multiply-add).
//   x:   rows x depth, row stride x_stride      w: depth x cols, row-major (a transposed weight)
//   out: rows x cols, row stride out_stride     accumulate: add to out instead of overwriting
struct MatMulArgs {
  const float* x = nullptr;
  std::int64_t x_stride = 0;
  std::int64_t rows = 0;
  const float* w = nullptr;
  std::int64_t depth = 0;
  std::int64_t cols = 0;
  float* out = nullptr;
  std::int64_t out_stride = 0;
  bool accumulate = false;
};
void matmul(const MatMulArgs& args);

// Which code attend() runs; both give the same bits (src/llama/cache_attention.cc). kAuto: per query
// for at most kPerQueryMaxTokens queries (decoding), else the tile.
enum class AttentionPath { kAuto, kTile, kPerQuery };
// The tile's cost per key does not depend on how many of its lanes are used; the per-query path's
// grows with the queries. CPU time of one call against 4096 keys (AVX3, 16 lanes, hd 8, keys
// transposed by the call): tile 32-35 us for 1 to 16 queries; per query 18, 21, 22, 25 us for 1
// to 4 queries and 48 for 8 (Q > 4 runs in groups of 4); with the caller's key blocks 8, 11 and
// 18 us for 1, 2 and 4.
inline constexpr std::int64_t kPerQueryMaxTokens = 4;

// Positions per block of AttentionArgs::k_blocks; a power of two.
inline constexpr std::int64_t kKeyBlock = 16;

// Causal attention of one head for a tile of up to attention_tile_tokens() query tokens:
//   out[t] = sum_j p_tj v_j,  p_t = softmax_j(scale * q_t . k_j) over j in [0, positions[t]]
// computed in base 2 (p_tj = 2^(s_tj - max), s_tj = (scale log2 e) q_t . k_j) with weights below
// 2^-64 set to 0; each output is within about 2e-7 relative of the same sums with exact exp.
//   q:   tokens x head_dim, row stride q_stride (already rotated)
//   k, v: position j's vector at k + j * k_stride, v + j * v_stride (the cache of one kv head)
//   k_blocks: optional, the same keys in blocks of kKeyBlock positions (dim e of key j at
//             k_blocks[(j / kKeyBlock) * head_dim * kKeyBlock + e * kKeyBlock + j % kKeyBlock],
//             positions up to the last query's); the per-query path then reads them instead of
//             transposing k itself
//   out: tokens x head_dim, row stride out_stride
// Each output element is computed by the same operations in the same order whatever the tile
// it is in, the path, and the thread; MulAdd (fused where the target has FMA) makes the last bits
// depend on the SIMD target.
struct AttentionArgs {
  const float* q = nullptr;
  std::int64_t q_stride = 0;
  const std::int32_t* positions = nullptr;
  std::int64_t tokens = 0;
  const float* k = nullptr;
  std::int64_t k_stride = 0;
  const float* v = nullptr;
  std::int64_t v_stride = 0;
  const float* k_blocks = nullptr;
  std::int64_t head_dim = 0;
  float scale = 1.0f;
  float* out = nullptr;
  std::int64_t out_stride = 0;
  AttentionPath path = AttentionPath::kAuto;  // tests and benchmarks force one
};
void attend(const AttentionArgs& args);
std::int64_t attention_tile_tokens();  // the SIMD width in floats

// out[i] = 2^x[i] for x[i] in [-64, 0], 0 for x[i] < -64: attention's exponential (its error
// bound is derived in cache_attention.cc), exported for its test.
void exp2_weights(const float* x, float* out, std::int64_t n);

// gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i], i in [0, n).
void silu_mul(float* gate, const float* up, std::int64_t n);

// ln(sum_i exp(x[i])), i in [0, n), n >= 1; computed around max(x).
double log_sum_exp(const float* x, std::int64_t n);

// The re-rotation of a dynamic method's cached keys, k <- R(theta_to) R(theta_from)^T k, with
// the bits of posenc::rerotate_keys but its rows made once for every layer and its rotation
// vectorised over whole key rows (rerotate_keys rotates one token's heads at a time, and a head
// of 8 dims is a one-lane tail on AVX3; docs/eval.md).
//
// Rows: rerotate_keys' `precise` rows, those of the frequencies w_to - w_from with attention
// factor af_to / af_from, each entry the exactly rounded float32 of its cos (sin) (as
// cos_sin_row_f32; made by a CosSinStepper as rerotate_keys makes them), expanded as apply_rope's
// kernel takes interleaved rows: c2 = [c0 c0 c1 c1 ...], s2 = [-s0 s0 -s1 s1 ...], head_dim each.
class Rerotation {
 public:
  // Whether these rows give rerotate_keys' bits: both `precise`, interleaved pairs over the whole
  // head (rotary_dim = head_dim, no offset), one position axis. Otherwise call rerotate_keys.
  static bool applies(const Frequencies& from, const Frequencies& to);

  Rerotation(const Frequencies& from, const Frequencies& to);

  // c2, s2 of positions [p0, p1): [p1 - p0, head_dim] row-major each.
  void rows(std::int64_t p0, std::int64_t p1, float* c2, float* s2) const;

 private:
  Frequencies delta_;
};

// For r in [0, rows), h in [0, heads), i in [0, width):
//   y = x[r * x_stride + h * width + i],  y <- y c2[r * width + i] + partner(y) s2[r * width + i]
// with partner the other dim of y's pair (dims 2i', 2i' + 1): apply_rope's interleaved arithmetic
// (rope/kernels/rotate-inl.h, MulAdd fused where the target has FMA), so on one target the bits
// of rerotate_keys given Rerotation's rows. width even.
struct RerotateArgs {
  float* x = nullptr;
  std::int64_t x_stride = 0;
  std::int64_t rows = 0;
  std::int64_t heads = 0;
  std::int64_t width = 0;
  const float* c2 = nullptr;
  const float* s2 = nullptr;
};
void rerotate_rows(const RerotateArgs& args);

}  // namespace posenc::llama::detail
