// cli/model_rope_sidecar.h: the RoPE a model file was fine-tuned with, read from the JSON file
// beside it (M.json next to M.bin, written by `python3 -m posenc.finetune`; docs/finetune.md), so
// that eval and generate run the model with it when no --method is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "posenc/core/method_params.h"
#include "posenc/llama/llama.h"

namespace posenc::cli {

struct RopeSidecar {
  std::string path;    // the JSON file read
  std::string method;  // a method name as --method takes it
  std::optional<double> factor;
  MethodParams params;  // beta_fast, attention_factor, ... (posenc/core/method_params.h)
  std::optional<std::int64_t> trained_context;  // the context of the fine-tuning windows
};

// The sidecar of `model_path` (its extension replaced by .json), or nullopt when there is none
// (or when model_path is that .json file itself).
// Throws Error naming the file and the key for JSON that is not an object of the known keys
// ("format": "posenc-rope-sidecar/1", "method", "factor", "trained_context", "fine_tune", and the
// keys of method_param_table(): beta_fast, attention_factor, ..., each a number (truncate: a
// boolean) or null), a method name set_method does not know, a factor or attention factor that is
// not positive, or a setting the method does not read. The model's own checks of the settings
// (spec.h validate(), e.g. beta_fast > beta_slow) come with the model: sidecar_rope_spec.
std::optional<RopeSidecar> read_rope_sidecar(const std::string& model_path);

// The sidecar's RoPE for a model of `config`: llama::rope_spec plus its parameters, validated.
// Throws Error naming the sidecar file and the key.
RopeSpec sidecar_rope_spec(const RopeSidecar& sidecar, const llama::Config& config);

// The stderr line that says which settings were taken from it.
std::string sidecar_note(const RopeSidecar& sidecar, const std::string& command);

}  // namespace posenc::cli
