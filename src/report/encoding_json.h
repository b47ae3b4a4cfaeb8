// src/report/encoding_json.h: the JSON fields every command prints about the encoding it used
// (internal; report/json.cc and the CLI's apply and eval share it, the one header of src/ the CLI
// includes).
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "posenc/core/frequencies.h"

namespace posenc::detail {

// rope_type, numerics, seq_len, head_dim, rotary_dim, rotary_offset, layout, attention_factor
// and softmax_scale_multiplier of `f` (and its spec) into the object `j`; for a ggml_rope_multi
// call also ggml_mode and ggml_sections.
inline void put_encoding_json(nlohmann::json& j, const Frequencies& f) {
  const RopeSpec& s = f.spec;
  j["rope_type"] = method_name(s);
  j["numerics"] = std::string(numerics_name(f.numerics));
  j["seq_len"] = f.seq_len;
  j["head_dim"] = s.head_dim;
  j["rotary_dim"] = s.rotary_dim;
  j["rotary_offset"] = s.rotary_offset;
  j["layout"] = std::string(layout_name(s.layout));
  j["attention_factor"] = f.attention_factor;
  j["softmax_scale_multiplier"] = f.softmax_scale_multiplier;
  if (f.ggml && ggml_is_multi(f.ggml->mode)) {  // ggml_rope_multi: its mode and sections
    j["ggml_mode"] = std::string(ggml_mode_name(f.ggml->mode));
    j["ggml_sections"] = f.ggml->sections;
  }
}

// `j` as the tool prints it (dump(2)); text that is not UTF-8 (a file name, a GGUF string) gets
// U+FFFD for each bad byte, where dump() alone would throw.
inline std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A number, or null when it is not finite (JSON has no NaN or infinity).
inline nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// The value, or null when there is none.
inline nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace posenc::detail
