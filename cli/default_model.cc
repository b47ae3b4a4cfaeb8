#include "default_model.h"

#include <filesystem>

namespace posenc::cli {

// Kept identical to examples/configs/llama-2-7b-yarn16.json (tests/report_test checks it).
const char* const kDefaultModelJson = R"json({
  "_source": "RoPE fields of meta-llama/Llama-2-7b-hf config.json (published by Meta; it sets no rope_theta, so the default 10000 is written out here), extended 16x with YaRN: rope_scaling as transformers reads it and max_position_embeddings = 16 * 4096",
  "model_type": "llama",
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "max_position_embeddings": 65536,
  "rope_theta": 10000.0,
  "rope_scaling": {
    "rope_type": "yarn",
    "factor": 16.0,
    "original_max_position_embeddings": 4096
  }
}
)json";

namespace {
constexpr const char* kDefaultModelName = "Llama 2 7B + YaRN ×16";
}

ModelConfig load_model_or_default(const ModelSourceOptions& options) {
  // Extension flags without a model go to load_model_source, which asks for the model.
  if (options.path.empty() && options.preset.empty() && options.extend.empty()) {
    return parse_hf_config(kDefaultModelJson, "llama-2-7b-yarn16.json (built-in default)");
  }
  return load_model_source(options);
}

std::string model_display_name(const ModelSourceOptions& options, const ModelConfig& config) {
  if (options.path.empty() && options.preset.empty() && options.extend.empty()) return kDefaultModelName;
  std::string name = !options.preset.empty() ? options.preset
                     : !options.path.empty() ? std::filesystem::path(options.path).filename().string()
                                             : config.source;
  if (!options.layer_type.empty()) name += " (" + options.layer_type + ")";
  if (!options.extend.empty()) name += " " + options.extend.flags();
  return name;
}

}  // namespace posenc::cli
