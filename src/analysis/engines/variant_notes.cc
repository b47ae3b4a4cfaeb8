// Engine notes for the RoPE variants of issue 12 item 6 that change no frequency but matter when
// engines are compared: Llama 4's pair layout and llama3 with low_freq_factor == high_freq_factor
// (../shared/docs/rope-in-engines.md section 2, "Llama 4 detail").
#include <string>
#include <string_view>

#include "analysis/engines/engines_internal.h"

namespace posenc::engines_detail {

void add_variant_notes(EngineView& v, const RopeSpec& spec, std::string_view model_type) {
  const std::string n = std::to_string(spec.rotary_dim / 2);
  if (model_type.starts_with("llama4") && spec.layout == Layout::kInterleaved) {
    if (v.engine == Engine::kTransformers) {
      v.notes.push_back(
          "Llama 4: rotates adjacent pairs (2i, 2i + 1) by a complex multiply "
          "(Llama4TextRotaryEmbedding)");
    } else if (v.engine == Engine::kVllm) {
      v.notes.push_back(
          "Llama 4: permutes the q/k weights at load (permute_qk_weight_for_rotary: "
          "w.view(heads, " +
          n + ", 2, in).transpose(1, 2)) and rotates halves (i, i + " + n +
          "): the same attention scores, but its raw q/k put transformers' dim 2i at i and "
          "2i + 1 at i + " +
          n + " (SGLang does the same)");
    }
  }
  if (spec.method == Method::kLlama3 &&
      spec.llama3.low_freq_factor == spec.llama3.high_freq_factor) {
    const std::string f = num(spec.llama3.low_freq_factor);
    if (v.engine == Engine::kTransformers) {
      v.notes.push_back("low_freq_factor == high_freq_factor (" + f +
                        "): the smooth term divides by 0, and torch.where discards it (only a "
                        "pair with wavelength exactly L would take the NaN)");
    } else if (v.engine == Engine::kVllm) {
      v.notes.push_back("low_freq_factor == high_freq_factor (" + f +
                        "): Llama3RotaryEmbedding guards the 0/0 (smooth = 0)");
    } else if (v.engine == Engine::kLlamaCpp) {
      v.notes.push_back(
          "low_freq_factor == high_freq_factor (" + f +
          "): convert_hf_to_gguf.py's rope_freqs loop divides by 0 only for a pair whose "
          "wavelength is exactly L (if/elif/else per pair), so rope_freqs holds no NaN");
    }
  }
}

}  // namespace posenc::engines_detail
