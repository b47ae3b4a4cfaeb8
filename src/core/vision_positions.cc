// Vision towers' patch positions and 2D RoPE (posenc/core/vision_positions.h has the rules).
#include "posenc/core/vision_positions.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"

namespace posenc {
namespace {

std::string grid_text(const VisionGrid& g) {
  return std::to_string(g.t) + "x" + std::to_string(g.h) + "x" + std::to_string(g.w);
}

bool is_qwen(VisionTowerModel m) { return m != VisionTowerModel::kLlama4; }

// Qwen2.5-VL get_window_index: merge units (t, h', w') row-major, regrouped window by window
// (windows row-major per t, units row-major inside a window; windows cut at the grid's edge).
std::vector<std::int64_t> window_order(const VisionTower& tower, const VisionGrid& g) {
  const std::int64_t m = tower.spatial_merge_size;
  const std::int64_t unit = m * tower.patch_size;
  if (unit <= 0 || tower.window_size <= 0 || tower.window_size % unit != 0) {
    throw Error("vision_config.window_size (" + std::to_string(tower.window_size) +
                ") must be a positive multiple of spatial_merge_size * patch_size (" +
                std::to_string(m) + " * " + std::to_string(tower.patch_size) + " = " +
                std::to_string(unit) + ") for the window order");
  }
  const std::int64_t win = tower.window_size / unit;
  const std::int64_t hh = g.h / m, ww = g.w / m;
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(g.t * hh * ww));
  for (std::int64_t t = 0; t < g.t; ++t) {
    for (std::int64_t wr = 0; wr < hh; wr += win) {
      for (std::int64_t wc = 0; wc < ww; wc += win) {
        for (std::int64_t r = wr; r < std::min(hh, wr + win); ++r) {
          for (std::int64_t c = wc; c < std::min(ww, wc + win); ++c)
            order.push_back((t * hh + r) * ww + c);
        }
      }
    }
  }
  return order;
}

}  // namespace

std::string_view vision_tower_model_name(VisionTowerModel model) {
  switch (model) {
    case VisionTowerModel::kQwen2Vl:
      return "qwen2-vl";
    case VisionTowerModel::kQwen25Vl:
      return "qwen2.5-vl";
    case VisionTowerModel::kQwen3Vl:
      return "qwen3-vl";
    case VisionTowerModel::kLlama4:
      return "llama4";
  }
  return "qwen2-vl";
}

VisionGrid parse_vision_grid(std::string_view text) {
  VisionGrid g;
  std::int64_t* dims[3] = {&g.t, &g.h, &g.w};
  std::string_view rest = text;
  for (int i = 0; i < 3; ++i) {
    const std::size_t x = rest.find('x');
    if ((i < 2) != (x != std::string_view::npos)) {
      throw Error("--grid (" + std::string(text) + ") must be TxHxW, three sizes in patches");
    }
    const std::string_view part = i < 2 ? rest.substr(0, x) : rest;
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v < 1) {
      throw Error("--grid (" + std::string(text) + "): \"" + std::string(part) +
                  "\" must be an integer >= 1 (TxHxW, sizes in patches)");
    }
    *dims[i] = v;
    if (i < 2) rest = rest.substr(x + 1);
  }
  return g;
}

