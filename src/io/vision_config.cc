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

}  // namespace posenc
