// tests/reference/mrope_positions_reference.h: an independent reference for M-RoPE position ids, written
// from the formulas of ../shared/docs/rope-in-engines.md §1.2 in the shape of the code they come
// from: transformers 4.57's get_rope_index (each block at st_idx = max + 1, ids = grid index +
// text_len + st_idx) and the v5 walk (current_pos; a block advances it by max(H', W')).
// It includes no posenc header and shares no code with src/.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace posenc_ref {

enum class VlModel { kQwen2Vl, kQwen25Vl, kQwen3Vl, kGlm4v };

// kind 't' (len), 'i' or 'v' (grid t, h, w in patches; seconds for 'v').
struct VlSegment {
  char kind;
  std::int64_t len = 0, t = 0, h = 0, w = 0;
  double seconds = 0;
};

struct VlIds {
  std::array<std::vector<std::int64_t>, 3> axes;
  std::int64_t delta = 0;
};

// One vision item as get_rope_index sees it: grid (T', H', W') and the temporal value of group k
// before the start is added.
struct VlItem {
  std::int64_t gt, gh, gw;
  std::vector<std::int64_t> tval;
};

// The items of a segment: Qwen3-VL and GLM-4.1V split a video into T frames of T = 1
// (repeat_interleave(video_grid_thw, T); [:, 0] = 1).
inline std::vector<VlItem> vl_items(const VlSegment& s, VlModel model, std::int64_t merge,
                                    double tokens_per_second, bool v5) {
  const std::int64_t gh = s.h / merge, gw = s.w / merge;
  std::vector<VlItem> items;
  const bool split = s.kind == 'v' && (model == VlModel::kQwen3Vl || model == VlModel::kGlm4v);
  const std::int64_t n = split ? s.t : 1, gt = split ? 1 : s.t;
  for (std::int64_t f = 0; f < n; ++f) {
    VlItem it{gt, gh, gw, {}};
    for (std::int64_t k = 0; k < gt; ++k) {
      std::int64_t tv = k;
      if (model == VlModel::kQwen25Vl && s.kind == 'v') {
        // 4.57: as_tensor(second_per_grid_t, dtype=int64) * tokens_per_second, then .long();
        // v5: tokens_per_second * int(second_per_grid_ts), then .to(long).
        const auto whole = static_cast<std::int64_t>(s.seconds);
        tv = static_cast<std::int64_t>(static_cast<double>(k * whole) * tokens_per_second);
      } else if (model == VlModel::kQwen25Vl && !v5) {
        tv = 0;  // 4.57 images: second_per_grid_t = 0
      }
      it.tval.push_back(tv);
    }
    items.push_back(it);
  }
  return items;
}

inline VlIds vl_positions(const std::vector<VlSegment>& layout, VlModel model, std::int64_t merge,
                          double tokens_per_second, bool v5) {
  VlIds out;
  auto push = [&out](std::int64_t t, std::int64_t h, std::int64_t w) {
    out.axes[0].push_back(t);
    out.axes[1].push_back(h);
    out.axes[2].push_back(w);
  };
  auto current_max = [&out] {
    std::int64_t m = -1;
    for (const auto& a : out.axes)
      for (std::int64_t v : a) m = std::max(m, v);
    return m;
  };
  // 4.57: st_idx = llm_pos_ids_list[-1].max() + 1, the last block's maximum.
  std::size_t block_begin = 0;
  auto last_block_max = [&out, &block_begin] {
    std::int64_t m = -1;
    for (const auto& a : out.axes)
      for (std::size_t j = block_begin; j < a.size(); ++j) m = std::max(m, a[j]);
    return m;
  };
  std::int64_t current_pos = 0;
  for (const VlSegment& s : layout) {
    if (s.kind == 't') {
      const std::int64_t st = v5 ? current_pos : last_block_max() + 1;
      block_begin = out.axes[0].size();
      for (std::int64_t i = 0; i < s.len; ++i) push(st + i, st + i, st + i);
      current_pos = st + s.len;
      continue;
    }
    for (const VlItem& it : vl_items(s, model, merge, tokens_per_second, v5)) {
      const std::int64_t st = v5 ? current_pos : last_block_max() + 1;
      block_begin = out.axes[0].size();
      for (std::int64_t k = 0; k < it.gt; ++k)
        for (std::int64_t r = 0; r < it.gh; ++r)
          for (std::int64_t c = 0; c < it.gw; ++c)
            push(it.tval[static_cast<std::size_t>(k)] + st, r + st, c + st);
      current_pos = st + std::max(it.gh, it.gw);
    }
  }
  out.delta = current_max() + 1 - static_cast<std::int64_t>(out.axes[0].size());
  return out;
}

}  // namespace posenc_ref