VisionPositions vision_positions(const VisionTower& tower, const VisionGrid& g, bool window) {
  const std::string label = "grid " + grid_text(g);
  if (g.t < 1 || g.h < 1 || g.w < 1) {
    throw Error(label + ": every size must be an integer >= 1");
  }
  if (g.h > kMaxVisionPatches || g.w > kMaxVisionPatches || g.t > kMaxVisionPatches / g.h / g.w) {
    throw Error(label + " has more than " + std::to_string(kMaxVisionPatches) + " patches");
  }
  if (window && tower.model != VisionTowerModel::kQwen25Vl) {
    throw Error("--window: only Qwen2.5-VL's tower has window attention (get_window_index); " +
                std::string(vision_tower_model_name(tower.model)) + "'s has none");
  }
  VisionPositions p;
  if (!is_qwen(tower.model)) {
    const std::int64_t side =
        tower.patch_size > 0 ? tower.image_size / tower.patch_size : std::int64_t{0};
    if (side < 1 || tower.image_size % tower.patch_size != 0) {
      throw Error("vision_config.image_size (" + std::to_string(tower.image_size) +
                  ") must be a positive multiple of patch_size (" +
                  std::to_string(tower.patch_size) + ")");
    }
    if (g.t != 1 || g.h != g.w || g.h != side) {
      throw Error(label + ": Llama 4's vision RoPE is built for one square tile of image_size / " +
                  "patch_size = " + std::to_string(side) + " patches a side (1x" +
                  std::to_string(side) + "x" + std::to_string(side) + ")");
    }
    for (std::int64_t idx = 0; idx < side * side; ++idx) {
      p.ids[0].push_back(idx % side + 1);
      p.ids[1].push_back(idx / side + 1);
    }
    p.ids[0].push_back(0);  // the class token, appended after the patches: angle 0
    p.ids[1].push_back(0);
    return p;
  }
  const std::int64_t m = tower.spatial_merge_size;
  if (m < 1) {
    throw Error("vision_config.spatial_merge_size (" + std::to_string(m) + ") must be >= 1");
  }
  if (g.h % m != 0 || g.w % m != 0) {
    throw Error(label + ": H (" + std::to_string(g.h) + ") and W (" + std::to_string(g.w) +
                ") must be multiples of spatial_merge_size (" + std::to_string(m) + ")");
  }
  // One merge unit (m x m patches, row-major inside) after another, units row-major.
  std::vector<std::int64_t> rows, cols;
  for (std::int64_t br = 0; br < g.h / m; ++br) {
    for (std::int64_t bc = 0; bc < g.w / m; ++bc) {
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < m; ++j) {
          rows.push_back(br * m + i);
          cols.push_back(bc * m + j);
        }
      }
    }
  }
  for (std::int64_t t = 0; t < g.t; ++t) {
    p.ids[0].insert(p.ids[0].end(), rows.begin(), rows.end());
    p.ids[1].insert(p.ids[1].end(), cols.begin(), cols.end());
  }
  if (window) {
    p.window_index = window_order(tower, g);
    const auto unit = static_cast<std::size_t>(m * m);
    std::array<std::vector<std::int64_t>, 2> ordered;
    for (int a = 0; a < 2; ++a) {
      ordered[a].reserve(p.ids[a].size());
      for (const std::int64_t u : p.window_index) {
        const auto from =
            p.ids[a].begin() + static_cast<std::ptrdiff_t>(u) * static_cast<std::ptrdiff_t>(unit);
        ordered[a].insert(ordered[a].end(), from, from + static_cast<std::ptrdiff_t>(unit));
      }
    }
    p.ids = std::move(ordered);
  }
  return p;
}

RopeSpec vision_rope_spec(const VisionTower& tower) {
  if (tower.head_dim <= 0 || tower.head_dim % 4 != 0) {
    throw Error("vision head_dim (" + std::to_string(tower.head_dim) +
                ") must be a positive multiple of 4: two axes of head_dim / 4 pairs each");
  }
  RopeSpec spec;
  spec.head_dim = tower.head_dim;
  spec.rotary_dim = tower.head_dim;
  spec.rope_theta = tower.rope_theta;
  spec.layout = is_qwen(tower.model) ? Layout::kHalfSplit : Layout::kInterleaved;
  const std::int64_t quarter = tower.head_dim / 4;
  const std::int64_t sections[2] = {quarter, quarter};
  spec.axis_map = vision_sections(sections);
  return spec;
}

VisionCosSin vision_cos_sin(const Frequencies& freqs, const VisionTower& tower,
                            const VisionPositions& positions) {
  if (freqs.spec.axis_map.rule != AxisRule::kVision || freqs.spec.axis_map.axes != 2) {
    throw Error("vision_cos_sin: the frequencies' axis map (" +
                std::string(axis_rule_name(freqs.spec.axis_map.rule)) +
                ") must be a two-axis vision map (vision_rope_spec)");
  }
  const std::int64_t tokens = positions.tokens();
  std::vector<std::int64_t> flat(positions.ids[0]);
  flat.insert(flat.end(), positions.ids[1].begin(), positions.ids[1].end());
  VisionCosSin out;
  // Qwen: one [tokens, head_dim] emb; Llama 4: freqs [tokens, 1, head_dim / 2], which is the
  // un-catted [batch, n, seq] memory with batch = tokens and seq = 1.
  const bool cat = is_qwen(tower.model);
  out.width = cat ? 2 * freqs.pair_count() : freqs.pair_count();
  const auto size = static_cast<std::size_t>(tokens * out.width);
  out.cos.resize(size);
  out.sin.resize(size);
  if (tokens == 0) return out;
  rotary_forward_cos_sin(freqs, flat, cat ? 1 : tokens, cat, out.cos, out.sin);
  return out;
}

}  // namespace posenc
