// src/llama/kept_rows.h: the re-rotation rows a llama::Session keeps for reuse (internal).
//
// Every window of the perplexity protocol re-rotates its cached keys at the same lengths between
// the same frequencies, so a Session keeps each re-rotation's rows (detail::Rerotation's c2, s2,
// [positions, head_dim] each) and makes them once instead of once per window (half the
// re-rotation's time at ctx 8192). They live in an arena of transparent huge pages
// (util/huge_page_arena.h): a fresh 4 KiB page costs about 13 us to fault in on the guests of
// docs/eval.md, and the protocol keeps 33 MiB at ctx 8192.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "posenc/core/frequencies.h"
#include "util/huge_page_arena.h"

namespace posenc::llama::detail {

// Whether two frequencies rotate by the same angles (their seq_len may differ).
bool same_angles(const Frequencies& a, const Frequencies& b);

struct RowPointers {
  const float* c2 = nullptr;  // [count, head_dim]; nullptr: not kept
  const float* s2 = nullptr;
};

class KeptRows {
 public:
  // Makes rows [p0, p1) of the re-rotation into c2, s2 (row p0 first).
  using Make = std::function<void(std::int64_t p0, std::int64_t p1, float* c2, float* s2)>;

  // The rows of the re-rotation from `from` to `to` of positions [0, count): kept ones, made now
  // (by `make`) if new and extended if too short, when they are to be kept and the arena has room;
  // else null pointers. Rows are kept from their first request on when keep_first (a step of
  // several tokens: the protocol's windows ask for the same ones again), else from their second:
  // a decoded token's re-rotation (a new length each token) is never asked for again, and keeping
  // those would spend the arena (before it, an allocation, its zeroing and its page faults per
  // token: 9% of a decoding run's samples in memset alone). Pointers stay valid until compact().
  RowPointers find_or_make(const Frequencies& from, const Frequencies& to, std::int64_t count,
                           std::int64_t head_dim, bool keep_first, const Make& make);

  // Call before a batch's rows are looked up, never between them (a batch's sub-steps point into
  // the arena): once the arena is over half spent and more of it is dead (rows replaced by longer
  // ones or by other frequencies) than live, drops every kept row and starts a new arena, so that
  // a long-lived Session keeps keeping rows.
  void compact();

 private:
  struct Entry {
    Frequencies from, to;
    std::int64_t count = 0;  // rows of positions [0, count)
    float* c2 = nullptr;     // [count, head_dim] each, in the arena
    float* s2 = nullptr;
  };
  // By (from.seq_len, to.seq_len), checked against the angles on use.
  std::map<std::pair<std::int64_t, std::int64_t>, Entry> entries_;
  std::set<std::pair<std::int64_t, std::int64_t>> requested_;  // asked for once so far
  std::unique_ptr<posenc::detail::HugePageArena> arena_;       // reserved on first use
  std::int64_t live_bytes_ = 0;  // of entries_ (the rest of the arena's used bytes: dead)
};

}  // namespace posenc::llama::detail
