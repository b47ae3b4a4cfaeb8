// Model loading whatever the file (model.h).
#include "posenc/io/model.h"

#include <cctype>
#include <fstream>
#include <string>

#include "posenc/core/error.h"
#include "posenc/io/gguf.h"

namespace posenc {

// Pipes are not peeked at: what is read here would be missing when the loader opens them again.
bool is_gguf_file(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".gguf") return true;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

// By name first, so a misnamed file gets a parse error from the loader it looks like rather
// than a guess.
ModelConfig load_model(const std::filesystem::path& path, std::string_view layer_type) {
  ModelConfig config = is_gguf_file(path) ? load_gguf_model(path).config : load_hf_config(path);
  select_layer_type(config, layer_type);
  return config;
}

void select_layer_type(ModelConfig& config, std::string_view layer_type, std::string_view field) {
  if (layer_type.empty()) return;
  const auto it = config.layer_specs.find(std::string(layer_type));
  if (it == config.layer_specs.end()) {
    std::string known;
    for (const auto& [name, unused] : config.layer_specs)
      known += (known.empty() ? "" : ", ") + name;
    throw Error(std::string(field) + " (\"" + std::string(layer_type) +
                "\") is not a layer type of " + config.source +
                (known.empty() ? " (it has a single RoPE setup)" : " (it has: " + known + ")"));
  }
  config.spec = it->second;
}

}  // namespace posenc
