// The checks of posenc/analysis/doctor.h. Each computes its numbers for the model at hand; the
// engine rules come from src/analysis/engines/ (and docs/engines.md).
#include "posenc/analysis/doctor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "analysis/doctor_mrope.h"
#include "core/max_nan.h"
#include "posenc/analysis/engines.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "rope/kernels/half.h"
#include "util/format.h"

namespace posenc {
namespace {

bool has_warning(const ModelConfig& c, std::string_view needle) {
  return std::any_of(c.warnings.begin(), c.warnings.end(),
                     [&](const std::string& w) { return w.find(needle) != std::string::npos; });
}

Finding make(std::string id, std::string severity, std::string title, std::string detail,
             std::string advice) {
  return {std::move(id), std::move(severity), std::move(title), std::move(detail),
          std::move(advice)};
}

// How far apart the two rotations of position p are: the largest |p (w_a - w_b)| over pairs,
// wrapped to [0, pi] (rad).
double max_angle_difference(const Frequencies& a, const Frequencies& b, std::int64_t p) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.inv_freq.size() && i < b.inv_freq.size(); ++i) {
    const double d = std::abs(std::remainder(
        static_cast<double>(p) * (a.inv_freq[i] - b.inv_freq[i]), 2.0 * std::numbers::pi));
    worst = detail::max_nan(worst, d);
  }
  return worst;
}

// ---------------------------------------------------------------------------------------------

void integer_factor(const ModelConfig& c, std::vector<Finding>& out) {
  // config_rope.cc warns "<dict>.factor field must be a float >= 1, got 40" for a JSON integer,
  // as transformers' rope validation does.
  if (!has_warning(c, "factor field must be a float")) return;
  out.push_back(
      make("integer-factor", "info",
           "factor is written as an integer (" + detail::shortest(c.spec.factor) + ")",
           "transformers logs \"factor field must be a float >= 1\" when it loads this config; the "
           "value "
           "itself is used unchanged by transformers, vLLM (Python arithmetic) and llama.cpp (the "
           "GGUF stores "
           "a float32), so no number changes.",
           "Write it as " + detail::shortest(c.spec.factor) + ".0 to silence the warning."));
}

void factor_mismatch(const ModelConfig& c, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  if (s.method != Method::kYarn || s.original_max_position_embeddings <= 0 ||
      s.max_position_embeddings <= 0)
    return;
  const double implicit = static_cast<double>(s.max_position_embeddings) /
                          static_cast<double>(s.original_max_position_embeddings);
  if (implicit == s.factor) return;
  const auto target = static_cast<std::int64_t>(
      std::llround(s.factor * static_cast<double>(s.original_max_position_embeddings)));
  const std::string engines =
      "transformers computes the frequencies from factor and never reads max_position_embeddings "
      "for "
      "YaRN; vLLM sizes its default max_model_len as original_max_position_embeddings x factor (" +
      std::to_string(target) +
      ") for rope_type yarn; llama.cpp uses rope.scaling.factor for the "
      "frequencies but takes its training context (n_ctx_train, the GGUF context_length) from "
      "max_position_embeddings (" +
      std::to_string(s.max_position_embeddings) + ").";
  if (implicit == 1.0) {
    out.push_back(make(
        "factor-mismatch", "warning",
        "max_position_embeddings equals the original context, so the config does not state the "
        "extended context (" +
            std::to_string(target) + ")",
        "factor is " + detail::shortest(s.factor) +
            " but max_position_embeddings / original_max_position_embeddings = " +
            std::to_string(s.max_position_embeddings) + " / " +
            std::to_string(s.original_max_position_embeddings) +
            " = 1 (the usual result of adding a rope_scaling block without editing the rest). " +
            engines,
        "Set max_position_embeddings to " + std::to_string(target) +
            " if the model should run that long, or give the context to each engine explicitly "
            "(vLLM --max-model-len, llama.cpp -c)."));
    return;
  }
  out.push_back(
      make("factor-mismatch", "warning",
           "factor (" + detail::shortest(s.factor) +
               ") disagrees with max_position_embeddings / original_max_position_embeddings (" +
               detail::shortest(implicit) + ")",
           engines + " The engines therefore disagree about how long the model may run.",
           "Make the three consistent: factor = max_position_embeddings / "
           "original_max_position_embeddings, "
           "with original_max_position_embeddings the pre-training context."));
}

