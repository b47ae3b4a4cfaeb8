// `posenc vision-positions CONFIG [--grid TxHxW] [--window] [--json] [--cos-sin --numerics
// precise|hf]`: the 2D RoPE positions of a vision tower's patches (posenc/core/
// vision_positions.h) for a VL model's config.json (posenc/io/vision_config.h).
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "options.h"
#include "output.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/vision_positions.h"
#include "posenc/io/vision_config.h"

namespace posenc::cli {
namespace {

struct Options {
  std::string config;
  std::string grid;
  bool window = false;
  bool json = false;
  bool cos_sin = false;
  std::string numerics;
};

constexpr std::int64_t kColumns = 16;  // patches per block of the table

void print_table(const VisionPositions& p, const char* const names[2]) {
  std::size_t width = 3;
  for (const auto& axis : p.ids) {
    for (std::int64_t v : axis) width = std::max(width, std::to_string(v).size());
  }
  width = std::max(width, std::to_string(p.tokens() - 1).size());
  for (std::int64_t begin = 0; begin < p.tokens(); begin += kColumns) {
    const std::int64_t end = std::min(p.tokens(), begin + kColumns);
    std::string line = "patch";
    for (std::int64_t j = begin; j < end; ++j) line += fmt::format(" {:>{}}", j, width);
    fmt::print("{}\n", line);
    for (int axis = 0; axis < 2; ++axis) {
      line = fmt::format("{:<5}", names[axis]);
      for (std::int64_t j = begin; j < end; ++j)
        line += fmt::format(" {:>{}}", p.ids[axis][static_cast<std::size_t>(j)], width);
      fmt::print("{}\n", line);
    }
    if (end < p.tokens()) fmt::print("\n");
  }
}

nlohmann::json rows(const std::vector<float>& v, std::int64_t width) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t k = 0; k < v.size(); k += static_cast<std::size_t>(width)) {
    out.push_back(std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(k),
                                      v.begin() + static_cast<std::ptrdiff_t>(k) + width));
  }
  return out;
}

