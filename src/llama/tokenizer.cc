// The sentencepiece-style BPE tokenizer of llama2.c (`encode` in run.c), over a vocabulary whose
// space character is U+2581. Two implementations of the merge loop that must agree id for id:
// encode_plain() rescans all pairs after every merge, as llama2.c does; encode() keeps candidate
// pairs in a priority queue keyed by (score, leftmost position) over a linked list of symbols.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <queue>
#include <string>

#include "posenc/core/error.h"
#include "posenc/llama/llama.h"

namespace posenc::llama {
namespace {

constexpr std::string_view kSpacePiece = "\xe2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Length of the UTF-8 sequence starting at s[i], or 1 for a byte that does not start a valid
// one (a stray continuation byte, a truncated or overlong sequence, a surrogate, > U+10FFFF).
std::size_t code_point_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t cp = 0, min = 0;
  if (b0 < 0x80) return 1;
  if ((b0 & 0xE0) == 0xC0)
    n = 2, cp = b0 & 0x1F, min = 0x80;
  else if ((b0 & 0xF0) == 0xE0)
    n = 3, cp = b0 & 0x0F, min = 0x800;
  else if ((b0 & 0xF8) == 0xF0)
    n = 4, cp = b0 & 0x07, min = 0x10000;
  else
    return 1;
  if (i + n > s.size()) return 1;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 1;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 1;
  return n;
}

}  // namespace

// A symbol covers work[start, start + length); byte-fallback symbols never merge.
struct Tokenizer::Symbol {
  std::size_t start = 0;
  std::size_t length = 0;
  std::int32_t id = 0;
  bool mergeable = false;
  std::int64_t prev = -1;  // linked list (encode only)
  std::int64_t next = -1;
};

Tokenizer::Tokenizer(std::vector<std::string> pieces, std::vector<float> scores)
    : pieces_(std::move(pieces)), scores_(std::move(scores)) {
  if (pieces_.size() != scores_.size())
    throw Error("tokenizer: pieces and scores differ in number");
  mergeable_.assign(pieces_.size(), true);
  bos_ = eos_ = -1;
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    const std::string& p = pieces_[i];
    const auto id = static_cast<std::int32_t>(i);
    unsigned byte = 0;
    char tail = 0;
    if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%2X%c", &byte, &tail) == 2 && tail == '>' &&
        byte < 256) {
      byte_ids_[byte] = id;
      mergeable_[i] = false;
      continue;
    }
    if (p == "<unk>" || p == "<s>" || p == "</s>") {
      mergeable_[i] = false;
      if (p == "<s>") bos_ = id;
      if (p == "</s>") eos_ = id;
      continue;
    }
    ids_.emplace(p, id);  // the first of duplicate pieces wins, as llama2.c's sorted lookup
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_ids_[b] < 0) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      throw Error(std::string("tokenizer: the vocabulary has no byte-fallback piece ") + name);
    }
  }
  if (bos_ < 0) {
    throw Error("tokenizer: the vocabulary has no <s> piece (BOS)");
  }
}

