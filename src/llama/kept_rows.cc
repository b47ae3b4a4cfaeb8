#include "llama/kept_rows.h"

#include <algorithm>
#include <cstddef>

namespace posenc::llama::detail {
namespace {

// The arena: the rows kept take at most this much; past it rows are made for one batch only. The
// protocol at ctx 8192 keeps 33 MiB (120 re-rotations a window, 4,352 positions each on average,
// 64 bytes a position), at 2048 2 MiB.
constexpr std::size_t kMaxKeptRowBytes = std::size_t{64} << 20;
// The (from, to) lengths remembered as asked for once, before the set is cleared.
constexpr std::size_t kMaxRequestedRows = 1 << 14;

}  // namespace

bool same_angles(const Frequencies& a, const Frequencies& b) {
  return a.inv_freq == b.inv_freq && a.attention_factor == b.attention_factor;
}

RowPointers KeptRows::find_or_make(const Frequencies& from, const Frequencies& to,
                                   std::int64_t count, std::int64_t head_dim, bool keep_first,
                                   const Make& make) {
  const auto key = std::pair{from.seq_len, to.seq_len};
  auto it = entries_.find(key);
  if (it != entries_.end() &&
      !(same_angles(it->second.from, from) && same_angles(it->second.to, to))) {
    live_bytes_ -= 8 * it->second.count * head_dim;  // other frequencies at these lengths
    entries_.erase(it);
    it = entries_.end();
  }
  bool keep = it != entries_.end() || keep_first;
  if (!keep) {
    if (requested_.size() >= kMaxRequestedRows) requested_.clear();
    keep = !requested_.insert(key).second;
  }
  if (!keep) return {};
  if (it == entries_.end() || it->second.count < count) {
    if (!arena_) arena_ = std::make_unique<posenc::detail::HugePageArena>(kMaxKeptRowBytes);
    const auto floats = static_cast<std::size_t>(count * head_dim);
    float* c2 = arena_->floats(floats);
    float* s2 = c2 != nullptr ? arena_->floats(floats) : nullptr;
    if (s2 == nullptr) return {};
    Entry& e = it == entries_.end() ? entries_[key] : it->second;
    if (e.count == 0) e.from = from, e.to = to;
    // A longer request: the rows made before are copied (their old block stays spent).
    std::copy_n(e.c2, e.count * head_dim, c2);
    std::copy_n(e.s2, e.count * head_dim, s2);
    make(e.count, count, c2 + e.count * head_dim, s2 + e.count * head_dim);
    live_bytes_ += 8 * (count - e.count) * head_dim;
    e.c2 = c2, e.s2 = s2, e.count = count;
    return {c2, s2};
  }
  return {it->second.c2, it->second.s2};
}

void KeptRows::compact() {
  if (!arena_ || 2 * arena_->used() < arena_->capacity()) return;
  const auto live = static_cast<std::size_t>(live_bytes_);
  if (arena_->used() - live <= live) return;
  entries_.clear();
  live_bytes_ = 0;
  arena_.reset();
}

}  // namespace posenc::llama::detail
