// Hugging Face config.json -> RopeSpec (config.h; docs/design.md §2 and §6): the top level and
// the model families. One RoPE dict is read by config_rope.cc; the JSON text and the typed field
// reader are json_fields.cc's.
//
// Reference semantics: transformers' modeling_rope_utils.py and configuration_utils.py (v4
// `rope_scaling`; v5 RotaryEmbeddingConfigMixin's `convert_rope_params_to_dict` and
// `nested_rope_parameter_keys`), plus each family's config class for head_dim, rotary_dim and
// their defaults.
#include "posenc/io/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "io/config_internal.h"
#include "posenc/core/error.h"
#include "util/file_bytes.h"
#include "util/format.h"

namespace posenc {

namespace {

using detail::Context;
using detail::Family;
using detail::Fields;
using detail::json;
using detail::num;
using detail::Prf;
using detail::show;

struct FamilyInfo {
  std::string_view model_type;
  Family family;
  double default_prf;  // the config class's partial_rotary_factor (GPT-NeoX: rotary_pct)
  std::string_view config_class;
};

// Model types whose transformers class does not simply rotate the whole head, with the class's
// default for the fraction rotated (PhiConfig `kwargs.setdefault("partial_rotary_factor", 0.5)`,
// StableLmConfig 0.25, GPTNeoXConfig `rotary_pct=0.25`, ...). Any other type is Llama-like.
constexpr FamilyInfo kFamilies[] = {
    {"phi", Family::kPartial, 0.5, "PhiConfig"},
    {"phi3", Family::kPartial, 1.0, "Phi3Config"},
    {"phimoe", Family::kPartial, 1.0, "PhimoeConfig"},
    {"stablelm", Family::kPartial, 0.25, "StableLmConfig"},
    {"persimmon", Family::kPartial, 0.5, "PersimmonConfig"},
    {"glm", Family::kPartial, 0.5, "GlmConfig"},
    {"glm4", Family::kPartial, 0.5, "Glm4Config"},
    {"glm4_moe", Family::kPartial, 0.5, "Glm4MoeConfig"},
    {"glm4v", Family::kPartial, 0.5, "Glm4vConfig"},
    {"glm4v_text", Family::kPartial, 0.5, "Glm4vTextConfig"},
    {"glm4v_moe", Family::kPartial, 0.5, "Glm4vMoeConfig"},
    {"glm4v_moe_text", Family::kPartial, 0.5, "Glm4vMoeTextConfig"},
    {"chatglm", Family::kChatglm, 1.0, "ChatGLMConfig"},
    {"nemotron", Family::kPartial, 0.5, "NemotronConfig"},
    {"qwen3_next", Family::kPartial, 0.25, "Qwen3NextConfig"},
    {"gpt_neox", Family::kGptNeox, 0.25, "GPTNeoXConfig"},
    {"gpt_neox_japanese", Family::kGptNeox, 1.0, "GPTNeoXJapaneseConfig"},
    {"gptj", Family::kGptj, 1.0, "GPTJConfig"},
    {"codegen", Family::kGptj, 1.0, "CodeGenConfig"},
    {"deepseek_v2", Family::kDeepseek, 1.0, "DeepseekV2Config"},
    {"deepseek_v3", Family::kDeepseek, 1.0, "DeepseekV3Config"},
};

constexpr FamilyInfo kLlamaLike = {"", Family::kLlama, 1.0, ""};

// Families whose transformers class rotates adjacent pairs (2i, 2i + 1) of the rotated dims:
// GlmAttention and Glm4Attention (rotate_half on x[..., 0::2] / x[..., 1::2], cos and sin
// repeat_interleave'd), Llama 4 (complex multiply, Llama4TextRotaryEmbedding), Cohere and
// Cohere2 (Command R: modeling_cohere.py's own rotate_half on x[..., ::2], x[..., 1::2]; vLLM's
// commandr is_neox_style=False). Glm4Moe is not among them: it takes gpt_neox's
// apply_rotary_pos_emb (halves).
bool adjacent_pairs(std::string_view model_type) {
  return model_type == "glm" || model_type == "glm4" || model_type == "llama4_text" ||
         model_type == "llama4" || model_type == "cohere" || model_type == "cohere2";
}

bool is_gemma3(std::string_view model_type) { return model_type.rfind("gemma3", 0) == 0; }
bool is_llama4(std::string_view model_type) { return model_type.rfind("llama4", 0) == 0; }

// Gemma3TextConfig: `sliding_window_pattern=6`, `rope_local_base_freq=10_000.0`; Llama4TextConfig:
// `no_rope_layer_interval=4`.
constexpr std::int64_t kGemma3SlidingPattern = 6;
constexpr double kGemma3LocalBase = 10000.0;
constexpr std::int64_t kLlama4NoRopeInterval = 4;

// GPTJConfig and CodeGenConfig: `rotary_dim=64`.
constexpr std::int64_t kGptjDefaultRotaryDim = 64;

const FamilyInfo& find_family(std::string_view model_type) {
  for (const FamilyInfo& f : kFamilies) {
    if (f.model_type == model_type) return f;
  }
  return kLlamaLike;
}

bool mentions_rope(std::string key) {
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key.find("rope") != std::string::npos || key.find("rotary") != std::string::npos;
}

// Values equal as transformers would compare them (8 == 8.0); nested containers never match.
bool same_value(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.is_primitive() && b.is_primitive()) return a == b;
  if (!a.is_array() || !b.is_array() || a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_primitive() || !b[i].is_primitive() || !same_value(a[i], b[i])) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The top level

class ConfigParser {
 public:
  // A vision-language config (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4.1V, ERNIE-4.5-VL as
  // transformers saves them) nests the text model, and so its RoPE, in text_config.
  ConfigParser(const json& root, std::string source)
      : ctx_{std::move(source), {}},
        outer_(root, "", ctx_),
        top_(text_config(root) ? *text_config(root) : root, text_config(root) ? "text_config." : "",
             ctx_) {}