void missing_original_context(const ModelConfig& c, std::vector<Finding>& out) {
  if (!has_warning(c, "original_max_position_embeddings is not set")) return;
  const RopeSpec& s = c.spec;
  out.push_back(make(
      "missing-original-context", "warning",
      "original_max_position_embeddings is missing from the RoPE settings",
      "posenc (like transformers' standardize_rope_params) used max_position_embeddings (" +
          std::to_string(s.max_position_embeddings) +
          ") as the original context, so the YaRN correction range and LongRoPE's switch are "
          "computed "
          "over the extended context rather than the pre-training one. vLLM's get_rope and "
          "convert_hf_to_gguf.py read rope_parameters[\"original_max_position_embeddings\"] "
          "directly and "
          "fail without it; llama.cpp otherwise falls back to n_ctx_train.",
      "Add original_max_position_embeddings (the context the model was pre-trained with) to the "
      "rope_scaling / rope_parameters dict."));
}

// No context at all: every command then works at kAssumedContext (spec.h's context_lengths).
void assumed_context(const ModelConfig& c, std::vector<Finding>& out) {
  const ContextLengths ctx = context_lengths(c.spec);
  if (!ctx.assumed) return;
  out.push_back(make(
      "assumed-context", "info",
      "the config states no context: posenc assumes " + std::to_string(kAssumedContext) + " tokens",
      "Neither max_position_embeddings nor original_max_position_embeddings is set, so every "
      "posenc command "
      "(inspect, compare, doctor, the figures) takes the original context as " +
          std::to_string(kAssumedContext) + " and the extended context as " +
          std::to_string(ctx.extended) +
          ". transformers falls back to its config class's default max_position_embeddings, which "
          "differs "
          "between families (LlamaConfig 2048, for one), and llama.cpp to the GGUF's "
          "context_length.",
      "Set max_position_embeddings (and original_max_position_embeddings for a scaled model) in "
      "the config."));
}

void attention_factor_engines(const ModelConfig& c, const Comparison& cmp,
                              std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  const bool yarn = method_reads(s, kParamYarn);
  if (!method_reads(s, kParamAttentionFactor)) return;
  const bool keys = yarn ? (s.yarn.attention_factor || s.yarn.mscale || s.yarn.mscale_all_dim)
                         : s.longrope.attention_factor.has_value();
  bool differ = false;
  std::string per_engine;
  for (const EngineComparison& e : cmp.engines) {
    if (e.view.freqs.inv_freq.empty()) continue;
    differ =
        differ || (e.view.supported && (e.attention_factor_differs || e.softmax_scale_differs));
    per_engine += std::string(per_engine.empty() ? "" : "; ") +
                  std::string(engine_name(e.view.engine)) + " attention factor " +
                  detail::sig(e.view.attention_factor, 7) + ", softmax multiplier " +
                  detail::sig(e.view.softmax_scale_multiplier, 7);
  }
  if (!keys && !differ) return;
  std::string rules;
  if (yarn) {
    rules =
        "transformers: attention_factor if set, else g(s, mscale) / g(s, mscale_all_dim) when both "
        "are "
        "set and non-zero, else g(s, 1) = 0.1 ln s + 1; the DeepSeek attention classes also "
        "multiply "
        "the softmax scale by g(s, mscale_all_dim)^2. llama.cpp: mscale_all_dim reaches the GGUF "
        "only "
        "for DeepSeek V2/V3 (mscale is assumed 1; attention_factor is written but replaced by "
        "get_mscale); vLLM: DeepSeek's deepseek_yarn path uses the mscale ratio, the plain YaRN "
        "path "
        "(0.25 and older) drops attention_factor, mscale and mscale_all_dim and uses 0.1 ln s + 1.";
  } else {
    rules =
        "transformers uses attention_factor when set; vLLM (Phi3LongRoPEScaledRotaryEmbedding) and "
        "llama.cpp (convert_hf_to_gguf.py) compute sqrt(1 + ln(L'/L) / ln L) from the two context "
        "lengths and ignore it.";
  }
  out.push_back(
      make("attention-factor-engines", differ ? "warning" : "info",
           differ ? "the engines scale cos/sin (or the softmax) differently for this model"
                  : "attention factor keys are set; every engine arrives at the same scaling",
           rules + " For this model: " + per_engine + ".",
           differ ? "Use an engine whose factor matches transformers (see posenc compare), or set "
                    "the factor "
                    "explicitly where the engine allows it (llama.cpp --yarn-attn-factor "
                    "multiplies its own "
                    "g(s, 1); vLLM's attn_factor key multiplies 0.1 ln s + 1)."
                  : "Nothing to do; posenc compare shows the numbers."));
}

