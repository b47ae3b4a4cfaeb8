// posenc/rope/apply.h: rotate q and k in place (or into separate outputs): the hot path of RoPE.
//
// For each token t at position p = positions[t], each head h, and each rotated pair i:
//   (a, b) = the pair's dims within [rotary_offset, rotary_offset + D)
//            kHalfSplit:   a = off + i, b = off + i + n      kInterleaved: a = off + 2i, b = a + 1
//   y_a = x_a c - x_b s,   y_b = x_b c + x_a s               (forward)
//   y_a = x_a c + x_b s,   y_b = x_b c - x_a s               (inverse: the transpose; also the
//                                                             backward pass of the forward)
//   with c, s = attention_factor * cos(p w_i), attention_factor * sin(p w_i).
// Dims outside [rotary_offset, rotary_offset + D) are left untouched, bit for bit (and copied
// unchanged when writing to a separate output). Loads widen f16/bf16 to float32; stores round to
// nearest even.
//
// cos/sin come from a CosSinTable when one is given and the position is inside it, else they are
// computed on the fly for that token (cos_sin_row_f32), with the same result. A multi-axis token's
// row gathers slot i from the table row of its axis' position (the same one-axis table).
#pragma once

#include <cstdint>
#include <optional>

#include "posenc/core/frequencies.h"
#include "posenc/rope/table.h"
#include "posenc/rope/tensor.h"

namespace posenc {

enum class Direction { kForward, kInverse };

struct RopeArgs {
  TensorView q;                     // [tokens, heads_q, head_dim]
  std::optional<TensorView> k;      // [tokens, heads_k, head_dim]; heads_k may differ (GQA)
  std::optional<TensorView> q_out;  // same shape and dtype as q; absent: rotate q in place
  std::optional<TensorView> k_out;  // same shape and dtype as k; absent: rotate k in place
  // One per token; for a multi-axis spec (axis_count(spec) > 1) [axes, tokens] axis-major (all
  // t, then all h, ...): slot i of token t reads positions[slot_axis(i) * tokens + t].
  Positions positions;
  Direction direction = Direction::kForward;
  // Optional; must be built from Frequencies with the same bits of inv_freq and attention_factor
  // and the same numerics (else Error). Passing table->frequencies() itself skips the comparison.
  const CosSinTable* table = nullptr;
  int threads = 1;  // [1, kMaxThreads] (threads.h); 1: the calling thread only
};

// Rotates q (and k) with `freqs` (its spec gives layout, rotary_dim and rotary_offset).
// Throws Error naming the argument when shapes, strides, dtypes, positions or threads do not fit.
// Returns the threads that ran: at most args.threads, fewer when the call is too small to split.
int apply_rope(const Frequencies& freqs, const RopeArgs& args);

// Re-rotates cached keys from the angles of `from` to those of `to` in one pass:
//   k <- R(theta_to) R(theta_from)^T k
// so a dynamic method (or LongRoPE's short-to-long switch) can update a KV cache without
// recomputing the keys. Both must share layout, rotary_dim and rotary_offset. Attention
// factors are applied as the ratio to.attention_factor / from.attention_factor. `threads` must be
// in [1, kMaxThreads].
// Positions as in RopeArgs ([axes, tokens] for a multi-axis spec; both must share the axis map).
void rerotate_keys(const Frequencies& from, const Frequencies& to, const TensorView& k,
                   const Positions& positions, int threads = 1);

}  // namespace posenc
