// Extending a model with a scaling method of the caller's choice (extend.h).
//
// The fields written follow the transformers configs of extended models: Qwen2.5's documented
// YaRN block sets factor and original_max_position_embeddings, gpt-oss and DeepSeek also set
// max_position_embeddings = factor * original context; transformers' dynamic NTK
// (`_compute_dynamic_ntk_parameters`) reads max_position_embeddings as the trained length.
#include "posenc/io/extend.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "posenc/core/error.h"
#include "util/format.h"

namespace posenc {
namespace {

using detail::num;

// --factor and --target-context agree when S and N / L0 differ by less than this, relatively:
// a few ulps of the division, far below any factor a person would type.
constexpr double kFactorAgreement = 1e-12;

bool is_yarn_family(Method m) { return method_info(m).reads_param(kParamYarn); }

std::string describe(const RopeSpec& s) {
  std::string out = method_name(s) + " (factor " + num(s.factor);
  if (s.original_max_position_embeddings > 0) {
    out += ", original context " + std::to_string(s.original_max_position_embeddings);
  }
  return out + ")";
}

// The values of the flags only extend_spec reads; the method parameters' are set_method_params'.
void check_values(const ExtendOptions& o) {
  if (o.factor && !(std::isfinite(*o.factor) && *o.factor > 0)) {
    throw Error("--factor (" + num(*o.factor) + ") must be a finite number greater than 0");
  }
  if (o.target_context && *o.target_context <= 0) {
    throw Error("--target-context (" + std::to_string(*o.target_context) +
                ") must be a positive integer");
  }
  if (o.rope_theta && !(std::isfinite(*o.rope_theta) && *o.rope_theta > 1)) {
    throw Error("--rope-theta (" + num(*o.rope_theta) + ") must be a finite number greater than 1");
  }
}

// Replaces the method; returns the warning that says so ("" when the base had no scaling).
std::string apply_method(RopeSpec& s, const RopeSpec& base, const std::string& name) {
  RopeSpec probe;
  set_method(probe, name, "--scaling");
  const std::string to = method_name(probe);
  if (to == method_name(base)) return "";
  if (probe.method == Method::kProportional) {
    throw Error("--scaling (\"" + name +
                "\"): proportional RoPE is how a model was trained (a fraction of each head "
                "rotated), not a context extension; choose linear, ntk, dynamic, yarn, "
                "yarn-paper, dynamic-yarn, llama3 or none");
  }
  if (probe.method == Method::kLongrope) {
    throw Error("--scaling (\"" + name + "\"): LongRoPE needs the per-pair short_factor and " +
                "long_factor lists found by its search for a trained model, and this model (" +
                method_name(base) + ") has none; use a model or preset that ships them " +
                "(phi-3-mini-128k, phi-3.5-mini), or another method");
  }
  const bool keep_yarn = is_yarn_family(base.method) && is_yarn_family(probe.method);
  s.method = probe.method;
  if (!keep_yarn) {
    s.yarn = YarnParams{};
    s.llama3 = Llama3Params{};
    s.longrope = LongropeParams{};
  }
  s.yarn.ramp = probe.yarn.ramp;
  if (!base.freq_factors.empty()) {
    // rope_freqs are the model's scaling (Llama 3's, precomputed by the GGUF converter).
    s.freq_factors.clear();
    return "--scaling " + to + " replaces the model's own scaling: the " +
           std::to_string(base.freq_factors.size()) +
           " freq_factors (llama.cpp's rope_freqs) are dropped";
  }
  if (base.method == Method::kNone) return "";
  return "--scaling " + to + " replaces the model's own " + describe(base) +
         (keep_yarn ? "; its YaRN parameters are kept" : "");
}

// Sets factor and the contexts from --factor / --target-context (or the implied target).
void apply_factor(RopeSpec& s, std::int64_t l0, std::optional<std::int64_t> target,
                  const std::optional<double>& factor, std::vector<std::string>& notes) {
  if (target && l0 <= 0) {
    throw Error("--target-context (" + std::to_string(*target) +
                ") needs the model's original context, and it sets neither "
                "original_max_position_embeddings nor max_position_embeddings; give --factor");
  }
  double s_new = 0;
  if (target) {
    const double implied = static_cast<double>(*target) / static_cast<double>(l0);
    if (factor && std::abs(*factor - implied) > kFactorAgreement * *factor) {
      throw Error("--factor (" + num(*factor) + ") and --target-context (" +
                  std::to_string(*target) + ") disagree: --target-context / original context = " +
                  std::to_string(*target) + " / " + std::to_string(l0) + " = " + num(implied));
    }
    s_new = factor ? *factor : implied;
    if (*target <= l0) {
      notes.push_back("--target-context (" + std::to_string(*target) +
                      ") is not larger than the original context (" + std::to_string(l0) +
                      "): factor " + num(s_new) + " does not extend the context");
    }
  } else {
    s_new = *factor;
  }
  s.factor = s_new;
  if (l0 <= 0) return;
  // The context reached, s * L0, must be a count of positions (validate's bound, 2^53), before
  // it is rounded to an integer (llround of 1e300 * 4096 is undefined).
  if (!(s_new * static_cast<double>(l0) <= 0x1p53)) {
    throw Error("--factor (" + num(s_new) + ") times the original context (" + std::to_string(l0) +
                ") exceeds 2^53 positions");
  }
  s.original_max_position_embeddings = l0;
  if (method_reads(s, kParamMaxContext)) {
    s.max_position_embeddings = l0;  // dynamic NTK: L' is the trained length
  } else {
    s.max_position_embeddings =
        target ? *target : static_cast<std::int64_t>(std::llround(s_new * static_cast<double>(l0)));
  }
}

}  // namespace

std::int64_t reachable_context(const RopeSpec& s) {
  std::int64_t c = s.max_position_embeddings;
  const bool ratio = method_info(s).factor_is_ratio;
  if (ratio && s.original_max_position_embeddings > 0 && s.factor > 1) {
    // validate() bounds s * L by 2^53, so the rounding below is defined for a valid spec.
    const double reach =
        std::min(0x1p53, s.factor * static_cast<double>(s.original_max_position_embeddings));
    c = std::max(c, static_cast<std::int64_t>(std::llround(reach)));
  }
  return c;
}

bool ExtendOptions::empty() const {
  return !scaling && !target_context && !factor && !rope_theta && params_empty();
}

std::string ExtendOptions::flags() const {
  std::string out;
  const auto add = [&out](const char* flag, const std::string& value) {
    if (!out.empty()) out += ' ';
    out.append(flag).append(1, ' ').append(value);
  };
  if (scaling) add("--scaling", *scaling);
  if (target_context) add("--target-context", std::to_string(*target_context));
  if (factor) add("--factor", num(*factor));
  if (rope_theta) add("--rope-theta", num(*rope_theta));
  if (!params_empty()) out += (out.empty() ? "" : " ") + param_flags();
  return out;
}

RopeSpec extend_spec(const RopeSpec& base, const ExtendOptions& o,
                     std::vector<std::string>* warnings) {
  if (o.empty()) return base;
  check_values(o);
  std::vector<std::string> notes;
  RopeSpec s = base;
  const std::string base_name = method_name(base);
  if (o.scaling) {
    if (std::string note = apply_method(s, base, *o.scaling); !note.empty()) notes.push_back(note);
  }
  const bool changed = method_name(s) != base_name;
  const std::int64_t l0 = base.original_max_position_embeddings > 0
                              ? base.original_max_position_embeddings
                              : base.max_position_embeddings;
  if (s.method == Method::kNone) {
    if (o.factor || o.target_context) {
      throw Error(
          std::string(o.target_context ? "--target-context (" + std::to_string(*o.target_context)
                                       : "--factor (" + num(*o.factor)) +
          ") needs a scaling method, and rope_type is \"default\"; choose one with --scaling");
    }
    if (changed) {
      s.factor = kDefaultFactor;
      s.original_max_position_embeddings = 0;
      if (l0 > 0) s.max_position_embeddings = l0;
      notes.push_back("the model's scaling is removed: default RoPE over its original context (" +
                      std::to_string(l0) + ")");
    }
  } else {
    std::optional<std::int64_t> target = o.target_context;
    if (!target && !o.factor && changed && method_info(s).factor_required) {
      // A scaled model keeps the context it reaches; a model without scaling has no target.
      const std::int64_t r = base.method == Method::kNone ? 0 : reachable_context(base);
      if (r <= 0) {
        throw Error("--scaling " + method_name(s) + " needs --factor or --target-context");
      }
      target = r;
      notes.push_back("--scaling " + method_name(s) +
                      " without --factor or --target-context keeps the context " +
                      "the model reaches (" + std::to_string(r) + "): factor " + std::to_string(r) +
                      " / " + std::to_string(l0) + " = " +
                      num(static_cast<double>(r) / static_cast<double>(l0)));
    }
    if (changed && method_reads(s, kParamAlpha) && !o.alpha) {
      throw Error("--scaling " + method_name(s) +
                  " needs --alpha (its base is rope_theta * alpha^(D / (D - 2)))");
    }
    if (target || o.factor) {
      apply_factor(s, l0, target, o.factor, notes);
    } else if (changed && l0 > 0) {
      s.original_max_position_embeddings = l0;  // dynamic-yarn: s = seq_len / L0
    }
  }
  // A parameter flag the final method does not read is refused rather than dropped.
  set_method_params(s, o, ParamNames::kFlags, "rope_type \"" + method_name(s) + "\"");
  if (o.rope_theta) s.rope_theta = *o.rope_theta;

  std::vector<std::string> before;
  try {
    before = validate(base);
  } catch (const Error&) {
    // An invalid base is reported below, through the extended spec.
  }
  std::vector<std::string> after;
  try {
    after = validate(s);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (with " + o.flags() + ")");
  }
  for (const std::string& w : after) {
    if (std::find(before.begin(), before.end(), w) == before.end()) notes.push_back(w);
  }
  if (warnings) warnings->insert(warnings->end(), notes.begin(), notes.end());
  return s;
}

}  // namespace posenc