void truncate_ignored(const ModelConfig& c, const Comparison& cmp, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  if (s.method != Method::kYarn || s.yarn.truncate || s.yarn.ramp != YarnRamp::kPairIndex) return;
  RopeSpec t = s;
  t.yarn.truncate = true;
  const Frequencies exact = compute_frequencies(s, Numerics::kPrecise);
  const Frequencies floored = compute_frequencies(t, Numerics::kPrecise);
  const std::vector<double> d = relative_differences(floored, exact);
  std::int64_t pairs = 0;
  std::int64_t first = -1, last = -1;
  double worst = 0.0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (!(d[i] <= 1e-12)) {
      ++pairs;
      if (first < 0) first = static_cast<std::int64_t>(i);
      last = static_cast<std::int64_t>(i);
      worst = detail::max_nan(worst, d[i]);
    }
  }
  const EngineComparison& llama = cmp.at(Engine::kLlamaCpp);
  const std::int64_t at = cmp.positions.empty() ? 0 : cmp.positions.back();
  out.push_back(make(
      "truncate-ignored", "warning",
      "truncate: false is honoured by transformers but not by llama.cpp (" + std::to_string(pairs) +
          " pairs get other frequencies)",
      "transformers uses the unrounded correction range " + detail::sig(*exact.correction_low, 5) +
          " .. " + detail::sig(*exact.correction_high, 5) + "; floored and ceiled it becomes " +
          detail::sig(*floored.correction_low, 5) + " .. " +
          detail::sig(*floored.correction_high, 5) + ", which changes pairs " +
          std::to_string(first) + " to " + std::to_string(last) + " (" + std::to_string(pairs) +
          " pairs) by up to " + detail::sci(worst, 2) +
          " relative. llama.cpp always floors and ceils (ggml_rope_yarn_corr_dims; the GGUF has no "
          "key for "
          "truncate): posenc compare finds " +
          std::to_string(llama.pairs_differing) +
          " pairs beyond float32 rounding and a cos/sin difference of " +
          detail::sci(llama.cos_sin_difference.empty() ? 0.0 : llama.cos_sin_difference.back(), 2) +
          " at position " + std::to_string(at) +
          ". vLLM honours it on its plain YaRN path since 0.11.1 (PR 28244); vLLM "
          "0.11.0 and older, and its DeepSeek path, differ in the same " +
          std::to_string(pairs) + " pairs.",
      "Run vLLM 0.11.1 or newer. With llama.cpp there is no setting for it: expect these pairs to "
      "differ, "
      "or check the effect on your task (posenc compare --positions ...)."));
}

