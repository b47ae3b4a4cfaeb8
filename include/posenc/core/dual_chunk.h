// posenc/core/dual_chunk.h: the positions Dual Chunk Attention (Qwen2.5-7B/14B-Instruct-1M;
// vLLM's dual_chunk_rope.py) rotates keys and queries by.
//
// chunk_len = chunk_size - local_size. A key at position p is rotated by p mod chunk_len; a query
// is rotated five times (concatenated along the head), and the attention backend picks one per
// block: intra (same chunk), successive (the next chunk), inter (any earlier chunk), and the two
// "critical" variants of the last two without the clamp at chunk_size.
#pragma once

#include <cstdint>

namespace posenc {

struct DualChunkPositions {
  std::int64_t chunk_len = 0;       // chunk_size - local_size
  std::int64_t key = 0;             // p mod chunk_len
  std::int64_t intra = 0;           // p mod chunk_len
  std::int64_t successive = 0;      // min(p mod chunk_len + chunk_len, chunk_size)
  std::int64_t inter = 0;           // min(2 chunk_len - 1, chunk_size), whatever p
  std::int64_t succ_critical = 0;   // p mod chunk_len + chunk_len
  std::int64_t inter_critical = 0;  // p mod chunk_len + chunk_size
};

// The rotation positions of a token at `position`. Throws Error naming the value when chunk_size
// or local_size is not positive, local_size >= chunk_size, or position is negative.
DualChunkPositions dual_chunk_positions(std::int64_t chunk_size, std::int64_t local_size,
                                        std::int64_t position);

}  // namespace posenc
