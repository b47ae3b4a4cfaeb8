#include "model_source.h"

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "method_param_flags.h"
#include "options.h"
#include "posenc/core/error.h"
#include "posenc/io/model.h"
#include "posenc/io/presets.h"

namespace posenc::cli {
namespace {

ModelConfig load_preset(const std::string& name) {
  try {
    return posenc::load_preset(name);
  } catch (const Error& e) {
    throw Error(std::string("--preset: ") + e.what());
  }
}

constexpr const char* kExtensionGroup = "Context extension";

// Flags whose value is optional in ExtendOptions: set only when given.
void add_optional(CLI::App* cmd, const std::string& flag, std::optional<double>& field,
                  const std::string& help) {
  add_number(cmd, flag, field, help)->group(kExtensionGroup);
}

// --scaling, --target-context, --factor and the method parameters (extend.h).
void add_extension_options(CLI::App* cmd, ExtendOptions& e) {
  add_text(cmd, "--scaling", e.scaling,
           "Extend the model with this method: linear, ntk, dynamic, yarn, yarn-paper, "
           "dynamic-yarn, llama3, ntk-alpha (with --alpha), longrope (models with LongRoPE lists "
           "only) or none",
           "METHOD")
      ->group(kExtensionGroup);
  add_integer(cmd, "--target-context", e.target_context, std::numeric_limits<std::int64_t>::min(),
              std::numeric_limits<std::int64_t>::max(),
              "Context to reach: factor = N / the model's original context "
              "(original_max_position_embeddings, else max_position_embeddings)")
      ->group(kExtensionGroup);
  add_optional(cmd, "--factor", e.factor,
               "Scaling factor s (instead of --target-context, or agreeing with it)");
  add_optional(cmd, "--rope-theta", e.rope_theta, "Replace the model's RoPE base");
  add_method_param_flags(cmd, e, kExtensionGroup, true);
}

}  // namespace

void add_model_source_options(CLI::App* cmd, ModelSourceOptions& options) {
  add_text(cmd, "model", options.path, "The model: a Hugging Face config.json (or a .gguf file)",
           "PATH");
  add_text(cmd, "--preset", options.preset,
           "A built-in model preset instead of a file (see `posenc presets`)", "NAME");
  add_text(cmd, "--layer-type", options.layer_type,
           "For configs with one RoPE per layer type (transformers v5): which one", "NAME");
  add_extension_options(cmd, options.extend);
}

void add_layer_option(CLI::App* cmd, ModelSourceOptions& options) {
  add_integer(cmd, "--layer", options.layer, std::int64_t{0},
              std::numeric_limits<std::int64_t>::max(),
              "The RoPE of decoder layer N (0-based): per-layer models (Gemma 2/3, Llama 4, v5 "
              "layer_types); a layer without RoPE says so");
}

ModelConfig load_model_source(const ModelSourceOptions& o) {
  if (o.path.empty() == o.preset.empty()) {
    throw Error(o.path.empty()
                    ? "a model is required: give a config.json or .gguf file, or --preset NAME"
                    : "give either a model file (\"" + o.path + "\") or --preset (\"" + o.preset +
                          "\"), not both");
  }
  ModelConfig config = o.path.empty() ? load_preset(o.preset) : load_model(o.path);
  select_layer_type(config, o.layer_type, "--layer-type");
  if (o.layer) {
    if (!o.layer_type.empty()) {
      throw Error("--layer (" + std::to_string(*o.layer) + ") and --layer-type (\"" + o.layer_type +
                  "\") both choose a layer; give one");
    }
    std::optional<RopeSpec> spec;
    try {
      spec = layer_spec(config, *o.layer);
    } catch (const Error& e) {
      throw Error(std::string("--layer: ") + e.what());
    }
    if (spec) {
      config.spec = *spec;
    } else if (!o.extend.empty()) {
      throw Error("--layer (" + std::to_string(*o.layer) + ") of " + config.source +
                  " has no RoPE (NoPE): there is nothing for the scaling flags to extend");
    }
  }
  if (!o.extend.empty()) {
    std::vector<std::string> warnings;
    config.spec = extend_spec(config.spec, o.extend, &warnings);
    config.warnings.insert(config.warnings.end(), warnings.begin(), warnings.end());
  }
  return config;
}

}  // namespace posenc::cli
