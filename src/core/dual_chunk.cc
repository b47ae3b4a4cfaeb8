// Dual Chunk Attention positions (dual_chunk.h), as vLLM's DualChunkRotaryEmbedding indexes its
// five query caches and its key cache.
#include "posenc/core/dual_chunk.h"

#include <algorithm>
#include <string>

#include "posenc/core/error.h"

namespace posenc {

DualChunkPositions dual_chunk_positions(std::int64_t chunk_size, std::int64_t local_size,
                                        std::int64_t position) {
  if (chunk_size <= 0) {
    throw Error("dual chunk attention: chunk_size (" + std::to_string(chunk_size) +
                ") must be a positive integer");
  }
  if (local_size <= 0 || local_size >= chunk_size) {
    throw Error("dual chunk attention: local_size (" + std::to_string(local_size) +
                ") must be positive and below chunk_size (" + std::to_string(chunk_size) + ")");
  }
  if (position < 0) {
    throw Error("dual chunk attention: position (" + std::to_string(position) + ") must be >= 0");
  }
  DualChunkPositions d;
  d.chunk_len = chunk_size - local_size;
  const std::int64_t in_chunk = position % d.chunk_len;
  d.key = in_chunk;
  d.intra = in_chunk;
  d.successive = std::min(in_chunk + d.chunk_len, chunk_size);
  // qc_cache[chunk_len - 1] for every token.
  d.inter = std::min(2 * d.chunk_len - 1, chunk_size);
  d.succ_critical = in_chunk + d.chunk_len;
  d.inter_critical = in_chunk + chunk_size;
  return d;
}

}  // namespace posenc
