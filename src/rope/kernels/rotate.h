// src/rope/kernels/rotate.h: the per-token SIMD entry point of the RoPE kernels (internal).
//
// One call rotates `heads` heads of one token with one prepared cos/sin row, c and s of n values
// each: y_a = x_a c - x_b s, y_b = x_b c + x_a s, with a = i, b = i + n (kHalfSplit) or a = 2i,
// b = 2i + 1 (kInterleaved; the kernels expand the row to lanes, c2 = [c0 c0 c1 c1 ...] and
// s2 = [-s0 s0 -s1 s1 ...], and compute y = x c2 + swap_pairs(x) s2, the same operations).
// Inverse rotation is the caller's business (it negates s when preparing the row).
//
// Dispatch is per token, not per tensor as in Highway's skeleton, because the cos/sin row is made
// per token (in double, cos_sin_at) and shared by all of that token's heads: apply.cc prepares a
// row and hands it here while it is in L1. One indirect call per token is negligible next to the
// heads x head_dim elements it rotates.
#pragma once

#include <cstddef>
#include <cstdint>

#include <hwy/cache_control.h>

#include "posenc/core/spec.h"
#include "posenc/rope/tensor.h"

namespace posenc::detail {

struct TokenHeads {
  const void* in = nullptr;  // first element of the first head (dtype below)
  void* out = nullptr;       // may equal `in` (in place)
  DType dtype = DType::kF32;
  std::int64_t heads = 0;
  std::int64_t head_stride = 0;  // elements between heads
  std::int64_t head_dim = 0;
  std::int64_t offset = 0;  // first rotated dim
  std::int64_t pairs = 0;   // n
  Layout layout = Layout::kHalfSplit;
  bool copy_rest = false;  // out-of-place: also copy the dims outside the rotated range
  bool prefetch = false;   // software prefetch ahead of each head (prefetch_ahead): large calls
  const float* c = nullptr;
  const float* s = nullptr;
};

// How far ahead of the row being rotated the kernels prefetch (prefetch_ahead).
inline constexpr std::size_t kPrefetchAhead = 8192;

// Calls that move fewer bytes than this (their tensors' elements, read once) prefetch nothing
// (TokenHeads::prefetch, TokenKv::prefetch): the same 4 MiB as the fused call's streaming stores
// (kv_cache_streaming.h), twice a large core's L2. A tensor that small was usually just written
// (a decode step's q and k come from the projections) and sits in L1 or L2, where prefetching
// each line again 8 KiB ahead only costs instructions. Measured on Zen 4, in one process, with
// and without the prefetch in turn: a decode step's apply_rope (32 heads of 128, f32, with a
// table) 309-418 -> 288-391 ns over five rounds (0 to 27 ns less in each); hot tensors of 1 and 4
// MiB, one run each, 0.84 -> 0.99 and 0.82 -> 1.01 of the in-place stream. Larger calls keep it
// where it was measured to help (below), which is not every machine: src/rope/software_prefetch.h
// decides per call.
inline constexpr std::int64_t kPrefetchMinBytes = std::int64_t{4} << 20;

// Software prefetch (to L1) of the cache lines of [begin, begin + bytes); begin is an integer so
// that a range past an object's end needs no pointer arithmetic beyond it (a prefetch never
// faults).
inline void prefetch_range(std::uintptr_t begin, std::size_t bytes) {
  const std::uintptr_t end = begin + bytes;
  for (std::uintptr_t line = begin & ~std::uintptr_t{63}; line < end; line += 64) {
    hwy::Prefetch(reinterpret_cast<const char*>(line));
#if defined(__GNUC__)
    // Without this, GCC 12 at -O2 and above deleted the whole loop in rotate.cc, in the
    // benchmarks' stream and in half of the fused kernel's callers (60 of its 126 prefetches
    // were left): with -ffinite-loops (C++'s forward-progress rule) a loop whose only
    // statements are prefetches counts as one without effects. An empty volatile asm is an
    // effect the optimiser keeps, and it emits no instruction. With the prefetch back,
    // apply_rope f32 at Llama 2 7B's prefill went from 2.97-3.18 to 1.80-1.98 ms on Zen 5.
    // tests/kernels/check_prefetch.py checks the object code for it.
    asm volatile("");
#endif
  }
}

// Software prefetch of the cache lines kPrefetchAhead bytes past [p, p + count): the rows a
// kernel walks next, when they continue in memory after this one (token-major tensors, packed
// qkv rows). The rotation touches a head's lines out of order (a pair's two dims are n apart, so
// a head of 8 lines is read 0 1 4 5 2 3 6 7), which the hardware's stream prefetchers follow late
// on a tensor that lives in DRAM: measured on a Sapphire-Rapids-class Xeon with a standalone loop
// over 64 MiB f32 in place, the rotation ran at 0.67-0.83 of the in-place stream without it and
// at 0.96-1.25 with it, for any distance from 2 to 8 KiB. 8 KiB because the fused kernel's token
// rows are long (Llama 2 7B f16: 24 KiB of q, k and v), where it measured about 5% above 4 KiB
// (the plain rotation "did not move" then: its prefetch had been optimised away, see
// prefetch_range). A prefetch never faults, so an address past the end of the tensor costs a
// wasted line at most (prefetch_range takes the address as an integer).
template <class T>
inline void prefetch_ahead(const T* p, std::int64_t count) {
  prefetch_range(reinterpret_cast<std::uintptr_t>(p) + kPrefetchAhead,
                 static_cast<std::size_t>(count) * sizeof(T));
}

// Runs on the best SIMD target this CPU supports (or the forced one, targets.h).
void rotate_token_heads(const TokenHeads& args);

// A run of tokens of one tensor: token k's heads start at heads.in + k * in_token_stride and
// heads.out + k * out_token_stride (elements) and are rotated with the rows c[k], s[k] (the form
// TokenHeads takes); heads.c and heads.s are not read. The same bits as rotate_token_heads per
// token; one call instead of one per token: at 8 heads of 128 f32 in L2 the per-token dispatch,
// dtype and layout branches and the kernel's prologue were about 100 cycles a token, as much as
// the rotation (Zen 5).
struct TokenBlock {
  TokenHeads heads;
  std::int64_t tokens = 0;
  std::int64_t in_token_stride = 0;
  std::int64_t out_token_stride = 0;
  const float* const* c = nullptr;
  const float* const* s = nullptr;
};

void rotate_token_block(const TokenBlock& block);

// Applies POSENC_SIMD_TARGET once, before the first dispatch (targets.cc).
void ensure_simd_target_from_env();

// Name of the target rotate_token_heads dispatches to now, e.g. "AVX3".
const char* active_target_name();

}  // namespace posenc::detail
