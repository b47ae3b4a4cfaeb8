// src/io/gguf_arch.h: llama.cpp's architecture -> RoPE type table, for the GGUF mapping
// (gguf_rope.cc).
#pragma once

#include <string_view>

namespace posenc::gguf_detail {

enum class RopeType { kNone, kNorm, kNeox, kMrope, kImrope };

struct ArchRope {
  std::string_view arch;
  RopeType type;
};

// The entry for a general.architecture string, or nullptr when llama.cpp does not know it.
const ArchRope* find_arch(std::string_view arch);

}  // namespace posenc::gguf_detail
