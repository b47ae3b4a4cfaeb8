// `posenc inspect CONFIG`: what a model's RoPE does to each pair, and the scalars around it.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "model_source.h"
#include "options.h"
#include "posenc/analysis/pairs.h"
#include "posenc/core/dual_chunk.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/io/config.h"
#include "posenc/report/json.h"

namespace posenc::cli {
namespace {

struct InspectOptions {
  ModelSourceOptions model;
  std::optional<std::int64_t> dca_position;
  std::string numerics = "precise";
  std::int64_t seq_len = 0;
  bool json = false;
  CLI::Option* seq_len_option = nullptr;
};

// One line per group of layers: which layers rotate, with which RoPE, and which do not.
void print_layers(const ModelConfig& config) {
  const std::vector<LayerGroup> groups = layer_groups(config);
  if (groups.empty()) return;
  fmt::print("layers                    {}   (one layer's RoPE: --layer N)\n", layer_count(config));
  for (const LayerGroup& g : groups) {
    std::string what = "no RoPE (NoPE)";
    if (g.rope) {
      const RopeSpec s = *layer_spec(config, g.layers.front());
      what = fmt::format("RoPE {} theta {}{}", method_name(s), s.rope_theta,
                         s.method == Method::kNone ? "" : fmt::format(" factor {}", s.factor));
    }
    fmt::print("  {:<22}  {:>3} layers, {}: {}\n", g.type.empty() ? "(untyped)" : g.type,
               g.layers.size(), what, layer_ranges(g.layers));
  }
}

void print_attention_notes(const ModelConfig& config) {
  const AttentionNotes& a = config.attention;
  if (a.attention_chunk_size > 0) {
    fmt::print("chunked attention         {} tokens per chunk on the RoPE layers\n",
               a.attention_chunk_size);
  }
  if (a.attn_temperature_tuning) {
    fmt::print(
        "attention temperature     NoPE layers scale queries by log1p(floor((pos + 1) / {})) * {} "
        "+ 1\n",
        a.floor_scale, a.attn_scale);
  }
}

void print_dual_chunk(const ModelConfig& config, const std::optional<std::int64_t>& position) {
  if (!config.dual_chunk) return;
  const DualChunkConfig& d = *config.dual_chunk;
  fmt::print("dual chunk attention      chunk_size {}, local_size {}, chunk_len {}{}\n",
             d.chunk_size, d.local_size, d.chunk_size - d.local_size,
             position ? "" : "   (a token's rotation positions: --dca-position P)");
  if (!position) return;
  const DualChunkPositions p = dual_chunk_positions(d.chunk_size, d.local_size, *position);
  fmt::print(
      "  position {}: key {}; query intra {}, successive {}, inter {}, succ_critical {}, "
      "inter_critical {}\n",
      *position, p.key, p.intra, p.successive, p.inter, p.succ_critical, p.inter_critical);
}

std::string opt(const std::optional<double>& v, const char* format) {
  return v ? fmt::format(fmt::runtime(format), *v) : std::string("-");
}

std::string layer_title(const ModelConfig& config, const std::optional<std::int64_t>& layer) {
  if (!layer) return "";
  const auto n = static_cast<std::size_t>(*layer);
  const std::string type = n < config.layers.size() ? config.layers[n].type : "";
  return fmt::format(", layer {}{}", *layer, type.empty() ? "" : " " + type);
}

void print_table(const ModelConfig& config, const RopeSpec& spec, const Frequencies& f,
                 const std::vector<std::string>& warnings, double context,
                 const std::optional<std::int64_t>& layer,
                 const std::optional<std::int64_t>& dca_position) {
  fmt::print("{}  ({}{}{})\n", config.source,
             config.model_type.empty() ? "unknown model_type" : config.model_type,
             spec.method == Method::kNone ? "" : ", " + method_name(spec),
             layer_title(config, layer));
  fmt::print(
      "rope_type {}  head_dim {}  rotary_dim {} ({}{})  rope_theta {}  factor {}  numerics {}{}\n",
      method_name(spec), spec.head_dim, spec.rotary_dim, layout_name(spec.layout),
      spec.rotary_offset ? fmt::format(", offset {}", spec.rotary_offset) : "", spec.rope_theta,
      spec.factor, numerics_name(f.numerics),
      f.seq_len > 0 ? fmt::format("  seq_len {}", f.seq_len) : "");
  if (!config.llama_cpp_rope_type.empty()) {
    fmt::print("llama.cpp rope type {}\n", config.llama_cpp_rope_type);
  }
  // Multi-axis RoPE: which position axis each pair reads (the "axis" column).
  const bool multi = axis_count(spec) > 1;
  if (multi) {
    std::string sections;
    for (const std::int64_t v : spec.axis_map.sections)
      sections += (sections.empty() ? "" : ", ") + std::to_string(v);
    std::string axes;
    for (std::int64_t a = 0; a < spec.axis_map.axes; ++a)
      axes += (a ? ", " : "") + std::string(axis_name(spec.axis_map, a));
    fmt::print("axis map  {} [{}]  positions [{}] x tokens, axis-major ({})\n",
               axis_rule_name(spec.axis_map.rule), sections, spec.axis_map.axes, axes);
  }
  fmt::print("\n{:>5} {:>14} {:>12} {:>11} {:>7} {:>9}  {}{}\n", "pair", "inv_freq", "wavelength",
             "r = L/λ₀", "weight", "ratio", multi ? "axis  " : "", "treatment");
  for (const PairRow& r : pair_rows(f, context)) {
    fmt::print("{:>5} {:>14.7e} {:>12} {:>10} {:>7.3f} {:>9}  {}{}\n", r.index, r.inv_freq,
               opt(r.wavelength, "{:.2f}"), opt(r.rotations, "{:.3g}"), r.weight,
               opt(r.ratio, "{:.6f}"), multi ? fmt::format("{:<4}  ", r.axis) : "", r.treatment);
  }
  fmt::print(
      "\nwavelength = 2π/inv_freq in tokens; r = L/λ₀ = turns of the unscaled wavelength over L = "
      "{};\n"
      "weight = how far the pair moved from w towards w/s (0 kept, 1 interpolated); ratio = "
      "inv_freq / w\n",
      context);
  fmt::print("\nattention factor          {:.10g}   (multiplies cos and sin)\n",
             f.attention_factor);
  fmt::print("softmax-scale multiplier  {:.10g}\n", f.softmax_scale_multiplier);
  if (f.correction_low) {
    fmt::print(
        "yarn correction range     {:.10g} .. {:.10g}   (pairs below keep w, above get w/s)\n",
        *f.correction_low, *f.correction_high);
  }
  if (spec.method == Method::kDynamic || spec.method == Method::kDynamicYarn ||
      spec.method == Method::kNtk || spec.method == Method::kNtkAlpha) {
    fmt::print("in effect                 scale {:.10g}, base {:.10g}\n", f.scale, f.base);
  }
  if (spec.method == Method::kLongrope) {
    fmt::print("longrope factors          {}\n",
               f.uses_long_factors ? "long (seq_len > original context)" : "short");
  }
  if (!spec.freq_factors.empty()) {
    const auto [lo, hi] = std::minmax_element(spec.freq_factors.begin(), spec.freq_factors.end());
    fmt::print(
        "freq_factors              {} divisors, {:.7g} .. {:.7g}   (llama.cpp's rope_freqs: w_i / "
        "f_i, "
        "in every numerics)\n",
        spec.freq_factors.size(), *lo, *hi);
  }
  const ContextLengths ctx = context_lengths(spec);
  const char* assumed =
      "   (assumed: the config sets neither max_position_embeddings nor "
      "original_max_position_embeddings)";
  fmt::print("original context          {}{}\n", ctx.original,
             ctx.assumed ? assumed
             : spec.original_max_position_embeddings <= 0
                 ? "   (max_position_embeddings; no original_max_position_embeddings)"
                 : "");
  fmt::print("extended context          {}\n", ctx.extended);
  if (!config.layer_specs.empty()) {
    std::string names;
    for (const auto& [name, unused] : config.layer_specs)
      names += (names.empty() ? "" : ", ") + name;
    fmt::print("layer types               {}   (choose with --layer-type)\n", names);
  }
  print_layers(config);
  print_attention_notes(config);
  print_dual_chunk(config, dca_position);
  fmt::print("\nwarnings: {}\n", warnings.empty() ? "none" : "");
  for (const auto& w : warnings) fmt::print("  - {}\n", w);
}

void run_inspect(const InspectOptions& o) {
  const ModelConfig config = load_model_source(o.model);
  const RopeSpec& spec = config.spec;
  const Numerics numerics = parse_numerics(o.numerics, "--numerics");
  const bool by_length = depends_on_length(spec);
  if (o.seq_len_option->count() > 0 && !by_length) {
    throw Error(fmt::format(
        "--seq-len ({}) has no effect: rope_type {} (from {}) does not depend on the sequence "
        "length (only {} do)",
        o.seq_len, method_name(spec), config.source,
        methods_with(&MethodInfo::depends_on_seq_len)));
  }
  if (o.dca_position && !config.dual_chunk) {
    throw Error(fmt::format(
        "--dca-position ({}) needs a model with dual_chunk_attention_config; {} has none",
        *o.dca_position, config.source));
  }
  const bool nope = o.model.layer && !layer_spec(config, *o.model.layer);
  if (o.json) {
    std::cout << inspect_json(config, numerics, o.seq_len, o.model.layer, o.dca_position) << "\n";
    return;
  }
  if (nope) {
    fmt::print("{}  ({}{})\n\nlayer {} has no RoPE (NoPE): its queries and keys are not rotated\n",
               config.source, config.model_type, layer_title(config, o.model.layer),
               *o.model.layer);
    print_attention_notes(config);
    fmt::print("\nwarnings: {}\n", config.warnings.empty() ? "none" : "");
    for (const auto& w : config.warnings) fmt::print("  - {}\n", w);
    return;
  }
  const Frequencies f = compute_frequencies(spec, numerics, o.seq_len);
  // r = L / wavelength is counted over the original context, or the only context the model has.
  const double context = static_cast<double>(context_lengths(spec).original);
  print_table(config, spec, f, config.warnings, context, o.model.layer, o.dca_position);
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Show a model's RoPE per rotated pair: frequency, wavelength, r = L/λ, interpolation "
      "weight, ratio to the unscaled frequency; then the attention factor, the "
      "softmax-scale multiplier, the contexts and the config's warnings.");
  add_model_source_options(cmd, opts->model);
  add_text(cmd, "--numerics", opts->numerics,
           "Numeric convention: precise (float64), hf (transformers' float32) or ggml (llama.cpp's "
           "CPU rope)")
      ->capture_default_str();
  opts->seq_len_option =
      add_integer(
          cmd, "--seq-len", opts->seq_len, std::int64_t{0},
          std::numeric_limits<std::int64_t>::max(),
          "Sequence length (largest position + 1) for the methods that depend on it (dynamic, "
          "dynamic-yarn, longrope); 0 = at initialisation")
          ->capture_default_str();
  add_layer_option(cmd, opts->model);
  add_integer(cmd, "--dca-position", opts->dca_position, std::int64_t{0},
              std::numeric_limits<std::int64_t>::max(),
              "Dual chunk attention (Qwen2.5-1M): the key and five query rotation positions of "
              "the token at position P");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
  cmd->callback([opts] { run_inspect(*opts); });
}

}  // namespace posenc::cli