void partial_rotary(const ModelConfig& c, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  if (s.method == Method::kProportional) return;  // its D is d_h by definition
  if (s.rotary_dim < s.head_dim || s.rotary_offset > 0) {
    out.push_back(make(
        "partial-rotary", "info",
        "only " + std::to_string(s.rotary_dim) + " of " + std::to_string(s.head_dim) +
            " head dims are rotated",
        "Rotated dims " + std::to_string(s.rotary_offset) + " .. " +
            std::to_string(s.rotary_offset + s.rotary_dim - 1) + " (" +
            std::to_string(s.rotary_dim / 2) + " pairs, " + std::string(layout_name(s.layout)) +
            "); the rest pass through. Each engine finds D its own way: transformers from the "
            "model class "
            "(qk_rope_head_dim, rotary_dim, rotary_pct or partial_rotary_factor; Llama-family "
            "classes ignore "
            "partial_rotary_factor for default RoPE), vLLM as int(head_size x "
            "partial_rotary_factor) in "
            "get_rope or the model's own argument, llama.cpp from rope.dimension_count (n_rot). "
            "The YaRN ramp "
            "and every inv_freq exponent 2i/D use the rotated D, not the head dim.",
        "Check that each engine reports the same rotary dims (" + std::to_string(s.rotary_dim) +
            "): posenc inspect shows them, llama.cpp prints n_rot at load."));
    return;
  }
  // config_rope.cc: "partial_rotary_factor (0.5) is ignored for default RoPE: the Llama-family
  // class ... rotates the whole head", as transformers v4's Llama classes do.
  const auto it = std::find_if(c.warnings.begin(), c.warnings.end(), [](const std::string& w) {
    return w.find("is ignored for default RoPE") != std::string::npos;
  });
  if (it == c.warnings.end()) return;
  const std::size_t at = it->find("partial_rotary_factor (");
  const double p = at == std::string::npos ? 0.0 : std::strtod(it->c_str() + at + 23, nullptr);
  if (!(p > 0.0 && p < 1.0)) return;
  const auto d = static_cast<std::int64_t>(static_cast<double>(s.head_dim) * p);
  out.push_back(make(
      "partial-rotary", "warning",
      "partial_rotary_factor " + detail::shortest(p) +
          " is ignored by this model's transformers class but not by vLLM",
      "transformers rotates all " + std::to_string(s.head_dim) +
          " dims (the Llama-family class ignores "
          "partial_rotary_factor for default RoPE), while vLLM's get_rope rotates int(head_size x "
          "partial_rotary_factor) = " +
          std::to_string(d) +
          " dims when the factor reaches rope_parameters "
          "(transformers v5 copies it there).",
      "Remove partial_rotary_factor from the config if the model rotates every dim, or check which "
      "engine matches the training code."));
}

void dynamic_kv_cache(const ModelConfig& c, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  if (s.method != Method::kDynamic && s.method != Method::kDynamicYarn) return;
  const bool ntk = s.method == Method::kDynamic;
  const std::int64_t limit = ntk ? s.max_position_embeddings : s.original_max_position_embeddings;
  if (limit <= 0) return;
  const Frequencies before = compute_frequencies(s, Numerics::kPrecise, limit);
  const Frequencies first = compute_frequencies(s, Numerics::kPrecise, limit + 1);
  const Frequencies doubled = compute_frequencies(s, Numerics::kPrecise, 2 * limit);
  const double step = max_angle_difference(first, before, limit - 1);
  const double twice = max_angle_difference(doubled, before, limit - 1);
  std::string engines =
      ntk ? "vLLM computes one base for max_position_embeddings x factor tokens and keeps it "
            "(no switch, but different from transformers below that length); llama.cpp has "
            "no dynamic NTK and runs plain RoPE."
          : "vLLM and llama.cpp have no dynamic YaRN.";
  out.push_back(
      make("dynamic-kv-cache", "warning",
           std::string(ntk ? "dynamic NTK" : "dynamic YaRN") +
               " changes the frequencies as the sequence grows, "
               "under keys already cached",
           "transformers recomputes inv_freq once seq_len exceeds " + std::to_string(limit) +
               ", but keys in the KV cache keep the rotation they were stored with. Going from " +
               std::to_string(limit) + " to " + std::to_string(limit + 1) +
               " tokens moves the key at position " + std::to_string(limit - 1) + " by up to " +
               detail::sci(step, 2) + " rad; at " + std::to_string(2 * limit) +
               " tokens the same key is " + detail::sci(twice, 2) +
               " rad away from where the new frequencies put it. " + engines,
           "Re-rotate the cached keys whenever the frequencies change: posenc::rerotate_keys(old, "
           "new, k, "
           "positions) applies R(theta_new) R(theta_old)^T in one pass. Or use a static method "
           "(yarn) for "
           "cached decoding."));
}

