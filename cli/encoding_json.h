// cli/encoding_json.h: the JSON fields every command prints about the encoding it used.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "posenc/frequencies.h"

namespace posenc::cli {

// rope_type, numerics, seq_len, head_dim, rotary_dim, rotary_offset, layout, attention_factor
// and softmax_scale_multiplier of `f` (and its spec) into the object `j`.
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
}

}  // namespace posenc::cli
