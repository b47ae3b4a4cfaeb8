// tests/reference/mrope_reference.h: an independent reference of the multi-axis (M-RoPE) slot ->
// axis maps, written from the formulas of ../shared/docs/rope-in-engines.md 1.1 in the shape
// the engines compute them (transformers' split-and-select, its interleave by strided slices,
// ERNIE's permuted inv_freq and recomposition). It includes no posenc header.
//
// A map is one entry per frequency slot j in [0, n): the position axis the slot reads, and the
// frequency index it rotates with (always j for these models; ERNIE's permutation is undone by
// its recomposition, which the reference checks rather than assumes).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace posenc_ref {

struct SlotRef {
  int axis = 0;
  std::int64_t freq = 0;  // index into inv_freq
};

// Qwen2-VL apply_multimodal_rotary_pos_emb: cos.split(mrope_section) and chunk i taken from
// axis i % 3 (on one half of cat(freqs, freqs); the other half is the same split).
inline std::vector<SlotRef> ContiguousSlots(const std::vector<std::int64_t>& sections) {
  std::vector<SlotRef> out;
  std::int64_t j = 0;
  for (std::size_t chunk = 0; chunk < sections.size(); ++chunk) {
    for (std::int64_t k = 0; k < sections[chunk]; ++k, ++j) {
      out.push_back({static_cast<int>(chunk % sections.size()), j});
    }
  }
  return out;
}

// Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope: freqs_t = freqs[0]; for (dim, offset) in
// ((1, 1), (2, 2)): freqs_t[..., offset:mrope_section[dim] * 3:3] = freqs[dim, ..., same slice].
inline std::vector<SlotRef> InterleavedSlots(const std::vector<std::int64_t>& sections) {
  const std::int64_t n = sections[0] + sections[1] + sections[2];
  std::vector<SlotRef> out(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) out[static_cast<std::size_t>(j)] = {0, j};
  for (int dim = 1; dim <= 2; ++dim) {
    const std::int64_t end = std::min(n, sections[static_cast<std::size_t>(dim)] * 3);
    for (std::int64_t j = dim; j < end; j += 3) out[static_cast<std::size_t>(j)].axis = dim;
  }
  return out;
}

// Ernie4_5_VLMoeTextRotaryEmbedding, sections (s_h, s_w, s_t), hw = s_h + s_w:
//   inv_freq_3d = cat(inv_freq[:hw][0::2], inv_freq[:hw][1::2], inv_freq[hw:])
//   recomposition: h = freqs_h[..., :s_h], w = freqs_w[..., s_h:hw], t = freqs_t[..., hw:],
//   stacked h, w alternately ([h0 w0 h1 w1 ...]), then t.
inline std::vector<SlotRef> ErnieSlots(const std::vector<std::int64_t>& sections) {
  const std::int64_t sh = sections[0], sw = sections[1], st = sections[2];
  const std::int64_t hw = sh + sw;
  std::vector<std::int64_t> perm;  // inv_freq_3d[k] = inv_freq[perm[k]]
  for (std::int64_t j = 0; j < hw; j += 2) perm.push_back(j);
  for (std::int64_t j = 1; j < hw; j += 2) perm.push_back(j);
  for (std::int64_t j = hw; j < hw + st; ++j) perm.push_back(j);
  std::vector<SlotRef> out;
  for (std::int64_t k = 0; k < sh; ++k) {
    out.push_back({1, perm[static_cast<std::size_t>(k)]});
    out.push_back({2, perm[static_cast<std::size_t>(sh + k)]});
  }
  for (std::int64_t k = hw; k < hw + st; ++k) out.push_back({0, perm[static_cast<std::size_t>(k)]});
  return out;
}

// vLLM xdrope.py: four contiguous sections, section k from axis k (positions ordered p, w, h, t).
inline std::vector<SlotRef> XdropeSlots(const std::vector<std::int64_t>& sections) {
  return ContiguousSlots(sections);
}

// The position slot j of a token reads: axis_positions[slots[j].axis].
inline std::vector<std::int64_t> SlotPositions(const std::vector<SlotRef>& slots,
                                               const std::vector<std::int64_t>& axis_positions) {
  std::vector<std::int64_t> out;
  for (const SlotRef& s : slots) out.push_back(axis_positions[static_cast<std::size_t>(s.axis)]);
  return out;
}

}  // namespace posenc_ref