void run(const Options& o) {
  if (!o.numerics.empty() && !o.cos_sin) {
    throw Error("--numerics (" + o.numerics + ") chooses how --cos-sin computes cos and sin; " +
                "give --cos-sin too");
  }
  const Numerics numerics =
      parse_numerics(o.numerics.empty() ? "precise" : o.numerics, "--numerics");
  if (o.cos_sin && numerics == Numerics::kGgml) {
    throw Error(
        "--numerics (ggml): vision-positions gives cos/sin as transformers builds them; "
        "expected precise or hf");
  }
  const VisionTowerConfig config = load_vision_tower_config(o.config);
  warn_all(config.warnings);
  const VisionTower& t = config.tower;
  const bool llama4 = t.model == VisionTowerModel::kLlama4;
  VisionGrid grid;
  if (!o.grid.empty()) {
    grid = parse_vision_grid(o.grid);
  } else if (llama4 && t.patch_size > 0) {
    grid = {1, t.image_size / t.patch_size, t.image_size / t.patch_size};
  } else {
    throw Error("--grid is required for " + std::string(vision_tower_model_name(t.model)) +
                " (TxHxW in patches, as image_grid_thw gives it)");
  }
  const VisionPositions p = vision_positions(t, grid, o.window);
  const RopeSpec spec = vision_rope_spec(t);
  const char* const names[2] = {llama4 ? "x" : "row", llama4 ? "y" : "col"};
  VisionCosSin cs;
  if (o.cos_sin) cs = vision_cos_sin(compute_frequencies(spec, numerics), t, p);
  const std::string grid_text = fmt::format("{}x{}x{}", grid.t, grid.h, grid.w);
  if (o.json) {
    nlohmann::json j{{"model_type", config.model_type},
                     {"model", std::string(vision_tower_model_name(t.model))},
                     {"grid", grid_text},
                     {"window", o.window},
                     {"head_dim", t.head_dim},
                     {"rope_theta", t.rope_theta},
                     {"sections", spec.axis_map.sections},
                     {"layout", std::string(layout_name(spec.layout))},
                     {"axes", {names[0], names[1]}},
                     {"tokens", p.tokens()},
                     {"position_ids", {p.ids[0], p.ids[1]}}};
    if (!llama4) j["spatial_merge_size"] = t.spatial_merge_size;
    if (llama4) j["class_token"] = p.tokens() - 1;
    if (o.window) j["window_index"] = p.window_index;
    if (t.model == VisionTowerModel::kQwen25Vl)
      j["fullatt_block_indexes"] = config.fullatt_block_indexes;
    if (o.cos_sin) {
      j["numerics"] = std::string(numerics_name(numerics));
      j["width"] = cs.width;
      j["cos"] = rows(cs.cos, cs.width);
      j["sin"] = rows(cs.sin, cs.width);
    }
    std::cout << j.dump() << "\n";
    return;
  }
  fmt::print("{}  ({}, {})  grid {}{}\n", o.config, config.model_type,
             vision_tower_model_name(t.model), grid_text, o.window ? "  window order" : "");
  fmt::print("head_dim {}  rope_theta {}  sections [{}, {}] ({}, {}) restarted ladder  {}\n",
             t.head_dim, t.rope_theta, spec.axis_map.sections[0], spec.axis_map.sections[1],
             names[0], names[1], layout_name(spec.layout));
  if (llama4) {
    fmt::print(
        "patches row-major, x = idx % {} + 1, y = idx / {} + 1; the class token is last "
        "(patch {}) at angle 0\n\n",
        grid.w, grid.w, p.tokens() - 1);
  } else {
    fmt::print("spatial_merge_size {}  patches in merge-block order{}  tokens {}\n\n",
               t.spatial_merge_size, o.window ? ", merge units in window order" : "", p.tokens());
  }
  print_table(p, names);
  if (!o.cos_sin) return;
  fmt::print("\ncos / sin ({}, [patches][{}]{})\n", numerics_name(numerics), cs.width,
             llama4 ? ": freqs_ci's real and imaginary parts" : ": cat(freqs, freqs)");
  print_cos_sin_rows(p.tokens(), cs.width, cs.cos, cs.sin);
}

}  // namespace

void add_vision_positions(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "vision-positions",
      "2D RoPE positions of a vision tower's patches, in the order the tower holds them "
      "(Qwen2-VL, Qwen2.5-VL, Qwen3-VL: merge-block order, --window for Qwen2.5-VL's window "
      "order; Llama 4: offset 1, class token last), and with --cos-sin the cos/sin transformers "
      "builds.");
  add_text(cmd, "config", o->config,
           "The VL model's config.json (model_type and vision_config: head size, patch_size, "
           "spatial_merge_size, window_size, image_size, rope_theta)",
           "CONFIG")
      ->required();
  add_text(cmd, "--grid", o->grid,
           "TxHxW in patches, as image_grid_thw gives it (Llama 4: 1xSxS, S = image_size / "
           "patch_size, the default)",
           "TxHxW");
  cmd->add_flag("--window", o->window,
                "Qwen2.5-VL: reorder merge units by window (get_window_index, window_size)");
  cmd->add_flag("--json", o->json,
                "One JSON object: position_ids [2][patches], axes, sections, tokens, grid (and "
                "window_index, cos, sin)");
  cmd->add_flag("--cos-sin", o->cos_sin,
                "Also cos and sin [patches][width] as transformers builds them (Qwen: width "
                "head_dim, cat(freqs, freqs); Llama 4: head_dim / 2, freqs_ci)");
  add_text(cmd, "--numerics", o->numerics,
           "With --cos-sin: precise (float64, rounded once) or hf (transformers' float32, bit "
           "for bit)",
           "NUMERICS");
  cmd->callback([o] { run(*o); });
}

}  // namespace posenc::cli
