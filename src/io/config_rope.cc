// One RoPE dict of config.json -> RopeSpec (config.h).
//
// Reference semantics: transformers' modeling_rope_utils.py, v4 (`_compute_*_parameters`,
// `_validate_*_parameters`, `_check_received_keys`) and v5 (RotaryEmbeddingConfigMixin's
// `standardize_rope_params` and `_validate_*_rope_parameters`).
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "io/config_internal.h"
#include "posenc/core/defaults.h"
#include "util/format.h"

namespace posenc::detail {
namespace {

class RopeReader {
 public:
  RopeReader(Context& ctx, const Shared& shared, const json* dict, std::string path, bool v5)
      : ctx_(ctx), sh_(shared), path_(std::move(path)), v5_(v5), s_(shared.base) {
    static const json kEmpty = json::object();
    d_.emplace(dict ? *dict : kEmpty, path_ + ".", ctx_);
  }

  RopeSpec read(bool per_layer) {
    read_method();
    if (auto theta = d_->number("rope_theta")) s_.rope_theta = *theta;
    switch (s_.method) {
      case Method::kNone:
        break;
      case Method::kLinear:
      case Method::kNtk:
        s_.factor = factor(/*required=*/true);
        break;
      case Method::kDynamic:
        s_.factor = factor(/*required=*/true);
        // _validate_dynamic_scaling_rope_parameters lists it as optional; dynamic NTK uses L'.
        s_.original_max_position_embeddings =
            d_->integer("original_max_position_embeddings").value_or(0);
        break;
      case Method::kYarn:
      case Method::kDynamicYarn:
        read_yarn();
        break;
      case Method::kLlama3:
        read_llama3();
        break;
      case Method::kLongrope:
        read_longrope();
        break;
      case Method::kProportional:
        s_.factor = factor(/*required=*/false);
        break;
      case Method::kNtkAlpha:
        read_alpha();
        break;
    }
    read_rotary_dim();
    read_axis_map();
    if (const auto unread = d_->unread(); !unread.empty()) {
      // _check_received_keys: "Unrecognized keys in `rope_scaling` for 'rope_type'='yarn': ..."
      std::string set;
      for (const std::string& k : unread) set += (set.empty() ? "'" : ", '") + k + "'";
      ctx_.warn("Unrecognized keys in `" + path_ + "` for 'rope_type'='" + method_name(s_) +
                "': {" + set + "}; they were not applied");
    }
    const std::string prefix = ctx_.source + ": " + (per_layer ? path_ + ": " : "");
    std::vector<std::string> warnings;
    try {
      warnings = validate(s_);
    } catch (const Error& e) {
      throw Error(prefix + e.what());
    }
    for (const std::string& w : warnings) ctx_.warnings.push_back(prefix + w);
    return s_;
  }

