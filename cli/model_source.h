// cli/model_source.h: where a command gets its model's RoPE from. Every command that takes a
// model accepts the same options: a positional CONFIG.json or GGUF file, or --preset NAME, plus
// --layer-type for configs with one RoPE per layer type, and the flags that extend the model
// with a scaling method of the user's choice (--scaling, --target-context, ...; extend.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "posenc/io/config.h"
#include "posenc/io/extend.h"

namespace posenc::cli {

struct ModelSourceOptions {
  std::string path;                   // config.json or .gguf
  std::string preset;                 // --preset NAME
  std::string layer_type;             // --layer-type NAME
  std::optional<std::int64_t> layer;  // --layer N (commands that register it: inspect)
  ExtendOptions extend;  // --scaling, --target-context, --factor and the method parameters
};

// Registers the positional model argument, --preset, --layer-type and the extension flags on
// `cmd`.
void add_model_source_options(CLI::App* cmd, ModelSourceOptions& options);

// Registers --layer N: the RoPE of decoder layer N (layer_spec()).
void add_layer_option(CLI::App* cmd, ModelSourceOptions& options);

// Loads the model the options name; throws Error naming the option when none or both are given.
// The returned ModelConfig's spec is the chosen layer type's when --layer-type is set (layer N's
// with --layer, left as it is for a layer without RoPE, which cannot be extended), extended
// as the extension flags ask (their warnings are appended to the config's).
ModelConfig load_model_source(const ModelSourceOptions& options);

}  // namespace posenc::cli
