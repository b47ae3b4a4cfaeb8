// Each engine's reading of a RopeSpec (engines.h). The rules come from the engines' sources; each
// is cited where it is applied, and docs/engines.md collects them.
#include "posenc/engines.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "max_nan.h"
#include "ggml_model.h"
#include "methods.h"
#include "posenc/cos_sin.h"
#include "posenc/error.h"
#include "posenc/ggml.h"

namespace posenc {
namespace {

// Shortest text that reads back as the same double, never in exponent form for ordinary
// magnitudes: 40, 1.2772588722239782, 0.001 (format.h's num() prefers %g: "4e+01").
std::string num(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

constexpr double kFloat32Unit = 0x1p-24;  // u: relative rounding error of one float32 operation

// DeepSeek V2/V3 take their own YaRN path in llama.cpp (LLM_ARCH_DEEPSEEK2) and vLLM
// (DeepseekScalingRotaryEmbedding); Kimi K2 ships as a DeepSeek V3 architecture.
bool deepseek_family(const RopeSpec& spec, std::string_view model_type) {
  if (!model_type.empty()) {
    return model_type.starts_with("deepseek") || model_type == "kimi_k2";
  }
  return spec.yarn.mscale_all_dim.has_value();
}

// LongRoPE's default attention factor from the two context lengths, as vLLM's
// Phi3LongRoPEScaledRotaryEmbedding and convert_hf_to_gguf.py's Phi3MiniModel compute it:
// sqrt(1 + ln(L'/L) / ln L), 1 when L' <= L. Without L' the spec's factor stands in for L'/L.
double longrope_context_factor(const RopeSpec& spec) {
  const double L = static_cast<double>(spec.original_max_position_embeddings);
  const double scale = spec.max_position_embeddings > 0
                           ? static_cast<double>(spec.max_position_embeddings) / L
                           : spec.factor;
  return scale <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(scale) / std::log(L));
}

void mark_unsupported(EngineView& v, std::string reason) {
  v.supported = false;
  v.unsupported_reason = std::move(reason);
}

void finish(EngineView& v, std::int64_t seq_len) {
  v.freqs.seq_len = seq_len;
  v.attention_factor = v.freqs.attention_factor;
  v.softmax_scale_multiplier = v.freqs.softmax_scale_multiplier;
}

// ---------------------------------------------------------------------------------------------
// transformers: modeling_rope_utils.py ROPE_INIT_FUNCTIONS, float32 (kHf).

EngineView transformers_view(const RopeSpec& spec, std::int64_t seq_len) {
  EngineView v;
  v.engine = Engine::kTransformers;
  v.freqs = compute_frequencies(spec, Numerics::kHf, seq_len);
  finish(v, seq_len);
  const std::string values = "; the values are posenc's float32 emulation";
  if (const EngineSupport& e = method_info(spec).transformers; !e.supported) {
    mark_unsupported(v, std::string(e.reason) + values);
  }
  switch (spec.method) {
    case Method::kYarn:
      if (spec.yarn.mscale_all_dim && *spec.yarn.mscale_all_dim != 0.0) {
        v.notes.push_back("the softmax-scale multiplier g(s, mscale_all_dim)^2 is applied by the "
                          "DeepSeek attention classes (DeepseekV3Attention), not by other models");
      }
      break;
    case Method::kDynamic:
      v.notes.push_back("recomputes inv_freq in the forward pass once seq_len exceeds "
                        "max_position_embeddings (dynamic_rope_update); keys already in the KV cache "
                        "keep the rotation they were stored with");
      break;
    case Method::kLongrope:
      v.notes.push_back("switches the whole sequence to the long factors once seq_len exceeds "
                        "original_max_position_embeddings (longrope_frequency_update); cached keys "
                        "keep the short rotation");
      break;
    case Method::kNone:
    case Method::kLinear:
    case Method::kNtk:
    case Method::kDynamicYarn:
    case Method::kLlama3:
    case Method::kProportional:
    case Method::kNtkAlpha: break;
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// llama.cpp: what convert_hf_to_gguf.py writes, read back by llama_model::load_hparams and
// adjusted in the llama_context constructor, then ggml_rope_ext (kGgml).

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
                    num(y.beta_slow) + ": the GGUF keys are loaded only by some architectures (Grok)");
  }
  if (!y.truncate) {
    notes.push_back("ignores truncate: false: ggml_rope_yarn_corr_dims always floors and ceils the "
                    "correction range, and the GGUF has no key for it");
  }
  // llama_context constructor (PR 17945/18006): yarn_attn_factor = get_mscale(factor, mscale) /
  // get_mscale(factor, mscale_all_dims) when rope_yarn_log_mul (mscale_all_dim) is set, with
  // mscale assumed 1 except on DEEPSEEK2 where mscale_all_dim != 1 stands in for it; else
  // get_mscale(factor, 1). The converter writes mscale_all_dim (as 0.1 * mscale_all_dim, undone
  // at load: TAG_DEEPSEEK2_YARN_LOG_MUL_FIX) only for DeepSeek V2/V3.
  const float mscale_all_dim = deepseek && y.mscale_all_dim ? static_cast<float>(*y.mscale_all_dim) : 0.0f;
  float af;
  if (mscale_all_dim != 0.0f) {
    // DEEPSEEK2 is the only architecture that gets here, and on it mscale = mscale_all_dim
    // (assumed 1 when mscale_all_dim is 1): the ratio is always 1.
    const float mscale = mscale_all_dim;
    af = detail::ggml_get_mscale(factor, mscale) / detail::ggml_get_mscale(factor, mscale_all_dim);
    if (y.mscale && static_cast<float>(*y.mscale) != mscale) {
      notes.push_back("uses mscale = mscale_all_dim (" + num(mscale) + "): llama-context.cpp assumes mscale == 1 "
                      "and, on DEEPSEEK2, substitutes mscale_all_dim; the config's mscale (" + num(*y.mscale) +
                      ") is dropped");
    }
  } else {
    af = detail::ggml_get_mscale(factor, 1.0f);
    if (y.mscale || y.mscale_all_dim) {
      notes.push_back(std::string("drops ") + (y.mscale ? "mscale" : "") + (y.mscale && y.mscale_all_dim ? " and " : "") +
                      (y.mscale_all_dim ? "mscale_all_dim" : "") +
                      ": convert_hf_to_gguf.py writes mscale_all_dim only for DeepSeek V2/V3 "
                      "(rope.scaling.yarn_log_multiplier), so the attention factor is 0.1 ln(s) + 1");
    }
  }
  if (y.attention_factor) {
    notes.push_back("drops attention_factor (" + num(*y.attention_factor) +
                    "): the converter writes it as rope.scaling.yarn_attn_factor, which the llama_context "
                    "constructor replaces with get_mscale() whenever YaRN is on");
  }
  // ...then divided by 1 + 0.1 ln(factor), which rope_yarn multiplies back in ggml.
  p.attn_factor = detail::ggml_host_yarn_attn_factor(af, factor);
  if (deepseek) {
    // deepseek2 graph: attn_factor_org = attn_factor (1 + 0.1 ln(1/freq_scale));
    // mscale = attn_factor_org (1 + 0.1 rope_yarn_log_mul ln(1/freq_scale)); kq_scale = mscale^2 / sqrt(d_k).
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
  notes.push_back("picks the long or short factors once for the whole context: n_ctx per sequence > "
                  "original_max_position_embeddings (llama_model::get_rope_factors); posenc takes "
                  "--seq-len as that context size");
  if (spec.longrope.attention_factor) {
    notes.push_back("drops attention_factor (" + num(*spec.longrope.attention_factor) +
                    "): convert_hf_to_gguf.py computes sqrt(1 + ln(L'/L) / ln L) itself");
  }
  return p;
}

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
      // LINEAR: rope.scaling.factor; llama3: the rope_freqs tensor of LlamaModel.generate_extra_tensors;
      // ntk-alpha: rope.freq_base = b * alpha^(D/(D-2)) (HunYuan's converter).
      p = ggml_params_from_spec(spec, seq_len);
      break;
    case Method::kNtk:
      p = plain_ggml_params(spec);
      v.notes.push_back("runs plain RoPE: GGUF has no NTK scaling type (convert_hf_to_gguf.py warns "
                        "\"Unknown RoPE type\"); --rope-freq-base " + num(detail::ntk_base(spec)) +
                        " would give the NTK base");
      break;
    case Method::kDynamic:
      p = plain_ggml_params(spec);
      v.notes.push_back("runs plain RoPE: llama.cpp has no dynamic NTK (convert_hf_to_gguf.py leaves "
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
      v.notes.push_back("posenc's emulation (unrotated pairs as +inf freq_factors); how llama.cpp's own "
                        "architectures run proportional RoPE was not checked");
      break;
  }
  v.freqs = frequencies_from_ggml(p);
  finish(v, seq_len);
  v.softmax_scale_multiplier = softmax;
  v.freqs.softmax_scale_multiplier = softmax;
  return v;
}

// ---------------------------------------------------------------------------------------------
// vLLM: vllm/model_executor/layers/rotary_embedding (get_rope and one class per rope_type); the
// cos/sin cache is float32 `torch.arange(max_len)` times inv_freq, like transformers (kHf).

// NTKScalingRotaryEmbedding without mixed_b: inv_freq of base b s, each divided by s^(2/D)
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
  for (std::size_t i = 0; i < f.inv_freq.size(); ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(spec.rotary_dim);
    const float pos_freq = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(e)));
    float inv = (1.0f / pos_freq) / divisor;
    if (!spec.freq_factors.empty()) inv /= static_cast<float>(spec.freq_factors[i]);
    f.inv_freq[i] = inv;
    f.interpolation_weight[i] = spec.factor > 1.0 ? std::log(f.unscaled_inv_freq[i] / inv) / std::log(spec.factor) : 0.0;
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
    v.notes.push_back("DeepSeek takes vLLM's deepseek_yarn path (DeepseekScalingRotaryEmbedding), "
                      "not the plain YaRN class");
    if (y.attention_factor) {
      v.notes.push_back("drops attention_factor (" + num(*y.attention_factor) +
                        "): get_rope's deepseek_yarn branch forwards only mscale and mscale_all_dim");
    }
    if (!y.truncate) {
      v.notes.push_back("ignores truncate: false: DeepseekScalingRotaryEmbedding always floors and ceils");
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
    v.notes.push_back("drops " + list + ": get_rope's yarn branch does not forward them, so "
                      "YaRNScalingRotaryEmbedding uses 0.1 ln(s) + 1 (vLLM 0.25; later versions align "
                      "with transformers, PR 56446)");
  }
  if (!y.truncate) {
    v.notes.push_back("honours truncate: false (PR 28244, vLLM 0.11.1); vLLM 0.11.0 and older floor "
                      "and ceil like llama.cpp");
  }
  v.freqs = compute_frequencies(vs, Numerics::kHf, seq_len);
  finish(v, seq_len);
  return v;
}

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
      v.notes.push_back("divides the positions (t / factor) rather than inv_freq "
                        "(LinearScalingRotaryEmbedding): the same up to float32 rounding");
      break;
    case Method::kNtk:
      v.freqs = vllm_fixed_ntk(spec);
      v.notes.push_back("vLLM's \"ntk\" is fixed NTK (NTKScalingRotaryEmbedding, kexue.fm/archives/9706): "
                        "base b s and every frequency divided by s^(2/D), not the base b s^(D/(D-2))");
      break;
    case Method::kDynamic: {
      // DynamicNTKScalingRotaryEmbedding._compute_cos_sin_cache: one base, for max_len =
      // max_position_embeddings * factor: b (s max_len / L' - (s - 1))^(D/(D-2)) = b (s^2 - s + 1)^(D/(D-2)),
      // i.e. static NTK with s' = s^2 - s + 1 (Python doubles, then a float32 pow as transformers).
      RopeSpec ntk = spec;
      ntk.method = Method::kNtk;
      ntk.factor = spec.factor * spec.factor - spec.factor + 1.0;
      v.freqs = compute_frequencies(ntk, Numerics::kHf, 0);
      v.notes.push_back("computes the dynamic-NTK base once, for max_position_embeddings x factor = " +
                        std::to_string(static_cast<std::int64_t>(static_cast<double>(spec.max_position_embeddings) *
                                                                 spec.factor)) +
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
      v.freqs = compute_frequencies(ls, Numerics::kHf, use_long ? spec.original_max_position_embeddings + 1 : 0);
      v.notes.push_back(std::string("picks the factors once at start-up: ") +
                        (use_long ? "long" : "short") + " for every sequence, since max_model_len (" +
                        std::to_string(max_model_len) + ", the default) " + (use_long ? ">" : "<=") +
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

// ---------------------------------------------------------------------------------------------

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

std::string short_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// NaN on either side is a difference, never agreement.
bool scalar_differs(double a, double b) {
  return !(std::abs(a - b) <= kScalarTolerance * std::max(std::abs(a), std::abs(b)));
}

void judge(EngineComparison& c, const EngineComparison& reference) {
  const EngineView& v = c.view;
  if (!v.supported) {
    c.verdict = Verdict::kUnsupported;
    c.verdict_text = "not supported: " + v.unsupported_reason;
    return;
  }
  c.attention_factor_differs = scalar_differs(v.attention_factor, reference.view.attention_factor);
  c.softmax_scale_differs = scalar_differs(v.softmax_scale_multiplier, reference.view.softmax_scale_multiplier);
  std::vector<std::string> reasons;
  if (c.pairs_differing > 0) {
    reasons.push_back("differs in " + std::to_string(c.pairs_differing) +
                      (c.pairs_differing == 1 ? " pair" : " pairs") + " by up to " +
                      sci(c.max_relative_difference_beyond) + " (inv_freq, relative)");
  }
  if (c.attention_factor_differs) {
    reasons.push_back("uses a different attention factor (" + short_num(v.attention_factor) + " vs " +
                      short_num(reference.view.attention_factor) + ")");
  }
  if (c.softmax_scale_differs) {
    reasons.push_back("uses a different softmax-scale multiplier (" + short_num(v.softmax_scale_multiplier) +
                      " vs " + short_num(reference.view.softmax_scale_multiplier) + ")");
  }
  if (reasons.empty()) {
    c.verdict = Verdict::kAgrees;
    c.verdict_text = v.engine == Engine::kPrecise
                         ? std::string("reference (float64)")
                         : "agrees (float32 rounding only: inv_freq within " + sci(c.max_relative_difference) + ")";
    return;
  }
  c.verdict = Verdict::kDiffers;
  for (const auto& r : reasons) c.verdict_text += (c.verdict_text.empty() ? "" : "; ") + r;
}

}  // namespace

std::string_view engine_name(Engine engine) {
  switch (engine) {
    case Engine::kTransformers: return "transformers";
    case Engine::kLlamaCpp: return "llama.cpp";
    case Engine::kVllm: return "vllm";
    case Engine::kPrecise: return "precise";
  }
  return "?";
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAgrees: return "agrees";
    case Verdict::kDiffers: return "differs";
    case Verdict::kUnsupported: return "unsupported";
  }
  return "?";
}

EngineView engine_view(const RopeSpec& spec, Engine engine, std::int64_t seq_len,
                       std::string_view model_type) {
  validate(spec);
  if (seq_len < 0) throw Error("seq_len (" + std::to_string(seq_len) + ") must not be negative");
  switch (engine) {
    case Engine::kTransformers: return transformers_view(spec, seq_len);
    case Engine::kLlamaCpp: return llama_cpp_view(spec, seq_len, model_type);
    case Engine::kVllm: return vllm_view(spec, seq_len, model_type);
    case Engine::kPrecise: break;
  }
  EngineView v;
  v.engine = Engine::kPrecise;
  v.freqs = compute_frequencies(spec, Numerics::kPrecise, seq_len);
  finish(v, seq_len);
  return v;
}

std::vector<std::int64_t> default_comparison_positions(const RopeSpec& spec) {
  const ContextLengths ctx = context_lengths(spec);
  const std::int64_t L = ctx.original;
  const std::int64_t extended = std::max(ctx.extended, L);
  std::vector<std::int64_t> p = {L - 1, L, 4 * L, extended - 1};
  constexpr std::int64_t kLast = std::numeric_limits<std::int32_t>::max();  // ggml's int32 positions
  for (std::int64_t& x : p) x = std::min(x, kLast);
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  return p;
}

double rounding_budget(const EngineView& view, const RopeSpec& spec, std::int64_t pair) {
  const Frequencies& f = view.freqs;
  if (f.numerics == Numerics::kPrecise) return 0.0;
  const double D = 2.0 * static_cast<double>(f.pair_count());
  const double e = 2.0 * static_cast<double>(pair) / D;
  const double b = f.base > 1.0 ? f.base : spec.rope_theta;
  const double s = std::max({1.0, spec.factor, f.scale});
  const double ln_b = std::log(b);
  if (f.numerics == Numerics::kGgml) {
    return kFloat32Unit * (e * ln_b + 2.0 * static_cast<double>(pair) + 8.0 + 2.0 * s);
  }
  return kFloat32Unit * (e * (ln_b + 1.0) + 8.0 + 2.0 * s);
}

std::vector<double> relative_differences(const Frequencies& freqs, const Frequencies& reference) {
  if (freqs.inv_freq.size() != reference.inv_freq.size()) {
    throw Error("relative_differences: pair counts differ (" + std::to_string(freqs.inv_freq.size()) +
                " vs " + std::to_string(reference.inv_freq.size()) + ")");
  }
  std::vector<double> d(freqs.inv_freq.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double a = freqs.inv_freq[i];
    const double r = reference.inv_freq[i];
    if (r == 0.0) {
      d[i] = a == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
    } else {
      d[i] = std::abs(a - r) / std::abs(r);
    }
  }
  return d;
}

double max_cos_sin_difference(const Frequencies& freqs, const Frequencies& reference,
                              std::int64_t position) {
  const std::size_t n = reference.inv_freq.size();
  if (freqs.inv_freq.size() != n) {
    throw Error("max_cos_sin_difference: pair counts differ (" + std::to_string(freqs.inv_freq.size()) +
                " vs " + std::to_string(n) + ")");
  }
  std::vector<double> c(n), s(n), cr(n), sr(n);
  cos_sin_at(freqs, position, c, s);
  cos_sin_at(reference, position, cr, sr);
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    worst = detail::max_nan(worst, detail::max_nan(std::abs(c[i] - cr[i]), std::abs(s[i] - sr[i])));
  }
  return worst;
}