  static const json* text_config(const json& root) {
    const auto it = root.find("text_config");
    return it != root.end() && it->is_object() ? &*it : nullptr;
  }

  ModelConfig parse() {
    ModelConfig out;
    out.source = ctx_.source;
    const bool nested = text_config(outer_.object()) != nullptr;
    out.model_type = outer_.string("model_type").value_or("");
    if (nested) {
      outer_.get("text_config");
      // The text model's own type (qwen3_vl_text, glm4v_text) picks its family.
      sh_.model_type = top_.string("model_type").value_or(out.model_type);
    } else {
      top_.string("model_type");
      sh_.model_type = out.model_type;
    }
    const FamilyInfo& family = find_family(sh_.model_type);
    sh_.family = family.family;
    read_dims(family);
    read_rope(out);
    read_layers(out);
    if (out.num_hidden_layers == 0) {
      // Only a layer count for layer_spec()'s range check: the key stays among ignored_keys, as
      // it changes no RoPE here.
      const auto n = top_.object().find("num_hidden_layers");
      if (n != top_.object().end() && n->is_number_unsigned() && n->get<std::uint64_t>() > 0 &&
          n->get<std::uint64_t>() < (std::uint64_t{1} << 32)) {
        out.num_hidden_layers = n->get<std::int64_t>();
      }
    }
    read_dual_chunk(out);
    report_unread(top_, out, nested ? "text_config." : "");
    if (nested) {
      for (auto it = outer_.object().begin(); it != outer_.object().end(); ++it) {
        if (outer_.was_read(it.key())) continue;
        const auto twin = top_.object().find(it.key());
        const bool same_as_text = twin != top_.object().end() && *twin == it.value();
        if (mentions_rope(it.key()) && !same_as_text) {
          ctx_.warn(it.key() + " (" + show(it.value()) +
                    ") is beside text_config, which holds the text model's RoPE; it was not "
                    "applied");
        } else {
          out.ignored_keys.push_back(it.key());  // vision_config among them: the vision tower's
        }
      }
      std::sort(out.ignored_keys.begin(), out.ignored_keys.end());
    }
    out.warnings = std::move(ctx_.warnings);
    return out;
  }

