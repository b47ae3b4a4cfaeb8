// The few keys of a VL config.json that M-RoPE positions read (posenc/io/vision_config.h).
#include "posenc/io/vision_config.h"

#include <cmath>
#include <span>
#include <utility>

#include "io/config_internal.h"
#include "posenc/io/config.h"
#include "util/format.h"

namespace posenc {
namespace {

using detail::json;

constexpr std::pair<std::string_view, MropeModel> kModelTypes[] = {
    {"qwen2_vl", MropeModel::kQwen2Vl}, {"qwen2_5_vl", MropeModel::kQwen25Vl},
    {"qwen3_vl", MropeModel::kQwen3Vl}, {"qwen3_vl_moe", MropeModel::kQwen3Vl},
    {"glm4v", MropeModel::kGlm4v},      {"glm4v_moe", MropeModel::kGlm4v},
};

}  // namespace

std::optional<MropeModel> mrope_model_for_type(std::string_view model_type) {
  for (const auto& [type, model] : kModelTypes) {
    if (type == model_type) return model;
  }
  return std::nullopt;
}

VisionConfig parse_vision_config(std::string_view json_text, std::string_view source) {
  detail::Context ctx{std::string(source), {}};
  const json root = detail::parse_json(json_text, ctx.source);
  if (!root.is_object()) {
    ctx.fail("the top level (" + detail::show(root) + ") must be a JSON object");
  }
  detail::Fields top(root, "", ctx);
  VisionConfig out;
  const auto model_type = top.string("model_type");
  if (!model_type) ctx.fail("model_type is missing; the M-RoPE position rule depends on it");
  out.model_type = *model_type;
  std::string known;
  bool found = false;
  for (const auto& [type, model] : kModelTypes) {
    known += (known.empty() ? "" : ", ") + std::string(type);
    if (type == *model_type) {
      out.vision.model = model;
      found = true;
    }
  }
  if (!found) {
    ctx.fail(
        "model_type (\"" + *model_type +
        "\") has no M-RoPE position rule in posenc; expected a vision-language model: " + known);
  }
  const bool qwen25 = out.vision.model == MropeModel::kQwen25Vl;
  const json empty = json::object();
  const json* vc = top.dict("vision_config");
  detail::Fields vision(vc ? *vc : empty, "vision_config.", ctx);
  if (auto m = vision.integer("spatial_merge_size")) {
    out.vision.spatial_merge_size = *m;
  } else {
    out.vision.spatial_merge_size = kDefaultSpatialMergeSize;
    ctx.warn("vision_config.spatial_merge_size is missing; using transformers' default " +
             std::to_string(kDefaultSpatialMergeSize));
  }
  const std::optional<double> tps = vision.number("tokens_per_second");
  if (qwen25) {
    if (tps && !(std::isfinite(*tps) && *tps > 0)) {
      vision.fail("tokens_per_second", vc->at("tokens_per_second"), "must be a finite number > 0");
    }
    out.vision.tokens_per_second = tps.value_or(kQwen25VlDefaultTokensPerSecond);
    if (!tps) {
      ctx.warn(
          "vision_config.tokens_per_second is missing; using Qwen2_5_VLVisionConfig's "
          "default " +
          detail::num(kQwen25VlDefaultTokensPerSecond) +
          " (the released Qwen2.5-VL checkpoints set 2)");
    }
  } else if (tps) {
    ctx.warn("vision_config.tokens_per_second (" + detail::num(*tps) + ") is not read by " +
             std::string(mrope_model_name(out.vision.model)) +
             "'s position rule (only Qwen2.5-VL scales temporal ids by it)");
  }
  out.warnings = std::move(ctx.warnings);
  return out;
}

VisionConfig load_vision_config(const std::filesystem::path& path) {
  return parse_vision_config(detail::read_config_text(path), path.string());
}

namespace {

constexpr std::pair<std::string_view, VisionTowerModel> kTowerTypes[] = {
    {"qwen2_vl", VisionTowerModel::kQwen2Vl}, {"qwen2_5_vl", VisionTowerModel::kQwen25Vl},
    {"qwen3_vl", VisionTowerModel::kQwen3Vl}, {"qwen3_vl_moe", VisionTowerModel::kQwen3Vl},
    {"llama4", VisionTowerModel::kLlama4},
};

// A size key of vision_config: a positive integer (Fields::integer), or `fallback` with a warning when absent.
std::int64_t size_or(detail::Fields& vision, detail::Context& ctx, const std::string& key,
                     std::int64_t fallback, std::string_view config_class) {
  if (auto v = vision.integer(key)) return *v;
  ctx.warn("vision_config." + key + " is missing; using " + std::string(config_class) +
           "'s default " + std::to_string(fallback));
  return fallback;
}

}  // namespace

VisionTowerConfig parse_vision_tower_config(std::string_view json_text, std::string_view source) {
  detail::Context ctx{std::string(source), {}};
  const json root = detail::parse_json(json_text, ctx.source);
  if (!root.is_object()) {
    ctx.fail("the top level (" + detail::show(root) + ") must be a JSON object");
  }
  detail::Fields top(root, "", ctx);
  VisionTowerConfig out;
  const auto model_type = top.string("model_type");
  if (!model_type) ctx.fail("model_type is missing; the vision tower's RoPE depends on it");
  out.model_type = *model_type;
  std::string known;
  bool found = false;
  for (const auto& [type, model] : kTowerTypes) {
    known += (known.empty() ? "" : ", ") + std::string(type);
    if (type == *model_type) {
      out.tower.model = model;
      found = true;
    }
  }
  if (!found) {
    ctx.fail("model_type (\"" + *model_type +
             "\") has no vision tower RoPE in posenc; expected one of " + known);
  }
  const json* vc = top.dict("vision_config");
  if (!vc) ctx.fail("vision_config is missing; the vision tower's sizes are read from it");
  detail::Fields vision(*vc, "vision_config.", ctx);
  VisionTower& t = out.tower;
  const VisionTowerModel m = t.model;
  const bool llama4 = m == VisionTowerModel::kLlama4;
  const std::string hidden_key = m == VisionTowerModel::kQwen2Vl ? "embed_dim" : "hidden_size";
  const std::string heads_key = llama4 ? "num_attention_heads" : "num_heads";
  const std::int64_t hidden = vision.required_integer(
      hidden_key, "for the vision head size (" + hidden_key + " / " + heads_key + ")");
  const std::int64_t heads = vision.required_integer(
      heads_key, "for the vision head size (" + hidden_key + " / " + heads_key + ")");
  if (hidden % heads != 0) {
    ctx.fail("vision_config." + hidden_key + " (" + std::to_string(hidden) +
             ") must be a multiple of vision_config." + heads_key + " (" + std::to_string(heads) +
             "): the head size is their quotient");
  }
  t.head_dim = hidden / heads;
  const std::string_view cls = m == VisionTowerModel::kQwen2Vl    ? "Qwen2VLVisionConfig"
                               : m == VisionTowerModel::kQwen25Vl ? "Qwen2_5_VLVisionConfig"
                               : m == VisionTowerModel::kQwen3Vl  ? "Qwen3VLVisionConfig"
                                                                  : "Llama4VisionConfig";
  if (llama4) {
    t.patch_size = size_or(vision, ctx, "patch_size", 14, cls);
    t.image_size = size_or(vision, ctx, "image_size", 448, cls);
    t.spatial_merge_size = 1;
    if (auto theta = vision.number("rope_theta")) {
      if (!(std::isfinite(*theta) && *theta > 1)) {
        vision.fail("rope_theta", vc->at("rope_theta"), "must be a finite number > 1");
      }
      t.rope_theta = *theta;
    } else {
      ctx.warn("vision_config.rope_theta is missing; using Llama4VisionConfig's default 10000");
    }
    out.warnings = std::move(ctx.warnings);
    return out;
  }
  // VisionRotaryEmbedding(head_dim // 2) keeps its default theta 10000: no key sets it.
  t.rope_theta = 10000.0;
  t.patch_size = size_or(vision, ctx, "patch_size", m == VisionTowerModel::kQwen3Vl ? 16 : 14, cls);
  t.spatial_merge_size = size_or(vision, ctx, "spatial_merge_size", kDefaultSpatialMergeSize, cls);
  if (m == VisionTowerModel::kQwen25Vl) {
    t.window_size = size_or(vision, ctx, "window_size", 112, cls);
    if (vision.contains("fullatt_block_indexes")) {
      for (const double v : vision.number_list("fullatt_block_indexes")) {
        if (!(v >= 0 && v == std::floor(v) && v < 1e9)) {
          vision.fail("fullatt_block_indexes", vc->at("fullatt_block_indexes"),
                      "must be a list of layer indices (integers >= 0)");
        }
        out.fullatt_block_indexes.push_back(static_cast<std::int64_t>(v));
      }
    }
  }
  out.warnings = std::move(ctx.warnings);
  return out;
}

VisionTowerConfig load_vision_tower_config(const std::filesystem::path& path) {
  return parse_vision_tower_config(detail::read_config_text(path), path.string());
}

}  // namespace posenc