 private:
  // "rope_type", or the legacy "type" (`rope_scaling.get("rope_type", rope_scaling.get("type",
  // "default"))`).
  void read_method() {
    const auto rope_type = d_->string("rope_type");
    const auto type = d_->string("type");
    if (rope_type && type && *rope_type != *type) {
      ctx_.fail(d_->name("rope_type") + " (\"" + *rope_type + "\") and " + d_->name("type") +
                " (\"" + *type + "\") disagree");
    }
    if (!rope_type && !type) return;
    const std::string& name = rope_type ? *rope_type : *type;
    const std::string field = d_->name(rope_type ? "rope_type" : "type");
    // posenc's "ntk" (static NTK-aware) is a command-line name: transformers has no such
    // rope_type (ROPE_INIT_FUNCTIONS raises), and vLLM's "ntk" is another formula, so a config
    // that says "ntk" has no one meaning to compute.
    if (name == "ntk") {
      ctx_.fail(field + " (\"ntk\") is not a transformers rope_type, which is one of " +
                kTransformersTypes +
                "; posenc's \"ntk\" (static NTK-aware) is a --rope-type / --scaling name, and for "
                "dynamic NTK "
                "a config says \"dynamic\"");
    }
    // Qwen2VLConfig: `if self.rope_scaling["type"] == "mrope": self.rope_scaling["type"] =
    // "default"` (mrope_section carries the axis map). vLLM's "xdrope" (HunYuan-VL) is the NTK
    // alpha base with a four-axis map.
    if (name == "mrope") {
      mrope_type_ = field;
      return;
    }
    if (name == "xdrope") {
      xdrope_type_ = field;
      if (d_->contains("alpha")) s_.method = Method::kNtkAlpha;
      return;
    }
    try {
      set_method(s_, name, field);
    } catch (const Error& e) {
      ctx_.fail(e.what());
    }
    // Hunyuan ships {"type": "dynamic", "alpha": A, "factor": 1.0}: its rotary embedding scales the
    // base by alpha, not by the dynamic NTK of transformers.
    if (s_.method == Method::kDynamic && d_->contains("alpha")) s_.method = Method::kNtkAlpha;
    if (name == "yarn-paper" || name == "dynamic-yarn" || name == "dynamic_yarn" ||
        name == "dynamic-yarn-paper" || name == "none") {
      ctx_.warn(field + " (\"" + name + "\") is posenc's own name, not a transformers rope_type (" +
                kTransformersTypes +
                "): transformers cannot load this config, and posenc computes its " +
                method_name(s_) + " method");
    }
  }

  static constexpr const char* kTransformersTypes =
      "default, linear, dynamic, yarn, longrope, llama3, proportional (legacy: su)";

  [[noreturn]] void missing(const std::string& key) const {
    ctx_.fail(d_->name(key) + " is missing; rope_type \"" + method_name(s_) + "\" requires it");
  }

  // A number that transformers v4 wants as a Python float: an integer gets its warning.
  std::optional<double> float_field(const std::string& key, const std::string& rule,
                                    bool required) {
    if (required && !d_->contains(key)) missing(key);
    const auto v = d_->number(key);
    if (!v && required) d_->fail(key, json(), "must be a number");
    if (v && d_->object().at(key).is_number_integer()) {
      ctx_.warn(d_->name(key) + " field must be " + rule + ", got " + show(d_->object().at(key)));
    }
    return v;
  }

  void read_alpha() {
    const json& a = d_->object().at("alpha");
    if (!a.is_number()) d_->fail("alpha", a, "must be a number greater than 0");
    s_.alpha = *d_->number("alpha");
    if (!(std::isfinite(s_.alpha) && s_.alpha > 0))
      d_->fail("alpha", a, "must be a number greater than 0");
    // HunYuan's rotary embedding reads only alpha; its factor (1.0) changes nothing.
    if (const double f = factor(/*required=*/false); f != 1.0) {
      ctx_.warn(d_->name("factor") + " (" + show(d_->object().at("factor")) +
                ") is not applied: with alpha, the base is scaled by alpha alone (HunYuan's rotary "
                "embedding)");
    }
  }

  double factor(bool required) {
    return float_field("factor", "a float >= 1", required).value_or(kDefaultFactor);
  }

  std::optional<double> attention_factor() {
    return float_field("attention_factor", "a float greater than 0", false);
  }

  // L, the original context: `key` in the dict, else the top-level value, else L' (v5
  // standardize_rope_params: `setdefault("original_max_position_embeddings",
  // max_position_embeddings)`).
  std::int64_t original_context() {
    const std::string key = "original_max_position_embeddings";
    const auto in_dict = d_->integer(key);
    if (in_dict) {
      if (sh_.top_original && *sh_.top_original != *in_dict) {
        ctx_.warn(d_->name(key) + " (" + std::to_string(*in_dict) +
                  ") differs from the top-level " + key + " (" + std::to_string(*sh_.top_original) +
                  "); " + d_->name(key) + " is used");
      }
      return *in_dict;
    }
    if (sh_.top_original) return *sh_.top_original;
    if (s_.max_position_embeddings > 0) {
      ctx_.warn(d_->name(key) + " is not set: inferred from max_position_embeddings (" +
                std::to_string(s_.max_position_embeddings) +
                "), as transformers' standardize_rope_params does");
      return s_.max_position_embeddings;
    }
    ctx_.fail(d_->name(key) + " is missing and max_position_embeddings is not set; rope_type \"" +
              method_name(s_) + "\" needs the original context length");
  }