 private:
  void report_unread(Fields& fields, ModelConfig& out, const std::string& prefix) {
    for (auto it = fields.object().begin(); it != fields.object().end(); ++it) {
      if (fields.was_read(it.key())) continue;
      if (mentions_rope(it.key())) {
        const std::string family_note =
            sh_.model_type.empty() ? "" : " for model_type \"" + sh_.model_type + "\"";
        ctx_.warn(prefix + it.key() + " (" + show(it.value()) +
                  ") is not a RoPE key posenc understands" + family_note + "; it was not applied");
      } else {
        out.ignored_keys.push_back(prefix + it.key());  // sorted: nlohmann objects are std::maps
      }
    }
  }

  void read_dims(const FamilyInfo& family) {
    RopeSpec& b = sh_.base;
    const std::string quoted_type = "for model_type \"" + sh_.model_type + "\"";
    if (sh_.family == Family::kDeepseek) {
      // DeepseekV3Config: head_dim = qk_rope_head_dim, all of it rotated, pairs (2i, 2i + 1)
      // unless rope_interleave is false (apply_rotary_pos_emb_interleave).
      b.head_dim = top_.required_integer("qk_rope_head_dim", quoted_type);
      sh_.fixed_rotary_dim = b.head_dim;
      sh_.fixed_rotary_key = "qk_rope_head_dim";
      b.layout = top_.boolean("rope_interleave").value_or(true) ? Layout::kInterleaved
                                                                : Layout::kHalfSplit;
    } else if (sh_.family == Family::kChatglm) {
      read_chatglm_dims();
      return;
    } else {
      const bool gptj = sh_.family == Family::kGptj;
      // GPTJConfig.attribute_map: hidden_size -> n_embd, num_attention_heads -> n_head.
      const std::string hidden = gptj && top_.contains("n_embd") ? "n_embd" : "hidden_size";
      const std::string heads = gptj && top_.contains("n_head") ? "n_head" : "num_attention_heads";
      if (auto head_dim = top_.integer("head_dim")) {
        b.head_dim = *head_dim;
      } else {
        const std::int64_t h = top_.required_integer(hidden, "when head_dim is not set");
        const std::int64_t n = top_.required_integer(heads, "when head_dim is not set");
        if (h % n != 0) {
          ctx_.fail(hidden + " (" + std::to_string(h) + ") must be divisible by " + heads + " (" +
                    std::to_string(n) + ") to give head_dim");
        }
        b.head_dim = h / n;
      }
      if (adjacent_pairs(sh_.model_type)) b.layout = Layout::kInterleaved;
      if (gptj) {
        b.layout = Layout::kInterleaved;  // rotate_every_two
        sh_.fixed_rotary_key = "rotary_dim";
        if (!top_.contains("rotary_dim")) {
          sh_.fixed_rotary_dim = kGptjDefaultRotaryDim;
          ctx_.warn("rotary_dim is not set: " + std::string(family.config_class) + "'s default " +
                    std::to_string(kGptjDefaultRotaryDim) + " is used");
        } else {
          // GPTJAttention: a null rotary_dim rotates the whole head.
          sh_.fixed_rotary_dim = top_.integer("rotary_dim").value_or(b.head_dim);
        }
      }
    }
    const std::string max_key = sh_.family == Family::kGptj && top_.contains("n_positions")
                                    ? "n_positions"
                                    : "max_position_embeddings";
    b.max_position_embeddings = top_.integer(max_key).value_or(0);
    sh_.top_original = top_.integer("original_max_position_embeddings");

    if (sh_.family == Family::kGptNeox) {
      // GPTNeoXConfig: rope_theta = rotary_emb_base, partial_rotary_factor = rotary_pct.
      b.rope_theta = preferred("rotary_emb_base", "rope_theta").value_or(kDefaultRopeTheta);
      std::string key = "rotary_pct";
      auto pct = preferred(key, "partial_rotary_factor");
      if (!top_.get(key) && pct) key = "partial_rotary_factor";
      if (!pct) {
        pct = family.default_prf;
        if (family.default_prf != 1.0) {
          ctx_.warn("rotary_pct is not set: " + std::string(family.config_class) + "'s default " +
                    num(family.default_prf) + " is used");
        }
      }
      sh_.top_prf = Prf{*pct, key};
      return;
    }
    b.rope_theta = top_.number("rope_theta").value_or(kDefaultRopeTheta);
    if (auto prf = top_.number("partial_rotary_factor")) {
      sh_.top_prf = Prf{*prf, "partial_rotary_factor"};
    } else if (sh_.family == Family::kPartial && family.default_prf != 1.0) {
      sh_.top_prf = Prf{family.default_prf, "partial_rotary_factor"};
      ctx_.warn("partial_rotary_factor is not set: " + std::string(family.config_class) +
                "'s default " + num(family.default_prf) + " is used");
    }
  }