void longrope_switch(const ModelConfig& c, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  if (s.method != Method::kLongrope) return;
  const std::int64_t L = s.original_max_position_embeddings;
  const Frequencies shortf = compute_frequencies(s, Numerics::kPrecise, L);
  const Frequencies longf = compute_frequencies(s, Numerics::kPrecise, L + 1);
  const double at_edge = max_angle_difference(longf, shortf, L - 1);
  const std::int64_t max_model_len = extended_context(s);
  out.push_back(
      make("longrope-switch", "warning",
           "LongRoPE switches factors at the original context (" + std::to_string(L) +
               "), and each engine decides differently",
           "transformers switches the whole sequence to the long factors once seq_len > " +
               std::to_string(L) + " (keys cached before keep the short rotation: at position " +
               std::to_string(L - 1) + " the two rotations are up to " + detail::sci(at_edge, 2) +
               " rad apart, of pi at most). vLLM decides once at start-up: long "
               "factors for every request when max_model_len (default " +
               std::to_string(max_model_len) + ") > " + std::to_string(L) +
               ", so short prompts get the long factors too (older vLLM switched a whole batch "
               "when any position exceeded " +
               std::to_string(L) +
               "). llama.cpp decides by the context size: long "
               "when n_ctx per sequence > " +
               std::to_string(L) + " (llama_model::get_rope_factors).",
           "To match transformers on prompts up to " + std::to_string(L) +
               " tokens, run vLLM with --max-model-len " + std::to_string(L) +
               " and llama.cpp with -c " + std::to_string(L) +
               " or less; for longer ones "
               "all three use the long factors. When a transformers sequence crosses " +
               std::to_string(L) +
               ", re-rotate the cache with posenc::rerotate_keys(short, long, k, positions)."));
}

// cos/sin near the extended context: (1) the final values rounded to fp16/bf16, as transformers
// (cos.to(x.dtype)) and vLLM (cos_sin_cache in the model dtype) keep them; (2) the angle itself
// formed in bf16, which is what happens when position ids and inv_freq meet in bf16.
void half_precision_table(const ModelConfig& c, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  const std::int64_t ext = extended_context(s);
  const Frequencies f = compute_frequencies(s, Numerics::kPrecise, ext);
  const std::size_t n = f.inv_freq.size();
  std::vector<double> co(n), si(n);
  double err16 = 0.0, errbf = 0.0, errangle = 0.0;
  const std::int64_t first = std::max<std::int64_t>(0, ext - 64);
  for (std::int64_t p = first; p < ext; ++p) {
    cos_sin_at(f, p, co, si);
    for (std::size_t i = 0; i < n; ++i) {
      for (const double v : {co[i], si[i]}) {
        const float x = static_cast<float>(v);
        err16 = detail::max_nan(
            err16,
            std::abs(static_cast<double>(detail::f32_from_f16(detail::f16_from_f32(x))) - v));
        errbf = detail::max_nan(
            errbf,
            std::abs(static_cast<double>(detail::f32_from_bf16(detail::bf16_from_f32(x))) - v));
      }
      if (f.inv_freq[i] > 0) {
        const auto bf = [](double v) {
          return static_cast<double>(
              detail::f32_from_bf16(detail::bf16_from_f32(static_cast<float>(v))));
        };
        const double angle = bf(bf(static_cast<double>(p)) * bf(f.inv_freq[i]));
        const double a = f.attention_factor;
        errangle =
            detail::max_nan(errangle, detail::max_nan(std::abs(a * std::cos(angle) - co[i]),
                                                      std::abs(a * std::sin(angle) - si[i])));
      }
    }
  }
  // The slowest rotated pair: how many positions one rounding step of cos/sin spans there.
  double w_min = 0.0;
  for (const double w : f.inv_freq) {
    if (w > 0 && (w_min == 0.0 || w < w_min)) w_min = w;
  }
  const double a = std::max(f.attention_factor, 1e-300);
  const double blur16 = w_min > 0 ? err16 / a / w_min : 0.0;
  const double blurbf = w_min > 0 ? errbf / a / w_min : 0.0;
  out.push_back(make(
      "half-precision-table", "info",
      "cos/sin kept in fp16/bf16 near the extended context (" + std::to_string(ext) + ")",
      "Over positions " + std::to_string(first) + " .. " + std::to_string(ext - 1) +
          ", rounding the exact cos/sin (attention factor included) to fp16 changes them by up "
          "to " +
          detail::sci(err16, 2) + ", to bf16 by up to " + detail::sci(errbf, 2) +
          ": an angle error of about " + detail::sci(err16 / a, 2) + " and " +
          detail::sci(errbf / a, 2) + " rad. In the slowest pair (" + detail::sci(w_min, 2) +
          " rad per token) that is " + detail::sig(blur16, 4) + " and " + detail::sig(blurbf, 4) +
          " positions' worth of rotation. transformers casts "
          "cos/sin to the activation dtype (cos.to(x.dtype)) and vLLM stores its cos/sin cache in "
          "the model "
          "dtype, so both carry this; llama.cpp computes cos/sin in float32 inside ggml_rope. "
          "Forming the "
          "angle itself in bf16 (position ids times inv_freq under autocast) is far worse: up to " +
          detail::sci(errangle, 2) + " in cos/sin here.",
      "Keep the angle p x inv_freq and cos/sin in float32 (transformers disables autocast for "
      "this); round "
      "only when q and k are rotated. posenc's kernels compute cos/sin in float32 for any dtype of "
      "q and k."));
}

