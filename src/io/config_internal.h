// src/io/config_internal.h: what config.cc (the top level of config.json) and config_rope.cc (one
// RoPE dict) share (internal).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/core/spec.h"

namespace posenc::detail {

using nlohmann::json;

// A value as JSON for a message: at most two levels deep and about 60 characters.
std::string show(const json& value);

// Parses JSON text; throws Error naming `source` and where the text is malformed (line, column).
json parse_json(std::string_view text, const std::string& source);

// A config.json's text, read with load_hf_config's rules (at most kMaxConfigBytes; refused when
// its first non-blank byte cannot start a JSON object, naming what the file looks like).
std::string read_config_text(const std::filesystem::path& path);

// The source name and the warnings collected so far.
struct Context {
  std::string source;
  std::vector<std::string> warnings;

  void warn(const std::string& what) { warnings.push_back(source + ": " + what); }
  [[noreturn]] void fail(const std::string& what) const { throw Error(source + ": " + what); }
};

// Typed access to one JSON object, remembering which keys were read. `path` prefixes keys in
// messages: "" at the top level, "rope_scaling." inside the dict. A null value reads as absent
// (Python's `dict.get(key)` gives None either way); `contains` tells the two apart.
// Every accessor throws Error naming the key, the value and the expected type.
class Fields {
 public:
  Fields(const json& object, std::string path, Context& ctx)
      : obj_(object), path_(std::move(path)), ctx_(ctx) {}

  const json& object() const { return obj_; }
  std::string name(const std::string& key) const { return path_ + key; }
  bool contains(const std::string& key) const { return obj_.contains(key); }
  bool was_read(const std::string& key) const { return read_.count(key) > 0; }
  std::vector<std::string> unread() const;  // sorted

  [[noreturn]] void fail(const std::string& key, const json& value,
                         const std::string& expected) const;

  const json* get(const std::string& key);  // marks `key` read; nullptr when absent or null
  std::optional<double> number(const std::string& key);
  // A positive integer below 2^63; an integral float (4096.0) passes with a warning.
  std::optional<std::int64_t> integer(const std::string& key);
  std::int64_t required_integer(const std::string& key, const std::string& why);
  std::optional<bool> boolean(const std::string& key);
  std::optional<std::string> string(const std::string& key);
  const json* dict(const std::string& key);  // an object, or nullptr when absent or null
  std::vector<double> number_list(const std::string& key);

 private:
  const json& obj_;
  std::string path_;
  Context& ctx_;
  std::set<std::string> read_;
};

enum class Family {
  kLlama,     // rotates the whole head for default RoPE (Llama, Mistral, Qwen2, Gemma, ...)
  kPartial,   // honours partial_rotary_factor (Phi, Phi-3, StableLM, GLM, ...)
  kGptNeox,   // rotary_pct and rotary_emb_base
  kGptj,      // rotary_dim, n_embd, n_head, n_positions; interleaved
  kDeepseek,  // qk_rope_head_dim; interleaved unless rope_interleave is false
  kChatglm,   // THUDM ChatGLM2/3, GLM-4: kv_channels, rope_ratio, half the head in pairs
};

// A partial_rotary_factor and the key that gave it, for messages.
struct Prf {
  double value;
  std::string key;
};

// What the top level gives every RoPE dict.
struct Shared {
  RopeSpec base;  // head_dim, layout, rope_theta, max_position_embeddings
  std::string model_type;
  Family family = Family::kLlama;
  std::optional<std::int64_t> top_original;      // top-level original_max_position_embeddings
  std::optional<Prf> top_prf;                    // top-level partial_rotary_factor / rotary_pct
  std::optional<std::int64_t> fixed_rotary_dim;  // GPT-J rotary_dim, DeepSeek qk_rope_head_dim
  std::string fixed_rotary_key;
};

// Reads one RoPE dict (nullptr: none, plain RoPE) at `path` ("rope_scaling", "rope_parameters",
// "rope_parameters.sliding_attention"), validates the spec and appends the warnings. `v5`: the
// dict is a rope_parameters one, where a top-level partial_rotary_factor is a default for it.
// `per_layer`: messages from validate() name `path`.
RopeSpec read_rope_dict(Context& ctx, const Shared& shared, const json* dict,
                        const std::string& path, bool v5, bool per_layer);

}  // namespace posenc::detail