  // THUDM's modeling_chatglm.py (ChatGLM2/3, GLM-4 before transformers' Glm): head_dim =
  // kv_channels, RotaryEmbedding(head_dim // 2) on the first half of the head with base
  // 10000 * rope_ratio, adjacent pairs (x.reshape(..., rot_dim // 2, 2)), seq_length positions.
  // original_rope only picks between two equal ways of building the cache there; vLLM reads
  // original_rope = false as NeoX halves (is_neox_style = not original_rope), as CogAgent needs.
  void read_chatglm_dims() {
    RopeSpec& b = sh_.base;
    if (auto kv = top_.integer("kv_channels")) {
      b.head_dim = *kv;
    } else {
      const std::int64_t h = top_.required_integer("hidden_size", "when kv_channels is not set");
      const std::int64_t n =
          top_.required_integer("num_attention_heads", "when kv_channels is not set");
      if (h % n != 0) {
        ctx_.fail("hidden_size (" + std::to_string(h) +
                  ") must be divisible by num_attention_heads (" + std::to_string(n) +
                  ") to give kv_channels");
      }
      b.head_dim = h / n;
    }
    if (b.head_dim % 4 != 0) {
      ctx_.fail("kv_channels (" + std::to_string(b.head_dim) +
                ") must be a multiple of 4: ChatGLM rotates its first half in pairs");
    }
    sh_.fixed_rotary_dim = b.head_dim / 2;
    sh_.fixed_rotary_key = "kv_channels / 2";
    const bool original = top_.boolean("original_rope").value_or(true);
    b.layout = original ? Layout::kInterleaved : Layout::kHalfSplit;
    if (!original) {
      ctx_.warn(
          "original_rope (false): rotated as halves (i, i + n), as vLLM does (is_neox_style = not "
          "original_rope); THUDM's modeling_chatglm.py rotates adjacent pairs either way");
    }
    const double ratio = top_.number("rope_ratio").value_or(1.0);
    if (!(std::isfinite(ratio) && ratio > 0)) {
      top_.fail("rope_ratio", top_.object().at("rope_ratio"), "must be a number greater than 0");
    }
    b.rope_theta = kDefaultRopeTheta * ratio;
    if (auto theta = top_.number("rope_theta")) {
      ctx_.warn("rope_theta (" + num(*theta) +
                ") is not read by ChatGLMConfig: the base is 10000 "
                "* rope_ratio = " +
                num(b.rope_theta));
    }
    b.max_position_embeddings =
        top_.integer("seq_length").value_or(top_.integer("max_position_embeddings").value_or(0));
  }

