// src/analysis/engines/engines_internal.h: what the engine models share (internal). Each engine is
// one file (transformers.cc, llama_cpp.cc, vllm.cc), read by compare.cc, which holds engines.h's
// public functions: engine_view, the verdicts and compare_engines.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "posenc/analysis/engines.h"
#include "posenc/core/spec.h"
#include "util/format.h"

namespace posenc::engines_detail {

// Shortest text that reads back as the same double: 40, 1.2772588722239782, 0.001.
inline std::string num(double v) { return detail::shortest(v); }

constexpr double kFloat32Unit = 0x1p-24;  // u: relative rounding error of one float32 operation

// DeepSeek V2/V3 take their own YaRN path in llama.cpp (LLM_ARCH_DEEPSEEK2) and vLLM
// (DeepseekScalingRotaryEmbedding); Kimi K2 ships as a DeepSeek V3 architecture.
inline bool deepseek_family(const RopeSpec& spec, std::string_view model_type) {
  if (!model_type.empty()) {
    return model_type.starts_with("deepseek") || model_type == "kimi_k2";
  }
  return spec.yarn.mscale_all_dim.has_value();
}

// LongRoPE's default attention factor from the two context lengths, as vLLM's
// Phi3LongRoPEScaledRotaryEmbedding and convert_hf_to_gguf.py's Phi3MiniModel compute it:
// sqrt(1 + ln(L'/L) / ln L), 1 when L' <= L. Without L' the spec's factor stands in for L'/L.
inline double longrope_context_factor(const RopeSpec& spec) {
  const double L = static_cast<double>(spec.original_max_position_embeddings);
  const double scale = spec.max_position_embeddings > 0
                           ? static_cast<double>(spec.max_position_embeddings) / L
                           : spec.factor;
  return scale <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(scale) / std::log(L));
}

inline void mark_unsupported(EngineView& v, std::string reason) {
  v.supported = false;
  v.unsupported_reason = std::move(reason);
}

inline void finish(EngineView& v, std::int64_t seq_len) {
  v.freqs.seq_len = seq_len;
  v.attention_factor = v.freqs.attention_factor;
  v.softmax_scale_multiplier = v.freqs.softmax_scale_multiplier;
}

// Each engine's reading of `spec` (its own file).
EngineView transformers_view(const RopeSpec& spec, std::int64_t seq_len);
EngineView llama_cpp_view(const RopeSpec& spec, std::int64_t seq_len, std::string_view model_type);
EngineView vllm_view(const RopeSpec& spec, std::int64_t seq_len, std::string_view model_type);

// Notes that change no number but matter across engines (variant_notes.cc): Llama 4's pair
// layout, llama3 with low_freq_factor == high_freq_factor.
void add_variant_notes(EngineView& v, const RopeSpec& spec, std::string_view model_type);

}  // namespace posenc::engines_detail
