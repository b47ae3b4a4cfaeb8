#include "fused_workload.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "posenc/core/spec.h"
#include "posenc/rope/apply.h"
#include "rope/kv_cache_streaming.h"
#include "stream.h"

namespace posenc::bench {
namespace {

constexpr std::int64_t kBlockSize = 16;  // vLLM's default block_size

}  // namespace

void FusedWorkload::FreeDeleter::operator()(void* p) const { std::free(p); }

FusedWorkload::Buffer FusedWorkload::allocate(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (p == nullptr) throw std::bad_alloc();
  return Buffer(static_cast<std::byte*>(p));
}

FusedWorkload::FusedWorkload(const Case& c)
    : case_(c), freqs_(compute_frequencies([&] {
        RopeSpec spec;
        spec.head_dim = c.shape.head_dim;
        spec.rotary_dim = c.shape.head_dim;
        return spec;
      }())) {
  const Shape& s = c.shape;
  const std::int64_t d = s.head_dim, row = (s.heads + 2 * s.kv_heads) * d;
  const std::size_t es = dtype_size(c.dtype);
  qkv_bytes_ = static_cast<std::size_t>(s.tokens * row) * es;
  qkv_ = allocate(qkv_bytes_);
  auto* base = reinterpret_cast<char*>(qkv_.get());
  q_ = {base, c.dtype, s.tokens, s.heads, d, row, d};
  k_ = {
      base + static_cast<std::size_t>(s.heads * d) * es, c.dtype, s.tokens, s.kv_heads, d, row, d};
  v_ = {base + static_cast<std::size_t>((s.heads + s.kv_heads) * d) * es,
        c.dtype,
        s.tokens,
        s.kv_heads,
        d,
        row,
        d};
  // Uniform values in [-1, 1) (xorshift64, as workload.cc), which also faults in every page.
  std::uint64_t state = 0x9E3779B97F4A7C15u;
  for (std::int64_t i = 0; i < s.tokens * row; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float v = static_cast<float>(state >> 40) * 0x1p-23f - 1.0f;
    if (c.dtype == DType::kF32) {
      std::memcpy(base + i * 4, &v, 4);
    } else {
      // bf16: v's top half; f16: a random sign and mantissa in [0.5, 1) (a timing input only).
      const auto h =
          static_cast<std::uint16_t>(c.dtype == DType::kBF16 ? std::bit_cast<std::uint32_t>(v) >> 16
                                                             : ((state >> 48) & 0x83FFu) | 0x3800u);
      std::memcpy(base + i * 2, &h, 2);
    }
  }
  positions_.resize(static_cast<std::size_t>(s.tokens));
  for (std::int64_t t = 0; t < s.tokens; ++t)
    positions_[static_cast<std::size_t>(t)] = s.first_position + t;
  table_ = std::make_unique<CosSinTable>(freqs_, s.first_position + s.tokens);
  // Prefill fills blocks in order; decode tokens each land in their own block (37 is coprime to
  // the block count, a power of two, so the blocks are distinct).
  const std::int64_t blocks = std::max<std::int64_t>(256, (s.tokens + kBlockSize - 1) / kBlockSize);
  slots_.resize(static_cast<std::size_t>(s.tokens));
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    slots_[static_cast<std::size_t>(t)] =
        s.tokens >= blocks ? t : (t * 37 % blocks) * kBlockSize + t % kBlockSize;
  }
  cache_bytes_ = static_cast<std::size_t>(blocks * kBlockSize * s.kv_heads * d) *
                 cache_dtype_size(c.cache_dtype);
  const auto cache_row =
      s.kv_heads * d * static_cast<std::int64_t>(cache_dtype_size(c.cache_dtype));
  cache_offsets_.resize(slots_.size());
  for (std::size_t t = 0; t < slots_.size(); ++t) cache_offsets_[t] = slots_[t] * cache_row;
  key_cache_ = allocate(cache_bytes_);
  value_cache_ = allocate(cache_bytes_);
  std::memset(key_cache_.get(), 0, cache_bytes_);
  std::memset(value_cache_.get(), 0, cache_bytes_);
  cache_ = KvCache::contiguous(key_cache_.get(), value_cache_.get(), c.cache_dtype,
                               KvCacheLayout::kVllm, blocks, kBlockSize, s.kv_heads, d);
  if (c.cache_dtype == CacheDType::kFp8E4M3) cache_.k_scale = cache_.v_scale = c.cache_scale;
  stream_bytes_ = c.bytes_moved() / 2 / es * es;
  stream_ = allocate(stream_bytes_);
  copy_ = allocate(stream_bytes_);
  std::memset(copy_.get(), 0, stream_bytes_);
  // The stream buffer holds q's values repeated (finite, magnitudes below 1).
  for (std::size_t at = 0; at < stream_bytes_; at += std::min(qkv_bytes_, stream_bytes_ - at))
    std::memcpy(stream_.get() + at, qkv_.get(), std::min(qkv_bytes_, stream_bytes_ - at));
}

