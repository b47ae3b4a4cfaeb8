// fuzz/fuzz_llama_model.cc: libFuzzer target for the llama2.ts model loader (llama.h) that
// `posenc eval` and `posenc generate` read, and for what a model that loads is used for.
//
// posenc::Error is the expected way to refuse input; a crash, a sanitizer report, an
// out-of-memory or any other exception is a finding. A model that loads must also tokenize (both
// encoders agreeing) and, when it is small enough to be quick, run a forward pass.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/llama/llama.h"

namespace {

// Forward passes only for models that take microseconds: the fuzzer's budget goes to the parser.
bool small(const posenc::llama::Config& c) {
  return c.dim <= 64 && c.hidden_dim <= 256 && c.layers <= 4 && c.vocab_size <= 4096 &&
         c.heads <= 16;
}

void use(const posenc::llama::Model& model) {
  const posenc::llama::Tokenizer& tok = model.tokenizer();
  const std::string text = "Hello w\xc3\xb6rld, ab \xff\xfe end";
  const std::vector<std::int32_t> ids = tok.encode(text);
  if (ids != tok.encode_plain(text)) __builtin_trap();  // the two encoders are one algorithm
  for (std::int32_t id : ids) {
    if (id < 0 || id >= tok.size()) __builtin_trap();
  }
  (void)tok.decode(ids);

  const posenc::llama::Config& c = model.config();
  if (!small(c)) return;
  for (const char* method : {"none", "yarn", "dynamic"}) {
    try {
      posenc::llama::SessionOptions options;
      options.rope = model.rope_spec(method, 2.0);
      options.capacity = 8;
      options.step = 2;
      posenc::llama::Session session(model, options);
      std::vector<std::int32_t> tokens = {tok.bos_id()};
      for (std::int32_t id : ids) {
        if (tokens.size() == 6) break;
        tokens.push_back(id);
      }
      std::vector<float> logits(tokens.size() * static_cast<std::size_t>(c.vocab_size));
      session.forward(tokens, logits);
    } catch (const posenc::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const posenc::llama::Model model =
        posenc::llama::Model::parse(std::span<const unsigned char>(data, size), "fuzz.bin");
    use(model);
  } catch (const posenc::Error&) {
  }
  return 0;
}