  // `key`, else `alias`; warns when both are set and differ.
  std::optional<double> preferred(const std::string& key, const std::string& alias) {
    const auto first = top_.number(key);
    const auto second = top_.number(alias);
    if (first && second && *first != *second) {
      ctx_.warn(key + " (" + num(*first) + ") and " + alias + " (" + num(*second) + ") disagree; " +
                key + " is used");
    }
    return first ? first : second;
  }

  void read_rope(ModelConfig& out) {
    const json* scaling = top_.dict("rope_scaling");
    const json* params = top_.dict("rope_parameters");
    if (params && params->empty()) params = nullptr;
    // transformers v5 `convert_rope_params_to_dict`: `rope_scaling or rope_parameters`, so a
    // non-empty rope_scaling wins; say so when a rope_parameters beside it says otherwise.
    if (!params || (scaling && !scaling->empty())) {
      out.spec = detail::read_rope_dict(ctx_, sh_, scaling, "rope_scaling", false, false);
      if (params) warn_if_disagree(*params, *scaling, "rope_parameters", "rope_scaling");
      return;
    }
    std::string chosen = "rope_parameters";
    const json* chosen_dict = params;
    if (!is_nested(*params)) {
      out.spec = detail::read_rope_dict(ctx_, sh_, params, chosen, true, false);
    } else {
      read_layer_types(*params);
      for (auto it = params->begin(); it != params->end(); ++it) {
        const std::string path = "rope_parameters." + it.key();
        if (it->is_null()) {
          ctx_.warn(path + " is null: layers of type \"" + it.key() + "\" use no RoPE");
          continue;
        }
        out.layer_specs.emplace(it.key(),
                                detail::read_rope_dict(ctx_, sh_, &*it, path, true, true));
      }
      if (out.layer_specs.empty()) {
        ctx_.fail("rope_parameters (" + show(*params) + ") gives no layer type a RoPE");
      }
      auto full = out.layer_specs.find("full_attention");
      if (full == out.layer_specs.end()) full = out.layer_specs.begin();  // first by name
      out.spec = full->second;
      chosen += "." + full->first;
      chosen_dict = &params->at(full->first);
    }
    if (scaling) warn_if_disagree(*scaling, *chosen_dict, "rope_scaling", chosen);
  }

  // Per-layer-type dicts: some value is an object (a flat dict never holds one), or some key is
  // listed in layer_types (RotaryEmbeddingConfigMixin.nested_rope_parameter_keys). A layer type
  // may be null: its layers have no RoPE.
  bool is_nested(const json& params) const {
    std::set<std::string> listed;
    const auto types = top_.object().find("layer_types");
    if (types != top_.object().end() && types->is_array()) {
      for (const json& t : *types) {
        if (t.is_string()) listed.insert(t.get<std::string>());
      }
    }
    bool nested = false;
    for (auto it = params.begin(); it != params.end(); ++it) {
      nested = nested || it->is_object() || listed.count(it.key()) > 0;
    }
    if (!nested) return false;
    for (auto it = params.begin(); it != params.end(); ++it) {
      if (!it->is_object() && !it->is_null()) {
        const std::string key = "rope_parameters." + it.key();
        ctx_.fail("rope_parameters mixes per-layer-type dicts with RoPE parameters: " + key + " (" +
                  show(*it) + ") must be an object or null");
      }
    }
    return true;
  }

  // v5 nests rope_parameters under the names in `layer_types`
  // (RotaryEmbeddingConfigMixin.nested_rope_parameter_keys): say so when the two differ.
  void read_layer_types(const json& params) {
    const json* types = top_.get("layer_types");
    if (!types) return;
    if (!types->is_array()) top_.fail("layer_types", *types, "must be a list of strings");
    std::set<std::string> listed;
    for (std::size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      if (!t.is_string()) {
        top_.fail("layer_types[" + std::to_string(i) + "]", t, "must be a string");
      }
      listed.insert(t.get<std::string>());
    }
    for (auto it = params.begin(); it != params.end(); ++it) {
      if (!listed.count(it.key())) {
        ctx_.warn("rope_parameters." + it.key() + " names no entry of layer_types");
      }
    }
    for (const std::string& t : listed) {
      if (!params.contains(t)) {
        ctx_.warn("layer_types lists \"" + t + "\", absent from rope_parameters");
      }
    }
  }