  double implicit_factor() const {
    return static_cast<double>(s_.max_position_embeddings) /
           static_cast<double>(s_.original_max_position_embeddings);
  }

  // _compute_yarn_parameters.
  void read_yarn() {
    YarnParams& y = s_.yarn;
    s_.original_max_position_embeddings = original_context();
    if (!d_->contains("factor")) missing("factor");
    if (!d_->get("factor") && s_.max_position_embeddings > 0) {
      // v5 `if factor is None: factor = max_position_embeddings / original_max_position_embeddings`
      s_.factor = implicit_factor();
      ctx_.warn(d_->name("factor") + " is null: max_position_embeddings / " +
                "original_max_position_embeddings = " + num(s_.factor) + " is used");
    } else {
      s_.factor = factor(/*required=*/true);
    }
    y.attention_factor = attention_factor();
    // `rope_scaling.get("beta_fast") or 32`: null and 0 both fall back to the default.
    for (auto [key, field, fallback] : {std::tuple{"beta_fast", &y.beta_fast, kYarnBetaFast},
                                        std::tuple{"beta_slow", &y.beta_slow, kYarnBetaSlow}}) {
      const auto v = float_field(key, "a float", false);
      *field = v.value_or(fallback);
      if (v && *v == 0) {
        *field = fallback;
        ctx_.warn(d_->name(key) + " (0) reads as unset in transformers (`" + key + " or " +
                  num(fallback) + "`): " + num(fallback) + " is used");
      }
    }
    y.mscale = d_->number("mscale");
    y.mscale_all_dim = d_->number("mscale_all_dim");
    if (d_->contains("truncate") && !d_->get("truncate")) {
      y.truncate = false;  // `if truncate:` with None
      ctx_.warn(d_->name("truncate") + " is null, which transformers reads as false");
    } else {
      y.truncate = d_->boolean("truncate").value_or(true);
    }
    if (auto e = d_->number("extrapolation_factor")) y.extrapolation_factor = *e;
  }

  // _compute_llama3_parameters; every key is required (_validate_llama3_parameters).
  void read_llama3() {
    const std::string key = "original_max_position_embeddings";
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor", key.c_str()}) {
      if (!d_->contains(k)) missing(k);
    }
    s_.factor = factor(/*required=*/true);
    s_.llama3.low_freq_factor = *float_field("low_freq_factor", "a float", true);
    s_.llama3.high_freq_factor = *float_field("high_freq_factor", "a float", true);
    s_.original_max_position_embeddings = d_->required_integer(key, "by rope_type \"llama3\"");
    if (sh_.top_original && *sh_.top_original != s_.original_max_position_embeddings) {
      ctx_.warn("the top-level " + key + " (" + std::to_string(*sh_.top_original) +
                ") differs from " + d_->name(key) + " (" +
                std::to_string(s_.original_max_position_embeddings) + "); " + d_->name(key) +
                " is used");
    }
  }