void engine_unsupported(const Comparison& cmp, std::vector<Finding>& out) {
  for (const EngineComparison& e : cmp.engines) {
    if (e.view.supported) continue;
    out.push_back(
        make("engine-unsupported", "warning",
             std::string(engine_name(e.view.engine)) + " cannot run this RoPE as the model asks",
             e.view.unsupported_reason + ".",
             "Use an engine that implements " + method_name(cmp.spec) +
                 ", or convert the model to a method that engine supports."));
  }
}

// ---------------------------------------------------------------------------------------------
// Per-layer and pair-layout variants (issue 12 item 6: Llama 4, Gemma 3, llama3 low == high)

void llama4_pair_layout(const ModelConfig& c, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  if (!c.model_type.starts_with("llama4") || s.layout != Layout::kInterleaved) return;
  const std::int64_t n = s.rotary_dim / 2;
  out.push_back(make(
      "llama4-pair-layout", "info",
      "Llama 4 rotates adjacent pairs in transformers, halves in vLLM and SGLang",
      "transformers' Llama4TextRotaryEmbedding multiplies (q[2i], q[2i + 1]) as complex numbers, "
      "i < " +
          std::to_string(n) + " of head_dim " + std::to_string(s.head_dim) +
          "; vLLM and SGLang permute the q/k projection weights at load "
          "(permute_qk_weight_for_rotary: w.view(heads, " +
          std::to_string(n) + ", 2, in).transpose(1, 2)) and rotate (q[i], q[i + " +
          std::to_string(n) +
          "]). The attention scores are the same; the raw q/k tensors are not: transformers' dim "
          "2i is vLLM's dim i, and 2i + 1 is i + " +
          std::to_string(n) + ".",
      "Compare q/k between these engines only after permuting one side (posenc apply --layout "
      "interleaved reproduces transformers, --layout half-split vLLM's permuted weights)."));
}

void gemma3_sliding_layers(const ModelConfig& c, std::vector<Finding>& out) {
  const auto sliding = c.layer_specs.find("sliding_attention");
  const auto full = c.layer_specs.find("full_attention");
  if (sliding == c.layer_specs.end() || full == c.layer_specs.end()) return;
  const RopeSpec& global = full->second;
  if (global.method == Method::kNone || sliding->second.method != Method::kNone) return;
  // vLLM #29111: the global layers' scaling applied to the sliding ones as well.
  RopeSpec wrong = sliding->second;
  wrong.method = global.method;
  wrong.factor = global.factor;
  wrong.original_max_position_embeddings = global.original_max_position_embeddings;
  wrong.yarn = global.yarn;
  wrong.llama3 = global.llama3;
  wrong.longrope = global.longrope;
  try {
    validate(wrong);
  } catch (const Error&) {
    return;  // the global method does not fit the sliding layers' dims: nothing to measure
  }
  const Frequencies right_f = compute_frequencies(sliding->second, Numerics::kPrecise);
  const Frequencies wrong_f = compute_frequencies(wrong, Numerics::kPrecise);
  const std::int64_t context = std::max<std::int64_t>(context_lengths(global).extended, 1);
  const double at_context = max_angle_difference(right_f, wrong_f, context - 1);
  std::size_t sliding_layers = 0;
  for (const LayerRope& l : c.layers) sliding_layers += l.type == "sliding_attention" ? 1 : 0;
  char angle[32];
  std::snprintf(angle, sizeof angle, "%.3f", at_context);
  out.push_back(make(
      "gemma3-sliding-layers", "info",
      "the sliding-window layers use base " + detail::shortest(sliding->second.rope_theta) +
          " without " + method_name(global) + " x" + detail::shortest(global.factor),
      "Only the full-attention layers are scaled (" + method_name(global) + " x" +
          detail::shortest(global.factor) + ", base " + detail::shortest(global.rope_theta) +
          "); the " + (sliding_layers ? std::to_string(sliding_layers) + " " : std::string()) +
          "sliding-window layers run default RoPE at base " +
          detail::shortest(sliding->second.rope_theta) +
          " (llama.cpp: rope_freq_scale_train_swa). vLLM #28542 applied the scaling to every "
          "layer after the move to rope_parameters (#29111 fixed it): the sliding layers' angles "
          "at position " +
          std::to_string(context - 1) + " are then off by up to " + angle +
          " rad, which broke Gemma 3's perplexity.",
      "Check that the engine builds two rotary embeddings (local: rope_local_base_freq, no "
      "scaling); posenc inspect --layer-type sliding_attention shows the local one."));
}

