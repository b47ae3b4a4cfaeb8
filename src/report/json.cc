// report/json.h: the --json objects of inspect, compare and doctor, built once for the tool and
// the bindings.
#include "posenc/report/json.h"

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/analysis/doctor.h"
#include "posenc/analysis/engines.h"
#include "posenc/analysis/pairs.h"
#include "posenc/core/dual_chunk.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"
#include "report/encoding_json.h"

namespace posenc {

using detail::number_or_null;
using detail::optional_json;

namespace {

// The per-layer map, Llama 4's attention keys and dual chunk attention, where the model has them.
void put_layers_json(nlohmann::json& j, const ModelConfig& config,
                     std::optional<std::int64_t> dca_position) {
  if (!config.layers.empty()) {
    nlohmann::json groups = nlohmann::json::array();
    for (const LayerGroup& g : layer_groups(config)) {
      groups.push_back({{"type", g.type}, {"rope", g.rope}, {"layers", g.layers}});
    }
    j["layers"] = std::move(groups);
    j["num_layers"] = layer_count(config);
  }
  const AttentionNotes& a = config.attention;
  if (a.attention_chunk_size > 0 || a.attn_temperature_tuning) {
    j["attention"] = {{"attention_chunk_size", a.attention_chunk_size},
                      {"attn_temperature_tuning", a.attn_temperature_tuning},
                      {"floor_scale", a.floor_scale},
                      {"attn_scale", a.attn_scale}};
  }
  if (dca_position && !config.dual_chunk) {
    throw Error("dca_position (" + std::to_string(*dca_position) +
                ") needs a model with "
                "dual_chunk_attention_config; " +
                config.source + " has none");
  }
  if (config.dual_chunk) {
    const DualChunkConfig& d = *config.dual_chunk;
    nlohmann::json o = {{"chunk_size", d.chunk_size},
                        {"local_size", d.local_size},
                        {"chunk_len", d.chunk_size - d.local_size},
                        {"original_max_position_embeddings", d.original_max_position_embeddings}};
    if (dca_position) {
      const DualChunkPositions p = dual_chunk_positions(d.chunk_size, d.local_size, *dca_position);
      o["positions"] = {{"position", *dca_position},
                        {"key", p.key},
                        {"intra", p.intra},
                        {"successive", p.successive},
                        {"inter", p.inter},
                        {"succ_critical", p.succ_critical},
                        {"inter_critical", p.inter_critical}};
    }
    j["dual_chunk"] = std::move(o);
  }
}

}  // namespace

std::string inspect_json(const ModelConfig& config, Numerics numerics, std::int64_t seq_len,
                         std::optional<std::int64_t> layer,
                         std::optional<std::int64_t> dca_position) {
  nlohmann::json j;
  j["source"] = config.source;
  j["model_type"] = config.model_type;
  if (!config.llama_cpp_rope_type.empty()) j["llama_cpp_rope_type"] = config.llama_cpp_rope_type;
  if (layer) {
    const bool rope = layer_spec(config, *layer).has_value();
    const auto n = static_cast<std::size_t>(*layer);
    j["layer"] = *layer;
    j["layer_type"] = n < config.layers.size() ? config.layers[n].type : "";
    j["rope"] = rope;
    if (!rope) {
      put_layers_json(j, config, dca_position);
      j["warnings"] = config.warnings;
      j["ignored_keys"] = config.ignored_keys;
      return detail::json_text(j);
    }
  }
  const RopeSpec& spec = config.spec;
  const Frequencies f = compute_frequencies(spec, numerics, seq_len);  // refuses seq_len < 0
  // r = L / wavelength is counted over the original context, or the only context the model has.
  const ContextLengths ctx = context_lengths(spec);
  detail::put_encoding_json(j, f);
  j["rope_theta"] = spec.rope_theta;
  j["factor"] = spec.factor;
  j["scale_in_effect"] = f.scale;
  j["base_in_effect"] = f.base;
  j["original_max_position_embeddings"] = spec.original_max_position_embeddings;
  j["max_position_embeddings"] = spec.max_position_embeddings;
  j["original_context"] = ctx.original;
  j["extended_context"] = ctx.extended;
  j["context_assumed"] = ctx.assumed;
  j["inv_freq"] = f.inv_freq;
  j["freq_factors"] =
      spec.freq_factors.empty() ? nlohmann::json(nullptr) : nlohmann::json(spec.freq_factors);
  if (f.correction_low) j["correction_range"] = {*f.correction_low, *f.correction_high};
  nlohmann::json pairs = nlohmann::json::array();
  nlohmann::json axis_map = nlohmann::json::array();  // per slot: the axis it reads
  for (const PairRow& r : pair_rows(f, static_cast<double>(ctx.original))) {
    pairs.push_back({{"index", r.index},
                     {"inv_freq", r.inv_freq},
                     {"wavelength", optional_json(r.wavelength)},
                     {"rotations", optional_json(r.rotations)},
                     {"interpolation_weight", r.weight},
                     {"ratio_to_unscaled", optional_json(r.ratio)},
                     {"treatment", std::string(r.treatment)},
                     {"axis", std::string(r.axis)}});
    axis_map.push_back(std::string(r.axis));
  }
  j["pairs"] = std::move(pairs);
  j["axis_rule"] = std::string(axis_rule_name(spec.axis_map.rule));
  j["axis_map"] = std::move(axis_map);
  j["warnings"] = config.warnings;
  j["ignored_keys"] = config.ignored_keys;
  std::vector<std::string> layer_types;
  for (const auto& [name, unused] : config.layer_specs) layer_types.push_back(name);
  j["layer_types"] = layer_types;
  put_layers_json(j, config, dca_position);
  return detail::json_text(j);
}

std::string compare_json(const ModelConfig& config, std::int64_t seq_len,
                         const std::vector<std::int64_t>& positions) {
  const Comparison c = compare_engines(config.spec, seq_len, positions, config.model_type);
  nlohmann::json j;
  j["source"] = config.source;
  j["model_type"] = config.model_type;
  j["rope_type"] = method_name(c.spec);
  j["seq_len"] = c.seq_len;
  j["positions"] = c.positions;
  j["reference"] = "precise";
  nlohmann::json engines = nlohmann::json::array();
  for (const EngineComparison& e : c.engines) {
    nlohmann::json o;
    o["engine"] = std::string(engine_name(e.view.engine));
    o["numerics"] = e.view.freqs.inv_freq.empty()
                        ? nlohmann::json(nullptr)
                        : nlohmann::json(std::string(numerics_name(e.view.freqs.numerics)));
    o["supported"] = e.view.supported;
    o["unsupported_reason"] = e.view.unsupported_reason;
    o["inv_freq"] = e.view.freqs.inv_freq;
    nlohmann::json rel = nlohmann::json::array();
    for (double d : e.relative_difference) rel.push_back(number_or_null(d));
    o["relative_difference"] = rel;
    o["rounding_budget"] = e.budget;
    o["max_relative_difference"] = number_or_null(e.max_relative_difference);
    o["pairs_differing"] = e.pairs_differing;
    o["attention_factor"] = e.view.attention_factor;
    o["softmax_scale_multiplier"] = e.view.softmax_scale_multiplier;
    o["attention_factor_differs"] = e.attention_factor_differs;
    o["softmax_scale_differs"] = e.softmax_scale_differs;
    nlohmann::json cs = nlohmann::json::array();
    for (std::size_t k = 0; k < e.cos_sin_difference.size(); ++k) {
      cs.push_back({{"position", c.positions[k]}, {"max_abs_difference", e.cos_sin_difference[k]}});
    }
    o["cos_sin_difference"] = cs;
    o["notes"] = e.view.notes;
    o["verdict"] = std::string(verdict_name(e.verdict));
    o["verdict_text"] = e.verdict_text;
    engines.push_back(std::move(o));
  }
  j["engines"] = std::move(engines);
  return detail::json_text(j);
}

std::string doctor_json(const ModelConfig& config) { return doctor_json(config, {}); }

std::string doctor_json(const ModelConfig& config, const DoctorOptions& options) {
  const std::vector<Finding> findings = diagnose(config, options);
  const FindingCounts n = count_findings(findings);
  nlohmann::json j;
  j["source"] = config.source;
  j["model_type"] = config.model_type;
  j["rope_type"] = method_name(config.spec);
  nlohmann::json list = nlohmann::json::array();
  for (const Finding& f : findings) {
    list.push_back({{"id", f.id},
                    {"severity", f.severity},
                    {"title", f.title},
                    {"detail", f.detail},
                    {"advice", f.advice}});
  }
  j["findings"] = std::move(list);
  j["counts"] = {{"error", n.error}, {"warning", n.warning}, {"info", n.info}};
  return detail::json_text(j);
}

}  // namespace posenc