  // _compute_longrope_parameters. Phi-3 keeps L at the top level and transformers then takes
  // factor = max_position_embeddings / L, whatever the dict says.
  void read_longrope() {
    for (const char* k : {"short_factor", "long_factor"}) {
      if (!d_->contains(k)) missing(k);
    }
    s_.longrope.short_factor = d_->number_list("short_factor");
    s_.longrope.long_factor = d_->number_list("long_factor");
    s_.longrope.attention_factor = attention_factor();
    const std::string key = "original_max_position_embeddings";
    const auto in_dict = d_->integer(key);
    const auto factor_in_dict = float_field("factor", "a float >= 1", false);
    const std::int64_t max_pos = s_.max_position_embeddings;
    if (sh_.top_original) {
      s_.original_max_position_embeddings = *sh_.top_original;
      if (max_pos == 0) {
        ctx_.fail("the top-level " + key + " (" + std::to_string(*sh_.top_original) +
                  ") needs max_position_embeddings: longrope's factor is their ratio");
      }
      s_.factor = implicit_factor();
      if (factor_in_dict && *factor_in_dict != s_.factor) {
        ctx_.warn(d_->name("factor") + " (" + num(*factor_in_dict) +
                  ") is replaced by max_position_embeddings / " + key + " = " + num(s_.factor) +
                  ", as transformers does when " + key + " is set at the top level");
      }
      if (in_dict && *in_dict != *sh_.top_original) {
        ctx_.warn(d_->name(key) + " (" + std::to_string(*in_dict) +
                  ") differs from the top-level " + key + " (" + std::to_string(*sh_.top_original) +
                  "); the top-level value is used, as in transformers");
      }
      return;
    }
    if (!in_dict && max_pos == 0) {
      ctx_.fail(d_->name(key) + " is missing and max_position_embeddings is not set; " +
                "longrope needs the original context length");
    }
    s_.original_max_position_embeddings = in_dict.value_or(max_pos);
    if (factor_in_dict) {
      s_.factor = *factor_in_dict;
    } else if (max_pos > 0) {
      s_.factor = implicit_factor();
    } else {
      ctx_.fail(d_->name("factor") + " is missing and max_position_embeddings is not set; " +
                "longrope needs one of them");
    }
  }

  // D: the family's fixed rotary_dim, else int(head_dim * partial_rotary_factor) where the
  // factor applies (see config.h), else head_dim. Proportional RoPE keeps a head_dim-wide table.
  void read_rotary_dim() {
    std::optional<Prf> prf;
    if (auto p = d_->number("partial_rotary_factor")) {
      prf = Prf{*p, d_->name("partial_rotary_factor")};
    }
    if (s_.method == Method::kProportional) {
      if (!prf) prf = sh_.top_prf;
      if (!prf) {
        // _validate_proportional_rope_parameters
        ctx_.warn(path_ +
                  " sets no partial_rotary_factor: it defaults to 1.0, which makes "
                  "proportional RoPE plain linear scaling");
      }
      s_.partial_rotary_factor = prf ? prf->value : 1.0;
      s_.rotary_dim = s_.head_dim;
      return;
    }
    if (sh_.fixed_rotary_dim) {
      s_.rotary_dim = *sh_.fixed_rotary_dim;
      if (!prf) prf = sh_.top_prf;
      if (prf) {
        ctx_.warn(prf->key + " (" + num(prf->value) + ") is ignored: model_type \"" +
                  sh_.model_type + "\" rotates " + sh_.fixed_rotary_key + " (" +
                  std::to_string(s_.rotary_dim) + ") dims");
      }
      return;
    }
    s_.rotary_dim = s_.head_dim;
    bool llama_scaled = false;
    if (!prf && sh_.top_prf) {
      // v5 copies the top-level value into rope_parameters, where every rope init function reads
      // it; v4 Llama-family classes rotate the whole head for default RoPE.
      if (v5_ || sh_.family != Family::kLlama) {
        prf = sh_.top_prf;
      } else if (s_.method == Method::kNone) {
        ctx_.warn(sh_.top_prf->key + " (" + num(sh_.top_prf->value) +
                  ") is ignored for default RoPE: the Llama-family class of model_type \"" +
                  sh_.model_type + "\" rotates the whole head (head_dim " +
                  std::to_string(s_.head_dim) + ")");
      } else {
        prf = sh_.top_prf;
        llama_scaled = true;
      }
    }
    if (!prf) return;
    const double p = prf->value;
    if (!(p > 0 && p <= 1)) {
      ctx_.fail(prf->key + " (" + num(p) + ") must be in (0, 1]");
    }
    // transformers: dim = int(head_dim * partial_rotary_factor).
    const double product = std::floor(static_cast<double>(s_.head_dim) * p);
    const std::int64_t dim = product < 0x1p63 ? static_cast<std::int64_t>(product) : s_.head_dim;
    if (dim < 2 || dim % 2 != 0) {
      ctx_.fail(prf->key + " (" + num(p) + ") times head_dim (" + std::to_string(s_.head_dim) +
                ") gives rotary_dim " + std::to_string(dim) +
                "; it must be a positive even number");
    }
    s_.rotary_dim = dim;
    if (llama_scaled) {
      ctx_.warn(prf->key + " (" + num(p) + ") is honoured for rope_type \"" + method_name(s_) +
                "\" (transformers' rope init functions read it): rotary_dim " +
                std::to_string(dim) + " of head_dim " + std::to_string(s_.head_dim) +
                ", although default RoPE would rotate the whole head");
    }
  }

