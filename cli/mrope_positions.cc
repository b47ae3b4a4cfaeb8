// `posenc mrope-positions CONFIG --layout LAYOUT [--rule hf-4.5|hf-5.3] [--json] [--cos-sin
// --numerics precise|hf]`: the M-RoPE position ids [3, tokens] and rope_deltas of a prompt of
// text, images and videos (posenc/core/mrope_positions.h), for a VL model's config.json
// (posenc/io/vision_config.h), and the text rotary embedding's cos/sin at them.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "options.h"
#include "output.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/mrope_positions.h"
#include "posenc/io/config.h"
#include "posenc/io/vision_config.h"

namespace posenc::cli {
namespace {

struct Options {
  std::string config;
  std::string layout;
  std::string rule = "hf-4.5";
  bool json = false;
  bool cos_sin = false;
  std::string numerics;
};

// The text model's cos and sin at the ids, [tokens][rotary_dim], as transformers' rotary forward
// returns them after the section selection (rotary_forward_cos_sin, cat(freqs, freqs)).
struct TextCosSin {
  std::int64_t width = 0;
  std::vector<float> cos, sin;
  std::string numerics;
};

TextCosSin text_cos_sin(const Options& o, const MropePositions& p) {
  if (!o.numerics.empty() && !o.cos_sin) {
    throw Error("--numerics (" + o.numerics + ") chooses how --cos-sin computes cos and sin; " +
                "give --cos-sin too");
  }
  TextCosSin out;
  if (!o.cos_sin) return out;
  const Numerics numerics =
      parse_numerics(o.numerics.empty() ? "precise" : o.numerics, "--numerics");
  if (numerics == Numerics::kGgml) {
    throw Error(
        "--numerics (ggml): --cos-sin gives cos/sin as transformers returns them; "
        "expected precise or hf");
  }
  const ModelConfig model = load_hf_config(o.config);
  warn_all(model.warnings);
  if (axis_count(model.spec) != 3) {
    throw Error(o.config + ": the text RoPE has a " +
                std::string(axis_rule_name(model.spec.axis_map.rule)) + " axis map (" +
                std::to_string(axis_count(model.spec)) +
                " position axes); --cos-sin needs the three-axis M-RoPE of mrope_section");
  }
  std::int64_t top = 0;
  std::vector<std::int64_t> flat;
  for (const auto& axis : p.ids) {
    flat.insert(flat.end(), axis.begin(), axis.end());
    for (const std::int64_t v : axis) top = std::max(top, v);
  }
  const Frequencies f = compute_frequencies(model.spec, numerics, top + 1);
  out.width = 2 * f.pair_count();
  out.numerics = std::string(numerics_name(numerics));
  out.cos.resize(static_cast<std::size_t>(p.tokens() * out.width));
  out.sin.resize(out.cos.size());
  rotary_forward_cos_sin(f, flat, 1, true, out.cos, out.sin);
  return out;
}

nlohmann::json rows(const std::vector<float>& v, std::int64_t width) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t k = 0; k < v.size(); k += static_cast<std::size_t>(width)) {
    out.push_back(std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(k),
                                      v.begin() + static_cast<std::ptrdiff_t>(k) + width));
  }
  return out;
}

constexpr std::int64_t kColumns = 16;  // tokens per block of the table

void print_table(const MropePositions& p) {
  std::size_t width = 3;
  for (const auto& axis : p.ids) {
    for (std::int64_t v : axis) width = std::max(width, std::to_string(v).size());
  }
  width = std::max(width, std::to_string(p.tokens() - 1).size());
  const char* names[3] = {"t", "h", "w"};
  for (std::int64_t begin = 0; begin < p.tokens(); begin += kColumns) {
    const std::int64_t end = std::min(p.tokens(), begin + kColumns);
    std::string line = "token";
    for (std::int64_t j = begin; j < end; ++j) line += fmt::format(" {:>{}}", j, width);
    fmt::print("{}\n", line);
    for (int axis = 0; axis < 3; ++axis) {
      line = fmt::format("{:<5}", names[axis]);
      for (std::int64_t j = begin; j < end; ++j) {
        line += fmt::format(" {:>{}}", p.ids[axis][static_cast<std::size_t>(j)], width);
      }
      fmt::print("{}\n", line);
    }
    if (end < p.tokens()) fmt::print("\n");
  }
}

