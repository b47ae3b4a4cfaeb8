// The per-layer queries of a parsed ModelConfig (config.h): layer N's RoPE, the layers grouped by
// type, and their ranges as inspect prints them. The parser that fills config.layers is config.cc.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/io/config.h"

namespace posenc {

std::int64_t layer_count(const ModelConfig& config) {
  return config.layers.empty() ? config.num_hidden_layers
                               : static_cast<std::int64_t>(config.layers.size());
}

std::optional<RopeSpec> layer_spec(const ModelConfig& config, std::int64_t layer) {
  const std::int64_t n = layer_count(config);
  if (layer < 0 || (n > 0 && layer >= n)) {
    throw Error("layer (" + std::to_string(layer) + ") is out of range: " + config.source +
                (n > 0 ? " has " + std::to_string(n) + " layers, 0 .. " + std::to_string(n - 1)
                       : " numbers its layers from 0"));
  }
  if (config.layers.empty()) return config.spec;
  const LayerRope& l = config.layers[static_cast<std::size_t>(layer)];
  if (!l.rope) return std::nullopt;
  const auto it = config.layer_specs.find(l.type);
  return it != config.layer_specs.end() ? it->second : config.spec;
}

std::vector<LayerGroup> layer_groups(const ModelConfig& config) {
  std::vector<LayerGroup> groups;
  for (std::size_t i = 0; i < config.layers.size(); ++i) {
    const LayerRope& l = config.layers[i];
    auto g = std::find_if(groups.begin(), groups.end(), [&](const LayerGroup& x) {
      return x.type == l.type && x.rope == l.rope;
    });
    if (g == groups.end()) g = groups.insert(groups.end(), LayerGroup{l.type, l.rope, {}});
    g->layers.push_back(static_cast<std::int64_t>(i));
  }
  return groups;
}

std::string layer_ranges(const std::vector<std::int64_t>& layers) {
  std::string out;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(layers[i]);
    if (j > i) out += "-" + std::to_string(layers[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace posenc
