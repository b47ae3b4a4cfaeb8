// bindings.h: what the parts of the _posenc module share.
//
// Spec is the Python RopeSpec: a parsed model (ModelConfig: the spec, its source, warnings,
// layer types) plus a small cache of computed Frequencies, so that apply_rope on a decode token
// does not recompute them (a cache hit is a lookup; computing is a pow per pair).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "posenc/core/frequencies.h"
#include "posenc/io/config.h"

namespace posenc::python {

namespace py = pybind11;

class Spec {
 public:
  explicit Spec(ModelConfig config);

  const ModelConfig& config() const { return config_; }
  const RopeSpec& rope() const { return config_.spec; }

  // The Frequencies at (numerics, seq_len); seq_len is ignored (0) by methods that do not
  // depend on it. Computed once per key, kept for the last kCacheSize keys.
  std::shared_ptr<Frequencies> frequencies(Numerics numerics, std::int64_t seq_len) const;

 private:
  static constexpr std::size_t kCacheSize = 8;
  struct Entry {
    Numerics numerics;
    std::int64_t seq_len;
    std::shared_ptr<Frequencies> freqs;
  };
  ModelConfig config_;
  mutable std::vector<Entry> cache_;  // most recent last; guarded by the GIL
};

// "precise" | "hf" | "ggml", else ValueError naming `field`.
Numerics numerics_arg(const std::string& name, const std::string& field = "numerics");

void bind_spec(py::module_& m);
void bind_rope(py::module_& m);
void bind_kv_cache(py::module_& m);   // kv_cache_bindings.cc: the fused RoPE + KV-cache append
void bind_llama(py::module_& m);      // llama_bindings.cc: posenc::llama (model file, C++ logits)
void bind_attention(py::module_& m);  // attention_bindings.cc: the fused causal attention

}  // namespace posenc::python