std::int32_t Tokenizer::merge_id(std::string_view text) const {
  const auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

// Steps 1 and 2 of the header: the space-mapped text in `work`, one symbol per code point.
std::vector<Tokenizer::Symbol> Tokenizer::initial_symbols(std::string_view text,
                                                          std::string& work) const {
  work.clear();
  if (text.empty()) return {};
  work.reserve(text.size() + 2 * std::count(text.begin(), text.end(), ' ') + kSpacePiece.size());
  work += kSpacePiece;
  for (char ch : text) {
    if (ch == ' ') {
      work += kSpacePiece;
    } else {
      work += ch;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(work.size());
  for (std::size_t i = 0; i < work.size();) {
    const std::size_t n = code_point_length(work, i);
    const std::int32_t id = merge_id(std::string_view(work).substr(i, n));
    if (id >= 0) {
      symbols.push_back({i, n, id, true});
    } else {
      for (std::size_t k = 0; k < n; ++k) {
        symbols.push_back({i + k, 1, byte_ids_[static_cast<unsigned char>(work[i + k])], false});
      }
    }
    i += n;
  }
  return symbols;
}

std::vector<std::int32_t> Tokenizer::encode_plain(std::string_view text) const {
  std::string work;
  const std::vector<Symbol> symbols = initial_symbols(text, work);
  const std::string_view w = work;
  std::vector<std::int32_t> out;
  out.reserve(symbols.size());
  // Byte-fallback symbols never merge, so the runs between them evolve independently: each run
  // gets llama2.c's loop on its own, which keeps the rescans short (one line of text, not a book).
  std::size_t begin = 0;
  while (begin < symbols.size()) {
    if (!symbols[begin].mergeable) {
      out.push_back(symbols[begin++].id);
      continue;
    }
    std::size_t end = begin;
    while (end < symbols.size() && symbols[end].mergeable) ++end;
    std::vector<Symbol> run(symbols.begin() + static_cast<std::ptrdiff_t>(begin),
                            symbols.begin() + static_cast<std::ptrdiff_t>(end));
    for (;;) {
      float best_score = -std::numeric_limits<float>::infinity();
      std::int32_t best_id = -1;
      std::size_t best = 0;
      for (std::size_t i = 0; i + 1 < run.size(); ++i) {
        const std::int32_t id = merge_id(w.substr(run[i].start, run[i].length + run[i + 1].length));
        if (id >= 0 && (best_id < 0 || scores_[static_cast<std::size_t>(id)] > best_score)) {
          best_score = scores_[static_cast<std::size_t>(id)];
          best_id = id;
          best = i;
        }
      }
      if (best_id < 0) break;
      run[best].length += run[best + 1].length;
      run[best].id = best_id;
      run.erase(run.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    for (const Symbol& s : run) out.push_back(s.id);
    begin = end;
  }
  return out;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::string work;
  std::vector<Symbol> sym = initial_symbols(text, work);
  const std::string_view w = work;
  const auto count = static_cast<std::int64_t>(sym.size());
  for (std::int64_t i = 0; i < count; ++i) {
    sym[static_cast<std::size_t>(i)].prev = i - 1;
    sym[static_cast<std::size_t>(i)].next = i + 1 < count ? i + 1 : -1;
  }
  // A candidate merge of `left` with its right neighbour as they were when it was queued; stale
  // once either symbol has changed (lengths only grow, so the merged length identifies the pair).
  struct Candidate {
    float score;
    std::size_t start;  // of the left symbol: the leftmost candidate wins a tie
    std::int64_t left;
    std::size_t length;
    std::int32_t id;
  };
  auto worse = [](const Candidate& a, const Candidate& b) {
    return a.score != b.score ? a.score < b.score : a.start > b.start;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> queue(worse);
  auto push = [&](std::int64_t left) {
    if (left < 0) return;
    const Symbol& a = sym[static_cast<std::size_t>(left)];
    if (a.next < 0 || !a.mergeable) return;
    const Symbol& b = sym[static_cast<std::size_t>(a.next)];
    if (!b.mergeable) return;
    const std::int32_t id = merge_id(w.substr(a.start, a.length + b.length));
    if (id >= 0)
      queue.push({scores_[static_cast<std::size_t>(id)], a.start, left, a.length + b.length, id});
  };
  for (std::int64_t i = 0; i < count; ++i) push(i);
  std::vector<bool> dead(sym.size(), false);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& a = sym[static_cast<std::size_t>(c.left)];
    if (dead[static_cast<std::size_t>(c.left)] || a.next < 0) continue;
    Symbol& b = sym[static_cast<std::size_t>(a.next)];
    if (a.length + b.length != c.length) continue;  // one of them merged since: stale
    a.length = c.length;
    a.id = c.id;
    dead[static_cast<std::size_t>(a.next)] = true;
    a.next = b.next;
    if (b.next >= 0) sym[static_cast<std::size_t>(b.next)].prev = c.left;
    push(a.prev);
    push(c.left);
  }
  std::vector<std::int32_t> out;
  for (std::int64_t i = count > 0 ? 0 : -1; i >= 0; i = sym[static_cast<std::size_t>(i)].next) {
    out.push_back(sym[static_cast<std::size_t>(i)].id);
  }
  return out;
}

std::string Tokenizer::decode(std::int32_t id) const {
  if (id < 0 || id >= size())
    throw Error("tokenizer: token id (" + std::to_string(id) + ") is out of range");
  for (int b = 0; b < 256; ++b) {
    if (byte_ids_[b] == id) return std::string(1, static_cast<char>(b));
  }
  if (!mergeable_[static_cast<std::size_t>(id)]) return "";
  std::string s;
  const std::string& p = pieces_[static_cast<std::size_t>(id)];
  for (std::size_t i = 0; i < p.size();) {
    if (p.compare(i, kSpacePiece.size(), kSpacePiece) == 0) {
      s += ' ';
      i += kSpacePiece.size();
    } else {
      s += p[i++];
    }
  }
  return s;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string s;
  for (std::int32_t id : ids) s += decode(id);
  return s;
}

}  // namespace posenc::llama