  // The layer index -> RoPE map (config.h LayerRope) of the families that vary RoPE by layer,
  // and of any config with layer_types.
  void read_layers(ModelConfig& out) {
    const std::string& type = sh_.model_type;
    const bool gemma3 = is_gemma3(type);
    const bool llama4 = is_llama4(type);
    const bool gemma2 = type.rfind("gemma2", 0) == 0;
    const json* types_value =
        top_.object().contains("layer_types") ? &top_.object().at("layer_types") : nullptr;
    if (!gemma3 && !llama4 && !gemma2 && (!types_value || types_value->is_null())) return;
    const auto layers = top_.integer("num_hidden_layers");
    out.num_hidden_layers = layers.value_or(0);
    if (gemma3) read_gemma3_local(out);
    if (llama4) {
      read_llama4_layers(out, layers);
      return;
    }
    std::vector<std::string> types = layer_type_list();
    if (types.empty() && layers) {
      // Gemma2Config / Gemma3TextConfig before layer_types: sliding layers by pattern.
      const std::int64_t pattern =
          gemma3 ? top_.integer("sliding_window_pattern").value_or(kGemma3SlidingPattern) : 2;
      for (std::int64_t i = 0; i < *layers; ++i) {
        types.push_back((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
      }
    } else if (gemma3) {
      top_.integer("sliding_window_pattern");  // layer_types says it
    }
    if (layers && !types.empty() && static_cast<std::int64_t>(types.size()) != *layers) {
      ctx_.warn("layer_types has " + std::to_string(types.size()) +
                " entries but num_hidden_layers is " + std::to_string(*layers) +
                "; the layer map follows layer_types");
    }
    const json* params =
        top_.object().contains("rope_parameters") ? &top_.object().at("rope_parameters") : nullptr;
    for (const std::string& t : types) {
      // A v5 layer type whose rope_parameters entry is null rotates nothing.
      const bool null_rope = !out.layer_specs.count(t) && params && params->is_object() &&
                             params->contains(t) && params->at(t).is_null();
      out.layers.push_back(LayerRope{t, !null_rope});
    }
  }

  std::vector<std::string> layer_type_list() {
    std::vector<std::string> types;
    const json* v = top_.get("layer_types");
    if (!v) return types;
    if (!v->is_array()) top_.fail("layer_types", *v, "must be a list of strings");
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string())
        top_.fail("layer_types[" + std::to_string(i) + "]", (*v)[i], "must be a string");
      types.push_back((*v)[i].get<std::string>());
    }
    return types;
  }

  // Gemma 3 as transformers v4 saves it: rope_theta and rope_scaling for the global layers,
  // rope_local_base_freq (default RoPE, no scaling) for the sliding ones (vLLM #29111,
  // llama.cpp's rope_freq_scale_train_swa).
  void read_gemma3_local(ModelConfig& out) {
    const auto local = top_.number("rope_local_base_freq");
    if (local && !(std::isfinite(*local) && *local > 1)) {
      top_.fail("rope_local_base_freq", top_.object().at("rope_local_base_freq"),
                "must be a number greater than 1");
    }
    const auto sliding = out.layer_specs.find("sliding_attention");
    if (sliding != out.layer_specs.end()) {
      if (local && *local != sliding->second.rope_theta) {
        ctx_.warn("rope_local_base_freq (" + num(*local) +
                  ") differs from rope_parameters.sliding_attention.rope_theta (" +
                  num(sliding->second.rope_theta) + "); the latter is used");
      }
      return;
    }
    if (!out.layer_specs.empty()) return;  // v5 dicts without a sliding type: as they say
    if (!local) {
      ctx_.warn("rope_local_base_freq is not set: Gemma3TextConfig's default " +
                num(kGemma3LocalBase) + " is used for the sliding-window layers");
    }
    detail::Shared local_shared = sh_;
    local_shared.base.rope_theta = local.value_or(kGemma3LocalBase);
    local_shared.top_original.reset();
    out.layer_specs.emplace("full_attention", out.spec);
    out.layer_specs.emplace(
        "sliding_attention",
        detail::read_rope_dict(ctx_, local_shared, nullptr, "rope_local_base_freq", false, true));
  }

