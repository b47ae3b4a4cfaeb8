// llama.cpp's reading of a RopeSpec: what convert_hf_to_gguf.py writes, read back by
// llama_model::load_hparams and adjusted in the llama_context constructor, then ggml_rope_ext
// (kGgml). The rules come from the engine's sources, cited where applied; docs/engines.md
// collects them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "analysis/engines/engines_internal.h"
#include "core/ggml_model.h"
#include "core/max_nan.h"
#include "core/methods.h"
#include "posenc/analysis/engines.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/ggml.h"
#include "util/format.h"

namespace posenc::engines_detail {
namespace {
GgmlRopeParams plain_ggml_params(const RopeSpec& spec) {
  RopeSpec plain = spec;
  plain.method = Method::kNone;
  plain.factor = 1.0;
  return ggml_params_from_spec(plain, 0);
}

GgmlRopeParams llama_cpp_yarn(const RopeSpec& spec, bool deepseek, std::vector<std::string>& notes,
                              float& softmax_multiplier) {
  const YarnParams& y = spec.yarn;
  GgmlRopeParams p = plain_ggml_params(spec);
  const float factor = static_cast<float>(spec.factor);
  p.freq_scale = 1.0f / factor;
  // llama_context: yarn_ext_factor < 0 ("not set") becomes 1 for LLAMA_ROPE_SCALING_TYPE_YARN.
  // The converter writes extrapolation_factor as rope.scaling.yarn_ext_factor, but only a few
  // architectures (Grok) load it.
  p.ext_factor = 1.0f;
  if (y.extrapolation_factor != kYarnExtrapolationFactor) {
    notes.push_back("uses extrapolation_factor 1, not " + num(y.extrapolation_factor) +
                    ": rope.scaling.yarn_ext_factor is loaded only by some architectures (Grok)");
  }
  p.n_ctx_orig = static_cast<int>(spec.original_max_position_embeddings);
  // llama_hparams defaults; rope.scaling.yarn_beta_fast/slow are loaded only by some architectures.
  p.beta_fast = static_cast<float>(kYarnBetaFast);
  p.beta_slow = static_cast<float>(kYarnBetaSlow);
  if (y.beta_fast != kYarnBetaFast || y.beta_slow != kYarnBetaSlow) {
    notes.push_back("uses beta_fast 32 and beta_slow 1, not " + num(y.beta_fast) + " and " +
                    num(y.beta_slow) +
                    ": the GGUF keys are loaded only by some architectures (Grok)");
  }
  if (!y.truncate) {
    notes.push_back(
        "ignores truncate: false: ggml_rope_yarn_corr_dims always floors and ceils the "
        "correction range, and the GGUF has no key for it");
  }
  // llama_context constructor (PR 17945/18006): yarn_attn_factor = get_mscale(factor, mscale) /
  // get_mscale(factor, mscale_all_dims) when rope_yarn_log_mul (mscale_all_dim) is set, with
  // mscale assumed 1 except on DEEPSEEK2 where mscale_all_dim != 1 stands in for it; else
  // get_mscale(factor, 1). The converter writes mscale_all_dim (as 0.1 * mscale_all_dim, undone
  // at load: TAG_DEEPSEEK2_YARN_LOG_MUL_FIX) only for DeepSeek V2/V3.
  const float mscale_all_dim =
      deepseek && y.mscale_all_dim ? static_cast<float>(*y.mscale_all_dim) : 0.0f;
  float af;
  if (mscale_all_dim != 0.0f) {
    // DEEPSEEK2 is the only architecture that gets here, and on it mscale = mscale_all_dim
    // (assumed 1 when mscale_all_dim is 1): the ratio is always 1.
    const float mscale = mscale_all_dim;
    af = detail::ggml_get_mscale(factor, mscale) / detail::ggml_get_mscale(factor, mscale_all_dim);
    if (y.mscale && static_cast<float>(*y.mscale) != mscale) {
      notes.push_back("uses mscale = mscale_all_dim (" + num(mscale) +
                      "): llama-context.cpp assumes mscale == 1 "
                      "and, on DEEPSEEK2, substitutes mscale_all_dim; the config's mscale (" +
                      num(*y.mscale) + ") is dropped");
    }
  } else {
    af = detail::ggml_get_mscale(factor, 1.0f);
    if (y.mscale || y.mscale_all_dim) {
      notes.push_back(
          std::string("drops ") + (y.mscale ? "mscale" : "") +
          (y.mscale && y.mscale_all_dim ? " and " : "") +
          (y.mscale_all_dim ? "mscale_all_dim" : "") +
          ": convert_hf_to_gguf.py writes mscale_all_dim only for DeepSeek V2/V3 "
          "(rope.scaling.yarn_log_multiplier), so the attention factor is 0.1 ln(s) + 1");
    }
  }
  if (y.attention_factor) {
    notes.push_back(
        "drops attention_factor (" + num(*y.attention_factor) +
        "): the converter writes it as rope.scaling.yarn_attn_factor, which the llama_context "
        "constructor replaces with get_mscale() whenever YaRN is on");
  }
  // ...then divided by 1 + 0.1 ln(factor), which rope_yarn multiplies back in ggml.
  p.attn_factor = detail::ggml_host_yarn_attn_factor(af, factor);
  if (deepseek) {
    // deepseek2 graph: attn_factor_org = attn_factor (1 + 0.1 ln(1/freq_scale));
    // mscale = attn_factor_org (1 + 0.1 rope_yarn_log_mul ln(1/freq_scale)); kq_scale = mscale^2 /
    // sqrt(d_k).
    const float log_inv = std::log(1.0f / p.freq_scale);
    const float attn_factor_org = p.attn_factor * (1.0f + 0.1f * log_inv);
    const float m = attn_factor_org * (1.0f + 0.1f * mscale_all_dim * log_inv);
    softmax_multiplier = m * m;
  }
  return p;
}

GgmlRopeParams llama_cpp_longrope(const RopeSpec& spec, std::int64_t seq_len,
                                  std::vector<std::string>& notes) {
  GgmlRopeParams p = plain_ggml_params(spec);
  // llama_model::get_rope_factors: rope_long when n_ctx per sequence > n_ctx_orig_yarn.
  const bool use_long = seq_len > spec.original_max_position_embeddings;
  const auto& f = use_long ? spec.longrope.long_factor : spec.longrope.short_factor;
  p.freq_factors.assign(f.begin(), f.end());
  // Phi3MiniModel.set_gguf_parameters: rope.scaling.attn_factor from the two context lengths.
  p.attn_factor = static_cast<float>(longrope_context_factor(spec));
  notes.push_back(
      "picks the long or short factors once for the whole context: n_ctx per sequence > "
      "original_max_position_embeddings (llama_model::get_rope_factors); posenc takes "
      "--seq-len as that context size");
  if (spec.longrope.attention_factor) {
    notes.push_back("drops attention_factor (" + num(*spec.longrope.attention_factor) +
                    "): convert_hf_to_gguf.py computes sqrt(1 + ln(L'/L) / ln L) itself");
  }
  return p;
}
}  // namespace

EngineView llama_cpp_view(const RopeSpec& spec, std::int64_t seq_len, std::string_view model_type) {
  EngineView v;
  v.engine = Engine::kLlamaCpp;
  const bool deepseek = deepseek_family(spec, model_type);
  float softmax = 1.0f;
  GgmlRopeParams p;
  const EngineSupport& support = method_info(spec).llama_cpp;
  if (!support.supported) mark_unsupported(v, std::string(support.reason));
  switch (spec.method) {
    case Method::kNone:
    case Method::kLinear:
    case Method::kLlama3:
    case Method::kNtkAlpha:
      // LINEAR: rope.scaling.factor; llama3: the rope_freqs tensor of
      // LlamaModel.generate_extra_tensors; ntk-alpha: rope.freq_base = b * alpha^(D/(D-2))
      // (HunYuan's converter).
      p = ggml_params_from_spec(spec, seq_len);
      break;
    case Method::kNtk:
      p = plain_ggml_params(spec);
      v.notes.push_back(
          "runs plain RoPE: GGUF has no NTK scaling type (convert_hf_to_gguf.py warns "
          "\"Unknown RoPE type\"); --rope-freq-base " +
          num(detail::ntk_base(spec)) + " would give the NTK base");
      break;
    case Method::kDynamic:
      p = plain_ggml_params(spec);
      v.notes.push_back(
          "runs plain RoPE: llama.cpp has no dynamic NTK (convert_hf_to_gguf.py leaves "
          "rope_type \"dynamic\" to model classes such as HunYuan); transformers agrees up "
          "to max_position_embeddings");
      break;
    case Method::kDynamicYarn:
      p = plain_ggml_params(spec);  // what the model runs: the converter writes no scaling
      break;
    case Method::kYarn:
      if (!support.supported) return v;  // yarn-paper: no ggml parameters express it
      p = llama_cpp_yarn(spec, deepseek, v.notes, softmax);
      break;
    case Method::kLongrope:
      p = llama_cpp_longrope(spec, seq_len, v.notes);
      break;
    case Method::kProportional:
      p = ggml_params_from_spec(spec, seq_len);
      v.notes.push_back(
          "posenc's emulation (unrotated pairs as +inf freq_factors); how llama.cpp's own "
          "architectures run proportional RoPE was not checked");
      break;
  }
  v.freqs = frequencies_from_ggml(p);
  finish(v, seq_len);
  v.softmax_scale_multiplier = softmax;
  v.freqs.softmax_scale_multiplier = softmax;
  return v;
}

}  // namespace posenc::engines_detail
