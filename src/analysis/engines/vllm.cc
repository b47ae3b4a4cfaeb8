// vLLM's reading of a RopeSpec: vllm/model_executor/layers/rotary_embedding (get_rope and one
// class per rope_type); the cos/sin cache is float32 `torch.arange(max_len)` times inv_freq, like
// transformers (kHf). The rules come from the engine's sources, cited where applied;
// docs/engines.md collects them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "analysis/engines/engines_internal.h"
#include "core/ggml_model.h"
#include "core/max_nan.h"
#include "core/methods.h"
#include "core/torch_float32.h"
#include "posenc/analysis/engines.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/ggml.h"
#include "util/format.h"

namespace posenc::engines_detail {
namespace {
// (float32 tensor ops; the Python scalars b s and s^(2/D) rounded to float32 where they meet the
// tensor).
Frequencies vllm_fixed_ntk(const RopeSpec& spec) {
  RopeSpec plain = spec;
  plain.method = Method::kNone;
  plain.factor = 1.0;
  Frequencies f = compute_frequencies(plain, Numerics::kHf);
  const double D = static_cast<double>(spec.rotary_dim);
  const float base = static_cast<float>(spec.rope_theta * spec.factor);
  const float divisor = static_cast<float>(std::pow(spec.factor, 2.0 / D));
  std::vector<float> e(f.inv_freq.size());
  for (std::size_t i = 0; i < e.size(); ++i) {
    e[i] = static_cast<float>(2 * i) / static_cast<float>(spec.rotary_dim);
  }
  // `base ** exponents` over the whole tensor, as torch computes it (torch_float32.h).
  const std::vector<float> pos_freqs = detail::torch_pow(base, e);
  for (std::size_t i = 0; i < f.inv_freq.size(); ++i) {
    float inv = (1.0f / pos_freqs[i]) / divisor;
    if (!spec.freq_factors.empty()) inv /= static_cast<float>(spec.freq_factors[i]);
    f.inv_freq[i] = inv;
    f.interpolation_weight[i] =
        spec.factor > 1.0 ? std::log(f.unscaled_inv_freq[i] / inv) / std::log(spec.factor) : 0.0;
  }
  f.spec = spec;
  f.base = static_cast<double>(base);
  f.scale = spec.factor;
  return f;
}

EngineView vllm_yarn(const RopeSpec& spec, std::int64_t seq_len, bool deepseek) {
  EngineView v;
  v.engine = Engine::kVllm;
  const YarnParams& y = spec.yarn;
  const double s = spec.factor;
  RopeSpec vs = spec;
  if (deepseek) {
    // DeepseekV2Attention / DeepseekV2MLAAttention set rope_type "deepseek_yarn": get_rope passes
    // extrapolation_factor, attn_factor, beta_fast, beta_slow, mscale, mscale_all_dim to
    // DeepseekScalingRotaryEmbedding, whose mscale = g(s, mscale) / g(s, mscale_all_dim) with
    // defaults mscale 1, mscale_all_dim 0; the attention multiplies its softmax scale by
    // g(s, mscale_all_dim)^2.
    const double m = y.mscale.value_or(1.0);
    const double mad = y.mscale_all_dim.value_or(0.0);
    vs.yarn.attention_factor = yarn_mscale(s, m) / yarn_mscale(s, mad);
    vs.yarn.truncate = true;  // yarn_find_correction_range floors and ceils; no truncate argument
    v.notes.push_back(
        "DeepSeek takes vLLM's deepseek_yarn path (DeepseekScalingRotaryEmbedding), "
        "not the plain YaRN class");
    if (y.attention_factor) {
      v.notes.push_back(
          "drops attention_factor (" + num(*y.attention_factor) +
          "): get_rope's deepseek_yarn branch forwards only mscale and mscale_all_dim");
    }
    if (!y.truncate) {
      v.notes.push_back(
          "ignores truncate: false: DeepseekScalingRotaryEmbedding always floors and ceils");
    }
    v.freqs = compute_frequencies(vs, Numerics::kHf, seq_len);
    finish(v, seq_len);
    const double g = yarn_mscale(s, mad);
    v.softmax_scale_multiplier = g * g;
    v.freqs.softmax_scale_multiplier = v.softmax_scale_multiplier;
    return v;
  }
  // get_rope's "yarn" branch forwards extrapolation_factor, attn_factor, beta_fast, beta_slow,
  // apply_yarn_scaling, truncate to YaRNScalingRotaryEmbedding: mscale = yarn_get_mscale(s) *
  // attn_factor. attention_factor, mscale and mscale_all_dim are not forwarded.
  vs.yarn.attention_factor = yarn_mscale(s, 1.0);
  vs.yarn.mscale.reset();
  vs.yarn.mscale_all_dim.reset();
  std::vector<std::string> dropped;
  if (y.attention_factor) dropped.push_back("attention_factor (" + num(*y.attention_factor) + ")");
  if (y.mscale) dropped.push_back("mscale (" + num(*y.mscale) + ")");
  if (y.mscale_all_dim) dropped.push_back("mscale_all_dim (" + num(*y.mscale_all_dim) + ")");
  if (!dropped.empty()) {
    std::string list;
    for (const auto& d : dropped) list += (list.empty() ? "" : ", ") + d;
    v.notes.push_back(
        "drops " + list +
        ": get_rope's yarn branch does not forward them, so "
        "YaRNScalingRotaryEmbedding uses 0.1 ln(s) + 1 (vLLM 0.25; later versions align "
        "with transformers, PR 56446)");
  }
  if (!y.truncate) {
    v.notes.push_back(
        "honours truncate: false (PR 28244, vLLM 0.11.1); vLLM 0.11.0 and older floor "
        "and ceil like llama.cpp");
  }
  v.freqs = compute_frequencies(vs, Numerics::kHf, seq_len);
  finish(v, seq_len);
  return v;
}
}  // namespace

EngineView vllm_view(const RopeSpec& spec, std::int64_t seq_len, std::string_view model_type) {
  EngineView v;
  v.engine = Engine::kVllm;
  if (const EngineSupport& e = method_info(spec).vllm; !e.supported) {
    mark_unsupported(v, std::string(e.reason));
    return v;
  }
  switch (spec.method) {
    case Method::kNone:
    case Method::kLlama3:
    case Method::kNtkAlpha:
      // RotaryEmbedding / Llama3RotaryEmbedding / DynamicNTKAlphaRotaryEmbedding: transformers'
      // float32 recipe, op for op.
      v.freqs = compute_frequencies(spec, Numerics::kHf, seq_len);
      break;
    case Method::kLinear:
      v.freqs = compute_frequencies(spec, Numerics::kHf, seq_len);
      v.notes.push_back(
          "divides the positions (t / factor) rather than inv_freq "
          "(LinearScalingRotaryEmbedding): the same up to float32 rounding");
      break;
    case Method::kNtk:
      v.freqs = vllm_fixed_ntk(spec);
      v.notes.push_back(
          "vLLM's \"ntk\" is fixed NTK (NTKScalingRotaryEmbedding, kexue.fm/archives/9706): "
          "base b s and every frequency divided by s^(2/D), not the base b s^(D/(D-2))");
      break;
    case Method::kDynamic: {
      // DynamicNTKScalingRotaryEmbedding._compute_cos_sin_cache: one base, for max_len =
      // max_position_embeddings * factor: b (s max_len / L' - (s - 1))^(D/(D-2)) = b (s^2 - s +
      // 1)^(D/(D-2)), i.e. static NTK with s' = s^2 - s + 1 (Python doubles, then a float32 pow as
      // transformers).
      RopeSpec ntk = spec;
      ntk.method = Method::kNtk;
      ntk.factor = spec.factor * spec.factor - spec.factor + 1.0;
      v.freqs = compute_frequencies(ntk, Numerics::kHf, 0);
      v.notes.push_back(
          "computes the dynamic-NTK base once, for max_position_embeddings x factor = " +
          std::to_string(static_cast<std::int64_t>(
              static_cast<double>(spec.max_position_embeddings) * spec.factor)) +
          " tokens, and uses it at every length; transformers uses plain RoPE up to "
          "max_position_embeddings");
      break;
    }
    case Method::kYarn:
      return vllm_yarn(spec, seq_len, deepseek_family(spec, model_type));
    case Method::kDynamicYarn:
      return v;  // unsupported (the registry)
    case Method::kLongrope: {
      // Phi3LongRoPEScaledRotaryEmbedding: use_long_rope = max_model_len > L, fixed at start-up;
      // max_model_len defaults to max_position_embeddings. mscale from L'/L; short_mscale and
      // long_mscale are forwarded, attention_factor is not.
      RopeSpec ls = spec;
      ls.longrope.attention_factor = longrope_context_factor(spec);
      const std::int64_t max_model_len = extended_context(spec);
      const bool use_long = max_model_len > spec.original_max_position_embeddings;
      v.freqs = compute_frequencies(ls, Numerics::kHf,
                                    use_long ? spec.original_max_position_embeddings + 1 : 0);
      v.notes.push_back(
          std::string("picks the factors once at start-up: ") + (use_long ? "long" : "short") +
          " for every sequence, since max_model_len (" + std::to_string(max_model_len) +
          ", the default) " + (use_long ? ">" : "<=") +
          " original_max_position_embeddings; transformers switches by seq_len");
      if (spec.longrope.attention_factor) {
        v.notes.push_back("drops attention_factor (" + num(*spec.longrope.attention_factor) +
                          "): only short_mscale and long_mscale are forwarded");
      }
      break;
    }
    case Method::kProportional:
      return v;  // unsupported (the registry)
  }
  finish(v, seq_len);
  return v;
}

}  // namespace posenc::engines_detail