  // Llama4TextConfig: no_rope_layers[i] == 1 when layer i uses RoPE (an empty or absent list:
  // int((i + 1) % no_rope_layer_interval != 0)); RoPE layers attend in chunks
  // ("chunked_attention"), NoPE layers globally ("full_attention").
  void read_llama4_layers(ModelConfig& out, std::optional<std::int64_t> layers) {
    const std::int64_t interval =
        top_.integer("no_rope_layer_interval").value_or(kLlama4NoRopeInterval);
    std::vector<bool> uses_rope;
    if (const json* list = top_.get("no_rope_layers")) {
      if (!list->is_array()) top_.fail("no_rope_layers", *list, "must be a list of 0 and 1");
      for (std::size_t i = 0; i < list->size(); ++i) {
        const json& e = (*list)[i];
        if (!e.is_number_integer() || (e.get<std::int64_t>() != 0 && e.get<std::int64_t>() != 1)) {
          top_.fail("no_rope_layers[" + std::to_string(i) + "]", e,
                    "must be 1 (the layer uses RoPE) or 0 (it does not)");
        }
        uses_rope.push_back(e.get<std::int64_t>() == 1);
      }
    }
    if (uses_rope.empty() && layers) {
      for (std::int64_t i = 0; i < *layers; ++i) uses_rope.push_back((i + 1) % interval != 0);
    }
    if (layers && !uses_rope.empty() && static_cast<std::int64_t>(uses_rope.size()) != *layers) {
      ctx_.warn("no_rope_layers has " + std::to_string(uses_rope.size()) +
                " entries but num_hidden_layers is " + std::to_string(*layers) +
                "; the layer map follows no_rope_layers");
    }
    const std::vector<std::string> types = layer_type_list();
    for (std::size_t i = 0; i < uses_rope.size(); ++i) {
      const std::string expected = uses_rope[i] ? "chunked_attention" : "full_attention";
      if (i < types.size() && types[i] != expected) {
        ctx_.warn("layer_types[" + std::to_string(i) + "] (\"" + types[i] + "\") disagrees with " +
                  "no_rope_layers[" + std::to_string(i) + "] (" + (uses_rope[i] ? "1" : "0") +
                  "); no_rope_layers decides whether the layer rotates");
      }
      out.layers.push_back(LayerRope{expected, uses_rope[i]});
    }
    AttentionNotes& a = out.attention;
    a.attention_chunk_size = top_.integer("attention_chunk_size").value_or(0);
    // Meta's params give a number here (a truthy threshold), transformers tests it as a bool.
    if (const json* t = top_.get("attn_temperature_tuning")) {
      if (!t->is_boolean() && !t->is_number()) {
        top_.fail("attn_temperature_tuning", *t, "must be true, false or a number");
      }
      a.attn_temperature_tuning = t->is_boolean() ? t->get<bool>() : t->get<double>() != 0;
    }
    a.floor_scale = top_.number("floor_scale").value_or(0);
    a.attn_scale = top_.number("attn_scale").value_or(0);
    for (auto [key, v] :
         {std::pair{"floor_scale", a.floor_scale}, std::pair{"attn_scale", a.attn_scale}}) {
      if (top_.contains(key) && !(std::isfinite(v) && v > 0)) {
        top_.fail(key, top_.object().at(key), "must be a number greater than 0");
      }
    }
  }

