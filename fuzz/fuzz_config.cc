// fuzz/fuzz_config.cc: libFuzzer target for the config.json parser (config.h).
//
// Parses the input as config.json text; when it parses, computes the frequencies of the spec
// and of every per-layer spec in each numeric convention. posenc::Error is the expected way to
// refuse input; a crash, a sanitizer report, an out-of-memory or any other exception is a
// finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_common.h"
#include "posenc/core/error.h"
#include "posenc/io/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  posenc::ModelConfig config;
  try {
    config = posenc::parse_hf_config(text, "fuzz.json");
  } catch (const posenc::Error&) {
    return 0;
  }
  posenc::fuzz::exercise(config.spec);
  for (const auto& [name, spec] : config.layer_specs) posenc::fuzz::exercise(spec);
  return 0;
}