const EngineComparison& Comparison::at(Engine engine) const {
  for (const auto& e : engines) {
    if (e.view.engine == engine) return e;
  }
  throw Error("compare_engines: no result for engine " + std::string(engine_name(engine)));
}

Comparison compare_engines(const RopeSpec& spec, std::int64_t seq_len,
                           std::span<const std::int64_t> positions, std::string_view model_type) {
  Comparison out;
  out.spec = spec;
  out.model_type = std::string(model_type);
  out.seq_len = seq_len;
  out.positions = positions.empty() ? default_comparison_positions(spec)
                                    : std::vector<std::int64_t>(positions.begin(), positions.end());
  for (const std::int64_t p : out.positions) {
    if (p < 0 || p > std::numeric_limits<std::int32_t>::max()) {
      throw Error("position (" + std::to_string(p) +
                  ") must be between 0 and 2^31 - 1 (ggml's int32 positions)");
    }
  }
  for (const Engine e : kEngines) {
    EngineComparison c;
    c.view = engine_view(spec, e, seq_len, model_type);
    out.engines.push_back(std::move(c));
  }
  const EngineComparison& ref = out.engines.back();  // precise, last in kEngines
  for (EngineComparison& c : out.engines) {
    const Frequencies& f = c.view.freqs;
    if (f.inv_freq.size() == ref.view.freqs.inv_freq.size()) {
      c.relative_difference = relative_differences(f, ref.view.freqs);
      c.budget.resize(c.relative_difference.size());
      for (std::size_t i = 0; i < c.budget.size(); ++i) {
        c.budget[i] = rounding_budget(c.view, spec, static_cast<std::int64_t>(i));
        const double d = c.relative_difference[i];
        c.max_relative_difference = detail::max_nan(c.max_relative_difference, d);
        if (!(d <= c.budget[i])) {  // NaN counts as beyond
          ++c.pairs_differing;
          c.max_relative_difference_beyond = detail::max_nan(c.max_relative_difference_beyond, d);
        }
      }
      for (const std::int64_t p : out.positions) {
        c.cos_sin_difference.push_back(max_cos_sin_difference(f, ref.view.freqs, p));
      }
    }
    judge(c, ref);
  }
  return out;
}

}  // namespace posenc