  // Qwen2.5-1M: dual_chunk_attention_config (vLLM's DualChunkRotaryEmbedding reads chunk_size and
  // local_size; the sparse_attention_* keys pick attention blocks, not rotations).
  void read_dual_chunk(ModelConfig& out) {
    const json* d = top_.dict("dual_chunk_attention_config");
    if (!d) return;
    Fields f(*d, "dual_chunk_attention_config.", ctx_);
    DualChunkConfig c;
    c.chunk_size = f.required_integer("chunk_size", "by dual chunk attention");
    c.local_size = f.required_integer("local_size", "by dual chunk attention");
    c.original_max_position_embeddings = f.integer("original_max_position_embeddings").value_or(0);
    if (c.local_size >= c.chunk_size) {
      ctx_.fail("dual_chunk_attention_config.local_size (" + std::to_string(c.local_size) +
                ") must be less than dual_chunk_attention_config.chunk_size (" +
                std::to_string(c.chunk_size) + "): chunk_len = chunk_size - local_size");
    }
    for (const std::string& k : f.unread()) {
      if (k.rfind("sparse_attention", 0) != 0) {
        ctx_.warn("dual_chunk_attention_config." + k + " (" + show(d->at(k)) +
                  ") is not a dual chunk attention key posenc understands; it was not applied");
      }
    }
    out.dual_chunk = c;
  }

  // Both dicts present: the one not used deserves a warning when it says otherwise.
  void warn_if_disagree(const json& other_dict, const json& chosen_dict,
                        const std::string& other_name, const std::string& chosen) {
    std::string diffs;
    for (auto it = other_dict.begin(); it != other_dict.end(); ++it) {
      auto other = chosen_dict.find(it.key());
      if (other == chosen_dict.end() && it.key() == "type") other = chosen_dict.find("rope_type");
      if (other == chosen_dict.end() && it.key() == "rope_type") other = chosen_dict.find("type");
      if (other != chosen_dict.end() && same_value(*it, *other)) continue;
      // v5 copies the top-level rope_theta and partial_rotary_factor into rope_parameters.
      if (other == chosen_dict.end() &&
          (it.key() == "rope_theta" || it.key() == "partial_rotary_factor"))
        continue;
      diffs += (diffs.empty() ? "" : ", ") + it.key() + " " + show(*it) + " vs " +
               (other == chosen_dict.end() ? std::string("absent") : show(*other));
    }
    if (!diffs.empty()) {
      ctx_.warn(other_name + " and " + chosen + " disagree (" + diffs + "); " + chosen +
                " is used");
    }
  }

  Context ctx_;
  Fields outer_;  // the file's top level
  Fields top_;    // the text model's: text_config when nested, else the top level
  detail::Shared sh_;
};

}  // namespace

ModelConfig parse_hf_config(std::string_view json_text, std::string_view source) {
  const std::string name(source);
  const json root = detail::parse_json(json_text, name);
  if (!root.is_object()) {
    throw Error(name + ": the top level (" + show(root) + ") must be a JSON object");
  }
  return ConfigParser(root, name).parse();
}

namespace detail {

std::string read_config_text(const std::filesystem::path& path) {
  const std::string name = path.string();
  const detail::FileBytes file(
      path, {kMaxConfigBytes, true, "a config.json", [&name](std::span<const std::uint8_t> start) {
               const std::string_view s(reinterpret_cast<const char*>(start.data()), start.size());
               const auto first = s.find_first_not_of(" \t\r\n");
               // Blank, or JSON that is not an object: the parser's messages say what it is.
               if (first == std::string_view::npos || s[first] == '{' || s[first] == '[') return;
               const std::string looks = detail::foreign_format(start);
               char byte[8];
               std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(s[first]));
               throw Error(
                   name +
                   ": not a config.json: a config.json is a JSON object, starting with '{', but " +
                   (looks.empty() ? "byte " + std::to_string(first) + " is " + byte
                                  : "this is " + looks));
             }});
  const auto bytes = file.bytes();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace detail

ModelConfig load_hf_config(const std::filesystem::path& path) {
  return parse_hf_config(detail::read_config_text(path), path.string());
}

}  // namespace posenc
