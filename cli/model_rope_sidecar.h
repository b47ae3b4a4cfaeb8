// cli/model_rope_sidecar.h: the RoPE a model file was fine-tuned with, read from the JSON file
// beside it (M.json next to M.bin, written by `python3 -m posenc.finetune`; docs/finetune.md), so
// that eval and generate run the model with it when no --method is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace posenc::cli {

struct RopeSidecar {
  std::string path;    // the JSON file read
  std::string method;  // a method name as --method takes it
  std::optional<double> factor;
  std::optional<double> attention_factor;
  std::optional<std::int64_t> trained_context;  // the context of the fine-tuning windows
};

// The sidecar of `model_path` (its extension replaced by .json), or nullopt when there is none.
// Throws Error naming the file and the key for JSON that is not an object of the known keys
// ("format": "posenc-rope-sidecar/1", "method", "factor", "attention_factor", "trained_context",
// "fine_tune"), a method name set_method does not know, or a factor that is not positive.
std::optional<RopeSidecar> read_rope_sidecar(const std::string& model_path);

// The stderr line that says which settings were taken from it.
std::string sidecar_note(const RopeSidecar& sidecar, const std::string& command);

}  // namespace posenc::cli