KvAppendArgs FusedWorkload::args(bool rotate, int threads) const {
  KvAppendArgs a;
  if (rotate) a.q = q_;
  a.k = k_;
  a.v = v_;
  a.rotate = rotate;
  a.positions = std::span<const std::int64_t>(positions_);
  a.table = table_.get();
  a.slot_mapping = slots_;
  a.threads = threads;
  return a;
}

int FusedWorkload::fused(int threads) {
  return rope_append_kv_cache(freqs_, cache_, args(true, threads));
}

void FusedWorkload::separate(int threads) {
  RopeArgs r;
  r.q = q_;
  r.k = k_;
  r.positions = std::span<const std::int64_t>(positions_);
  r.table = table_.get();
  r.threads = threads;
  apply_rope(freqs_, r);
  rope_append_kv_cache(freqs_, cache_, args(false, threads));
}

void FusedWorkload::copy() { std::memcpy(copy_.get(), stream_.get(), stream_bytes_); }

void FusedWorkload::stream(bool prefetch) {
  stream_scale(stream_.get(), case_.dtype,
               static_cast<std::int64_t>(stream_bytes_ / dtype_size(case_.dtype)), -1.0f, prefetch);
}

void FusedWorkload::append_stream(bool prefetch) {
  const Shape& s = case_.shape;
  AppendStream a;
  a.q = q_.data;
  a.k = k_.data;
  a.v = v_.data;
  a.dtype = case_.dtype;
  a.tokens = s.tokens;
  a.token_stride_bytes = q_.token_stride * static_cast<std::int64_t>(dtype_size(case_.dtype));
  a.q_elements = s.heads * s.head_dim;
  a.key_cache = key_cache_.get();
  a.value_cache = value_cache_.get();
  a.cache_offsets = cache_offsets_.data();
  a.cache_row_bytes =
      s.kv_heads * s.head_dim * static_cast<std::int64_t>(cache_dtype_size(case_.cache_dtype));
  a.narrow = cache_dtype_size(case_.cache_dtype) < dtype_size(case_.dtype);
  if (a.narrow && (cache_dtype_size(case_.cache_dtype) != 1 || dtype_size(case_.dtype) != 2))
    throw std::logic_error("append_stream: narrows only two-byte inputs into one-byte caches");
  // The fused kernel's rule (src/rope/kv_cache_streaming.h): streaming stores for appends that
  // write stream_cache_bytes() of cache or more.
  a.streaming = 2 * s.tokens * a.cache_row_bytes >= detail::stream_cache_bytes();
  a.prefetch = prefetch;
  stream_append(a);
}

std::size_t FusedWorkload::cache_mismatches(int threads) {
  const Buffer saved = allocate(qkv_bytes_);
  std::memcpy(saved.get(), qkv_.get(), qkv_bytes_);
  fused(threads);
  std::vector<std::byte> key(key_cache_.get(), key_cache_.get() + cache_bytes_);
  std::vector<std::byte> value(value_cache_.get(), value_cache_.get() + cache_bytes_);
  std::memcpy(qkv_.get(), saved.get(), qkv_bytes_);
  separate(threads);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < cache_bytes_; ++i) {
    differ += key[i] != key_cache_.get()[i];
    differ += value[i] != value_cache_.get()[i];
  }
  std::memcpy(qkv_.get(), saved.get(), qkv_bytes_);
  return differ;
}

}  // namespace posenc::bench
