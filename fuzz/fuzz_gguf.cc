// fuzz/fuzz_gguf.cc: libFuzzer target for the GGUF reader (gguf.h).
//
// Parses the input as a GGUF file; when it parses, decodes every metadata value, maps the file
// to a ModelConfig and llama.cpp's ggml_rope_ext parameters, and computes the frequencies of
// both. posenc::Error is the expected way to refuse input; a crash, a sanitizer report, an
// out-of-memory or any other exception is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_common.h"
#include "posenc/core/error.h"
#include "posenc/core/ggml.h"
#include "posenc/io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  posenc::GgufFile file;
  try {
    file = posenc::parse_gguf(std::span<const std::uint8_t>(data, size), "fuzz.gguf");
  } catch (const posenc::Error&) {
    return 0;
  }
  for (const auto& [key, value] : file.metadata) {
    (void)value.describe();
    (void)value.as_integer();
    for (std::uint64_t i = 0; i < value.count && i < 4; ++i) (void)value.number_at(i);
    for (const posenc::GgufValue& inner : value.arrays()) {
      (void)inner.describe();
      (void)inner.strings();
    }
    (void)value.strings();
  }
  try {
    const posenc::GgufModel model = posenc::gguf_model(file);
    posenc::fuzz::exercise(model.config.spec);
    if (model.ggml.n_dims <= posenc::fuzz::kMaxDims)
      (void)posenc::frequencies_from_ggml(model.ggml);
  } catch (const posenc::Error&) {
  }
  return 0;
}
