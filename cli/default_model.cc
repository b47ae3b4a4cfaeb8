#include "default_model.h"

#include <filesystem>

#include "default_model_json.h"

namespace posenc::cli {

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
  if (options.path.empty() && options.preset.empty() && options.extend.empty())
    return kDefaultModelName;
  std::string name = !options.preset.empty() ? options.preset
                     : !options.path.empty()
                         ? std::filesystem::path(options.path).filename().string()
                         : config.source;
  if (!options.layer_type.empty()) name += " (" + options.layer_type + ")";
  if (!options.extend.empty()) name += " " + options.extend.flags();
  return name;
}

}  // namespace posenc::cli