void llama3_equal_freq_factors(const ModelConfig& c, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  if (s.method != Method::kLlama3 || s.llama3.low_freq_factor != s.llama3.high_freq_factor) return;
  const Frequencies f = compute_frequencies(s, Numerics::kPrecise);
  std::size_t divided = 0;
  for (std::size_t i = 0; i < f.inv_freq.size(); ++i) {
    divided += f.inv_freq[i] < f.unscaled_inv_freq[i] ? 1 : 0;
  }
  const std::string lf = detail::shortest(s.llama3.low_freq_factor);
  const std::string L = std::to_string(s.original_max_position_embeddings);
  out.push_back(make(
      "llama3-equal-freq-factors", "info",
      "llama3 scaling with low_freq_factor == high_freq_factor (" + lf + "): no smooth band",
      "The smooth term (L / wavelength - " + lf +
          ") / (high_freq_factor - low_freq_factor) "
          "divides by zero. transformers computes it for every pair and torch.where discards it "
          "(NaN only for a wavelength of exactly L / " +
          lf +
          "); vLLM guards it (smooth = 0); "
          "convert_hf_to_gguf.py reaches the division only for that exact wavelength; FlashInfer's "
          "apply_llama31_rope computes 1 / (hi - lo) for every pair (a NaN hazard found by "
          "reading, "
          "not run). For this model " +
          std::to_string(divided) + " of " + std::to_string(f.inv_freq.size()) +
          " pairs (wavelength above " + L + " / " + lf + ") are divided by " +
          detail::shortest(s.factor) + " and the rest kept.",
      "Nothing to change in the config; an engine or kernel of your own must guard high == low "
      "(posenc does, as vLLM)."));
}

}  // namespace

std::vector<Finding> diagnose(const ModelConfig& config) { return diagnose(config, {}); }

std::vector<Finding> diagnose(const ModelConfig& config, const DoctorOptions& options) {
  const Comparison cmp = compare_engines(config.spec, 0, {}, config.model_type);
  std::vector<Finding> out;
  integer_factor(config, out);
  factor_mismatch(config, out);
  missing_original_context(config, out);
  assumed_context(config, out);
  attention_factor_engines(config, cmp, out);
  truncate_ignored(config, cmp, out);
  partial_rotary(config, out);
  dynamic_kv_cache(config, out);
  longrope_switch(config, out);
  half_precision_table(config, out);
  engine_unsupported(cmp, out);
  llama4_pair_layout(config, out);
  gemma3_sliding_layers(config, out);
  llama3_equal_freq_factors(config, out);
  mrope_doctor::add_findings(config, options, cmp, out);
  return out;
}

FindingCounts count_findings(const std::vector<Finding>& findings) {
  FindingCounts n;
  for (const Finding& f : findings) {
    (f.severity == "error" ? n.error : f.severity == "warning" ? n.warning : n.info) += 1;
  }
  return n;
}

}  // namespace posenc
