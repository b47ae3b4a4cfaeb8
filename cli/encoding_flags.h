// cli/encoding_flags.h: a RoPE given on the command line, in one of two vocabularies:
//   - a RopeSpec: a model (config.json, --config, --preset) and/or one flag per docs/design.md §3
//     parameter (--rope-type, --rope-theta, --factor, ...), flags overriding the model's values;
//   - ggml_rope_ext's own parameters (--n-dims, --mode, --freq-base, ...), so that a llama.cpp
//     call can be reproduced exactly.
// Mixing the two is an error that names the flags of each kind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "model_source.h"
#include "posenc/core/ggml.h"
#include "posenc/core/method_params.h"
#include "posenc/core/spec.h"
#include "posenc/io/npy.h"

namespace posenc::cli {

// The method parameters (--beta-fast, --attention-factor, ...: core/method_params.h), and the
// flags of the rest of a RopeSpec.
struct SpecFlags : MethodParams {
  std::optional<std::string> rope_type;
  std::optional<std::int64_t> head_dim;
  std::optional<std::int64_t> rotary_dim;
  std::optional<std::int64_t> rotary_offset;
  std::optional<std::string> layout;
  std::optional<double> rope_theta;
  std::optional<double> factor;
  std::optional<std::int64_t> original_max_position_embeddings;
  std::optional<std::int64_t> max_position_embeddings;
  // beta_fast and beta_slow are shared with the ggml vocabulary.
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  std::optional<double> partial_rotary_factor;
};

struct GgmlFlags {
  std::optional<int> n_dims;
  std::optional<std::string> mode;
  std::optional<int> n_ctx_orig;
  std::optional<float> freq_base;
  std::optional<float> freq_scale;
  std::optional<float> ext_factor;
  std::optional<float> attn_factor;
  std::optional<std::string> freq_factors;  // a float32 .npy file
  std::optional<std::string> sections;      // "A,B,C,D": ggml_rope_multi's sections
};

struct EncodingFlags {
  ModelSourceOptions
      model;           // positional CONFIG, --preset, --layer-type (never its extension flags)
  std::string config;  // --config, the same as the positional
  SpecFlags spec;
  GgmlFlags ggml;

  // The registered options of each vocabulary, to tell which were given.
  std::vector<CLI::Option*> spec_options;
  std::vector<CLI::Option*> ggml_options;
  std::vector<CLI::Option*> model_options;
  std::vector<CLI::Option*> shared_options;  // --beta-fast, --beta-slow
  CLI::Option* short_factor_option = nullptr;
  CLI::Option* long_factor_option = nullptr;
};

// Registers every flag on `cmd`, in option groups "Encoding" and "ggml_rope_ext parameters".
void add_encoding_flags(CLI::App* cmd, EncodingFlags& flags);

// True when a ggml_rope_ext parameter (other than --beta-fast/--beta-slow, which both
// vocabularies share) was given. Throws Error naming the flags when both kinds were given.
bool uses_ggml_params(const EncodingFlags& flags);

// The RopeSpec of the model and the spec flags. Without a model, head_dim defaults to
// `tensor_head_dim` and rotary_dim to head_dim * partial_rotary_factor (head_dim for
// proportional). Appends the model's warnings. Throws Error naming every flag the resulting
// method does not read (it would change nothing).
// `source` receives where the spec came from ("llama.json + flags", "flags").
RopeSpec spec_from_flags(const EncodingFlags& flags, std::int64_t tensor_head_dim,
                         std::vector<std::string>& warnings, std::string& source);

// ggml_rope_ext's parameters, with ggml's defaults where a flag is absent and n_dims defaulting
// to `tensor_head_dim`. Validated (throws Error naming the parameter).
GgmlRopeParams ggml_params_from_flags(const EncodingFlags& flags, std::int64_t tensor_head_dim);

// read_npy, with `flag` in front of any error: "--q: cannot read q.npy: No such file or directory".
NpyArray read_npy_flag(const std::string& flag, const std::string& path);

// "--a, --b" for the options among `options` that were given.
std::string given_names(const std::vector<CLI::Option*>& options);

}  // namespace posenc::cli
