// posenc/io/model.h: a model's RoPE from a file, whatever its format: a Hugging Face config.json
// (config.h) or a GGUF file (gguf.h).
//
//   posenc::load_model("Llama-3.1-8B/config.json").spec
//   posenc::load_model("gemma-3-4b.json", "sliding_attention").spec  // one layer type's RoPE
#pragma once

#include <filesystem>
#include <string_view>

#include "posenc/io/config.h"

namespace posenc {

// True for a name ending in .gguf (any case), or a regular file that starts with the GGUF magic.
// Other files (pipes included: they are not peeked at) are taken for config.json.
bool is_gguf_file(const std::filesystem::path& path);

// Loads `path` with load_gguf_model or load_hf_config (is_gguf_file chooses), then, when
// `layer_type` is set, selects that layer type's RoPE as select_layer_type does. Throws the
// loader's Error (naming the file) on a file that cannot be read or parsed.
ModelConfig load_model(const std::filesystem::path& path, std::string_view layer_type = {});

// Makes config.spec the RoPE of layer type `layer_type` (config.layer_specs); "" keeps the spec.
// Throws Error naming `field`, the value and the known layer types when there is no such one.
void select_layer_type(ModelConfig& config, std::string_view layer_type,
                       std::string_view field = "layer_type");

}  // namespace posenc
