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
    {"chatglm", Family::kPartial, 1.0, "ChatGLMConfig"},
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
