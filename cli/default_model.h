// cli/default_model.h: the model `posenc plot` and `posenc report` use when none is given:
// Llama 2 7B extended 16x with YaRN (examples/configs/llama-2-7b-yarn16.json, built in).
#pragma once

#include "model_source.h"
#include "posenc/io/config.h"

namespace posenc::cli {

// The model the options name, or the built-in default when they name none.
ModelConfig load_model_or_default(const ModelSourceOptions& options);

// A short name for titles: "Llama 2 7B + YaRN ×16", "preset llama-3.1-8b", or the file name.
std::string model_display_name(const ModelSourceOptions& options, const ModelConfig& config);

}  // namespace posenc::cli
