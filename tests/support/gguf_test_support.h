// tests/support/gguf_test_support.h: what the GGUF tests share: the shared files' paths, the
// smallest Llama-like file, and the error (or model) a file's bytes give (test-only);
// HasWarning is support/matchers.h's.
#pragma once

#include <gmock/gmock.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/io/gguf.h"
#include "support/config_test_support.h"
#include "support/error_of.h"
#include "support/gguf_writer.h"
#include "support/matchers.h"

namespace posenc::testing {

using W = GgufWriter;

inline std::string gguf_path(std::string_view name) {
  return std::string(POSENC_SHARED_DIR) + "/testdata/gguf/" + std::string(name);
}

// The message of the Error that parsing (and mapping) `bytes` throws; "(no error)" when none.
inline std::string error_of(const std::vector<std::uint8_t>& bytes) {
  return error_of([&] { gguf_model(parse_gguf(bytes, "t.gguf")); });
}

inline GgufModel model_of(const std::vector<std::uint8_t>& bytes) {
  return gguf_model(parse_gguf(bytes, "t.gguf"));
}

// The smallest Llama-like file: 8 heads of 8 dims.
inline GgufWriter tiny_llama() {
  GgufWriter w;
  w.kv("general.architecture", W::str("llama"))
      .kv("llama.context_length", W::u32(512))
      .kv("llama.embedding_length", W::u32(64))
      .kv("llama.attention.head_count", W::u32(8))
      .kv("llama.rope.dimension_count", W::u32(8))
      .kv("llama.rope.freq_base", W::f32(10000.0f));
  return w;
}

}  // namespace posenc::testing