  // Sections as integers: [16, 24, 24].
  std::vector<std::int64_t> sections(const std::string& key) {
    const json* v = d_->get(key);
    if (!v) return {};
    if (!v->is_array()) d_->fail(key, *v, "must be a list of non-negative integers");
    std::vector<std::int64_t> out;
    for (const json& e : *v) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < 0)
        d_->fail(key, *v, "must be a list of non-negative integers");
      out.push_back(e.get<std::int64_t>());
    }
    return out;
  }

  // The axis map (M-RoPE): mrope_section [+ mrope_interleaved], or xdrope_section. The rule
  // follows the model: interleaved when mrope_interleaved (Qwen3-VL), ERNIE-4.5-VL's (h, w, t)
  // alternation, GLM-4.1V's half head in adjacent pairs, else contiguous (Qwen2-VL, Qwen2.5-VL).
  void read_axis_map() {
    const std::vector<std::int64_t> mrope = sections("mrope_section");
    const std::vector<std::int64_t> xd = sections("xdrope_section");
    const bool interleaved = d_->boolean("mrope_interleaved").value_or(false);
    if (!mrope_type_.empty() && mrope.empty()) {
      ctx_.fail(mrope_type_ + " (\"mrope\") needs " + d_->name("mrope_section") +
                ", the slots of the t, h and w axes");
    }
    if (!xdrope_type_.empty() && xd.empty()) {
      ctx_.fail(xdrope_type_ + " (\"xdrope\") needs " + d_->name("xdrope_section") +
                ", the slots of its four axes");
    }
    if (!mrope.empty() && !xd.empty()) {
      ctx_.fail(d_->name("mrope_section") + " and " + d_->name("xdrope_section") +
                " are both set; a model has one axis map");
    }
    if (interleaved && mrope.empty()) {
      ctx_.fail(d_->name("mrope_interleaved") + " (true) needs " + d_->name("mrope_section"));
    }
    if (mrope.empty() && xd.empty()) return;
    const std::string& type = sh_.model_type;
    const bool ernie =
        type.find("ernie") != std::string::npos && type.find("vl") != std::string::npos;
    const bool glm4v = type.rfind("glm4v", 0) == 0;
    try {
      if (!xd.empty()) {
        s_.axis_map = xdrope_sections(xd);
      } else if (interleaved) {
        s_.axis_map = mrope_interleaved(mrope);
      } else if (ernie) {
        s_.axis_map = ernie_mrope(mrope);
        s_.layout = Layout::kInterleaved;  // GPT-J pairs (repeat_interleave(2))
      } else if (glm4v) {
        set_glm4v_mrope(s_, mrope);
      } else {
        s_.axis_map = mrope_sections(mrope);
      }
    } catch (const Error& e) {
      ctx_.fail(d_->name(xd.empty() ? "mrope_section" : "xdrope_section") + ": " + e.what());
    }
  }

  std::string mrope_type_;   // the field that said "mrope" (legacy Qwen2-VL)
  std::string xdrope_type_;  // the field that said "xdrope"
  Context& ctx_;
  const Shared& sh_;
  std::string path_;
  bool v5_;
  RopeSpec s_;
  std::optional<Fields> d_;
};

}  // namespace

RopeSpec read_rope_dict(Context& ctx, const Shared& shared, const json* dict,
                        const std::string& path, bool v5, bool per_layer) {
  return RopeReader(ctx, shared, dict, path, v5).read(per_layer);
}

}  // namespace posenc::detail