void run(const Options& o) {
  const MropeRule rule = parse_mrope_rule(o.rule);
  const std::vector<MropeSegment> layout = parse_mrope_layout(o.layout);
  const VisionConfig config = load_vision_config(o.config);
  warn_all(config.warnings);
  const MropePositions p = mrope_positions(layout, config.vision, rule);
  const TextCosSin cs = text_cos_sin(o, p);
  const MropeVision& v = config.vision;
  const MropeRule other = rule == MropeRule::kHf45 ? MropeRule::kHf53 : MropeRule::kHf45;
  const std::optional<std::int64_t> differ =
      mrope_first_difference(p, mrope_positions(layout, v, other));
  if (o.json) {
    nlohmann::json ids = nlohmann::json::array();
    for (const auto& axis : p.ids) ids.push_back(axis);
    nlohmann::json j{{"rule", std::string(mrope_rule_name(rule))},
                     {"layout", mrope_layout_text(layout)},
                     {"model_type", config.model_type},
                     {"model", std::string(mrope_model_name(v.model))},
                     {"spatial_merge_size", v.spatial_merge_size},
                     {"tokens", p.tokens()},
                     {"position_ids", std::move(ids)},
                     {"rope_deltas", p.rope_deltas}};
    j["rules_first_differ_at"] = differ ? nlohmann::json(*differ) : nlohmann::json(nullptr);
    if (v.model == MropeModel::kQwen25Vl) j["tokens_per_second"] = v.tokens_per_second;
    if (o.cos_sin) {
      j["numerics"] = cs.numerics;
      j["width"] = cs.width;
      j["cos"] = rows(cs.cos, cs.width);
      j["sin"] = rows(cs.sin, cs.width);
    }
    std::cout << j.dump() << "\n";
    return;
  }
  fmt::print("{}  ({}, {})  rule {}\n", o.config, config.model_type, mrope_model_name(v.model),
             mrope_rule_name(rule));
  fmt::print("layout {}\n", mrope_layout_text(layout));
  fmt::print("spatial_merge_size {}", v.spatial_merge_size);
  if (v.model == MropeModel::kQwen25Vl) fmt::print("  tokens_per_second {}", v.tokens_per_second);
  fmt::print("  tokens {}\n\n", p.tokens());
  print_table(p);
  const auto decode = mrope_decode_position(p.tokens(), p.rope_deltas);
  fmt::print(
      "\nrope_deltas {}  (max id + 1 - tokens; the next token, cache position {}, gets {} "
      "on every axis)\n",
      p.rope_deltas, p.tokens(), decode[0]);
  if (differ) {
    fmt::print("{} gives other ids from token {} on\n", mrope_rule_name(other), *differ);
  } else {
    fmt::print("{} gives the same ids\n", mrope_rule_name(other));
  }
  if (!o.cos_sin) return;
  fmt::print(
      "\ncos / sin ({}, [tokens][{}], the text rotary embedding's after the section "
      "selection)\n",
      cs.numerics, cs.width);
  print_cos_sin_rows(p.tokens(), cs.width, cs.cos, cs.sin);
}

}  // namespace

void add_mrope_positions(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "mrope-positions",
      "M-RoPE position ids [3, tokens] (t, h, w) and rope_deltas of a prompt of text, images and "
      "videos, as a VL model's get_rope_index builds them (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, "
      "GLM-4.1V).");
  add_text(cmd, "config", o->config,
           "The VL model's config.json (model_type, vision_config.spatial_merge_size, "
           "vision_config.tokens_per_second)",
           "CONFIG")
      ->required();
  add_text(cmd, "--layout", o->layout,
           "Segments in order: text:N, image:TxHxW, video:TxHxW@S (grid in patches, as "
           "image_grid_thw gives it; S = second_per_grid_ts), e.g. "
           "text:5,image:1x28x28,text:3,video:4x28x28@1",
           "LAYOUT")
      ->required();
  add_text(cmd, "--rule", o->rule,
           "hf-4.5: transformers <= 4.57, vLLM, llama.cpp (next text at max + 1); hf-5.3: the "
           "transformers v5 walk (next text at block start + max(H', W'))",
           "RULE");
  cmd->add_flag(
      "--json", o->json,
      "One JSON object: position_ids [3][tokens], rope_deltas, rule, layout, tokens, "
      "rules_first_differ_at (the first token the other rule places differently, or null)");
  cmd->add_flag("--cos-sin", o->cos_sin,
                "Also the text RoPE's cos and sin [tokens][rotary_dim] at these ids, as "
                "transformers returns them after the mrope_section selection (keys cos, sin)");
  add_text(cmd, "--numerics", o->numerics,
           "With --cos-sin: precise (float64, rounded once) or hf (transformers' float32, bit "
           "for bit)",
           "NUMERICS");
  cmd->callback([o] { run(*o); });
}

}  // namespace posenc::cli
