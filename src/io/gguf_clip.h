// src/io/gguf_clip.h: llama.cpp's multimodal projector files (mmproj, general.architecture
// "clip") -> the vision tower's RoPE (gguf.h, GgufModel), for gguf_rope.cc.
#pragma once

#include "posenc/io/gguf.h"

namespace posenc::gguf_detail {

// The tower of an mmproj file; throws Error naming the key and value when it cannot be read.
GgufModel clip_model(const GgufFile& file);

}  // namespace posenc::gguf_detail
