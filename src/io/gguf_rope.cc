// A GGUF file's metadata -> ModelConfig and the ggml_rope_ext parameters llama.cpp uses
// (gguf.h, GgufModel). llama.cpp sources of each rule: src/llama-model.cpp (load_hparams:
// defaults and keys; llama_model_rope_type: the layout), src/llama-context.cpp (the context's
// rope parameters: freq_scale, ext_factor, the yarn attention factor), src/llama-arch.cpp (key
// and tensor names) and convert_hf_to_gguf.py (what each key was written from).
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "core/ggml_model.h"
#include "io/gguf_arch.h"
#include "io/gguf_clip.h"
#include "io/gguf_keys.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/io/gguf.h"
#include "util/format.h"

namespace posenc {
namespace {

using detail::num;
using gguf_detail::ArchRope;
using gguf_detail::decimal_of;
using gguf_detail::find_arch;
using gguf_detail::GgufKeys;
using gguf_detail::Number;
using gguf_detail::RopeType;

// llama.cpp's defaults (src/llama-hparams.h and load_hparams) are posenc's (defaults.h):
// rope_freq_base_train 10000 when rope.freq_base is absent, yarn_beta_fast 32, yarn_beta_slow 1.
constexpr float kFreqBase = static_cast<float>(kDefaultRopeTheta);
constexpr float kBetaFast = static_cast<float>(kYarnBetaFast);
constexpr float kBetaSlow = static_cast<float>(kYarnBetaSlow);
// convert_hf_to_gguf.py's DeepseekV2Model writes yarn_log_multiplier = 0.1 * mscale_all_dim;
// load_hparams divides it back ([TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]).
constexpr float kDeepseek2LogMulScale = 0.1f;

using detail::ggml_get_mscale;

bool mentions_rope(std::string key) {
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key.find("rope") != std::string::npos || key.find("rotary") != std::string::npos;
}

class Mapper : GgufKeys {
 public:
  explicit Mapper(const GgufFile& file) : GgufKeys(file) {}

  GgufModel map() {
    GgufModel out;
    ModelConfig& c = out.config;
    c.source = f_.source;
    const auto arch = string("general.architecture");
    if (!arch) fail("general.architecture is missing; it names the model's architecture");
    arch_ = *arch;
    // llama.cpp's multimodal projector files: the vision tower (its text model is another file).
    if (arch_ == "clip") return gguf_detail::clip_model(f_);
    c.model_type = arch_;
    p_ = arch_ + ".";
    RopeSpec& s = c.spec;
    read_layout(s);
    read_dims(s);
    read_scaling(s, out.ggml);
    s.max_position_embeddings = ctx_train_;
    if (ggml_is_multi(mode_)) set_multi(out);
    c.llama_cpp_rope_type = std::string(ggml_mode_name(mode_));
    finish(out);
    return out;
  }

 private:
  void note(const std::string& what) { notes_.push_back(what); }

  void read_layout(RopeSpec& s) {
    const ArchRope* a = find_arch(arch_);
    if (!a) {
      fail("general.architecture (\"" + arch_ +
           "\") is not an architecture in llama.cpp's llama_model_rope_type table, so its RoPE "
           "layout (pairs (2i, 2i+1) or (i, i + n/2)) is unknown");
    }
    switch (a->type) {
      case RopeType::kNone:
        fail("general.architecture (\"" + arch_ +
             "\") uses no RoPE in llama.cpp (LLAMA_ROPE_TYPE_NONE)");
      case RopeType::kNorm:
        s.layout = Layout::kInterleaved;
        mode_ = GgmlMode::kNormal;
        note("mode 0 (LLAMA_ROPE_TYPE_NORM, pairs (2i, 2i+1)) for architecture " + arch_);
        break;
      case RopeType::kNeox:
        s.layout = Layout::kHalfSplit;
        mode_ = GgmlMode::kNeox;
        note("mode 2 (LLAMA_ROPE_TYPE_NEOX, pairs (i, i + n/2)) for architecture " + arch_);
        break;
      case RopeType::kMrope:
      case RopeType::kImrope:
        s.layout = Layout::kHalfSplit;
        mode_ = a->type == RopeType::kMrope ? GgmlMode::kMrope : GgmlMode::kImrope;
        note(std::string(a->type == RopeType::kMrope ? "mode 8 (LLAMA_ROPE_TYPE_MROPE"
                                                     : "mode 40 (LLAMA_ROPE_TYPE_IMROPE") +
             ", ggml_rope_multi: pairs (i, i + n/2), positions [4, tokens] t, h, w, e) for "
             "architecture " +
             arch_);
        break;
    }
    read_sections(a->type == RopeType::kMrope || a->type == RopeType::kImrope);
  }

  // {arch}.rope.dimension_sections: load_hparams' get_key_or_arr(LLM_KV_ROPE_DIMENSION_SECTIONS,
  // rope_sections, 4), required for the multi-section types. GLM-4 / GLM-4-MoE switch to MROPE
  // when it gives positive t and h sections (llama_model_rope_type: hparams.use_mrope()).
  void read_sections(bool required) {
    const std::string key = p_ + "rope.dimension_sections";
    const bool glm = arch_ == "glm4" || arch_ == "glm4moe";
    if (!required && !glm) return;  // not read: finish() warns about it if present
    const GgufValue* v = get(key);
    if (!v) {
      if (required) {
        fail(key + " is missing; llama.cpp requires it for " + arch_ +
             "'s multi-section RoPE (ggml_rope_multi's sections t, h, w, e)");
      }
      return;
    }
    if (v->type != GgufType::kArray ||
        (v->element_type != GgufType::kInt32 && v->element_type != GgufType::kUint32)) {
      wrong_type(key, *v, "an array of 4 i32 (t, h, w, e)");
    }
    if (v->count != 4) {
      fail(show(key, *v) + " must hold 4 sections (t, h, w, e: GGML_MROPE_SECTIONS), not " +
           std::to_string(v->count));
    }
    for (std::uint64_t i = 0; i < 4; ++i) {
      const double x = *v->number_at(i);
      if (!(x >= 0 && x <= std::numeric_limits<std::int32_t>::max())) {
        fail(show(key, *v) + ": section " + std::to_string(i) + " (" + detail::num(x) +
             ") must be a non-negative int32");
      }
      sections_[i] = static_cast<int>(x);
    }
    if (glm) {
      if (sections_[0] <= 0 || sections_[1] <= 0) {
        sections_ = {};
        note(key + " has no positive t and h sections: " + arch_ + " keeps one-axis RoPE");
        return;
      }
      mode_ = GgmlMode::kMrope;
      note("mode 8 (LLAMA_ROPE_TYPE_MROPE: " + arch_ + " with positive " + key +
           " t and h sections, pairs (i, i + n/2))");
    }
    // Summed in 64 bits: each section may be as large as int32 allows.
    if (std::int64_t{sections_[0]} + sections_[1] + sections_[2] <= 0) {
      fail(show(key, *v) + ": the t, h and w sections are all 0 (ggml_rope_multi asserts one " +
           "is positive)");
    }
    origin("sections", key);
  }

  // head_dim and rotary_dim as load_hparams: n_embd_head_k = embedding_length / head_count
  // unless attention.key_length is set; n_rot = rope.dimension_count, else n_embd_head_k.
  void read_dims(RopeSpec& s) {
    const auto n_embd = integer(p_ + "embedding_length");
    const auto n_head = integer_or_array(p_ + "attention.head_count");
    const auto key_length = integer(p_ + "attention.key_length");
    const auto n_rot = integer(p_ + "rope.dimension_count");
    ctx_train_ = integer(p_ + "context_length").value_or(0);
    if (ctx_train_ == 0) note(p_ + "context_length is not set");
    if (arch_ == "deepseek2" && n_rot) {
      // DeepSeek's RoPE runs on a separate qk_rope_head_dim slice (its HF config's head_dim).
      s.head_dim = *n_rot;
      origin("head_dim", p_ + "rope.dimension_count");
    } else if (key_length) {
      s.head_dim = *key_length;
      origin("head_dim", p_ + "attention.key_length");
    } else if (n_embd && n_head && *n_head > 0) {
      if (*n_embd % *n_head != 0) {
        fail(p_ + "embedding_length (" + std::to_string(*n_embd) + ") must be divisible by " + p_ +
             "attention.head_count (" + std::to_string(*n_head) + ") to give the head dim");
      }
      s.head_dim = *n_embd / *n_head;
      origin("head_dim", p_ + "embedding_length", p_ + "attention.head_count");
    } else if (n_rot) {
      s.head_dim = *n_rot;
      origin("head_dim", p_ + "rope.dimension_count");
      warn("the head dim is unknown (no " + p_ +
           "attention.key_length, embedding_length or "
           "attention.head_count); head_dim = " +
           p_ + "rope.dimension_count (" + std::to_string(*n_rot) + ")");
    } else {
      fail("no " + p_ + "rope.dimension_count, and no " + p_ + "attention.key_length or " + p_ +
           "embedding_length and " + p_ + "attention.head_count to give the head dim");
    }
    s.rotary_dim = n_rot.value_or(s.head_dim);
    if (n_rot) {
      origin("rotary_dim", p_ + "rope.dimension_count");
    } else {
      origins_["rotary_dim"] =
          origins_["head_dim"] + " (no " + p_ + "rope.dimension_count: n_rot = the head dim)";
    }
    if (s.rotary_dim <= 0 || s.rotary_dim % 2 != 0) {
      fail("the rotated dims n_rot (" + std::to_string(s.rotary_dim) +
           ") must be a positive even number; " + origins_["rotary_dim"]);
    }
    origin("max_position_embeddings", p_ + "context_length");
  }

  // Where a spec field or a ggml parameter came from, as "from KEY (value)[, KEY (value)]", for
  // the messages of errors found later on the derived value (validate()).
  void origin(const std::string& field, const std::string& key, const std::string& key2 = "") {
    std::string text = "from ";
    for (const std::string& k : {key, key2}) {
      if (k.empty()) continue;
      const GgufValue* v = f_.find(k);
      text += (text.size() > 5 ? " and " : "") + (v ? show(k, *v) : k + " (not set)");
    }
    origins_[field] = text;
  }

  // An error of validate() on the spec or on ggml's parameters, with the keys the fields it
  // names were read from (the message quotes the derived value, e.g. head_dim = n_embd / n_head).
  [[noreturn]] void fail_derived(const std::string& what) const {
    std::string sources;
    const auto names =
        [&what](const std::string& field) {  // `field (` or `field[`, as a whole word
          for (std::size_t at = what.find(field); at != std::string::npos;
               at = what.find(field, at + 1)) {
            const std::size_t end = at + field.size();
            const bool word_start =
                at == 0 ||
                !(std::isalnum(static_cast<unsigned char>(what[at - 1])) || what[at - 1] == '_');
            if (word_start && end < what.size() &&
                (what[end] == '[' || what.compare(end, 2, " (") == 0))
              return true;
          }
          return false;
        };
    for (const auto& [field, text] : origins_) {
      if (names(field)) sources += "; " + field + " " + text;
    }
    fail(what + sources);
  }

  // The factor tensors, checked against n_rot / 2.
  const std::vector<float>* tensor(std::string_view name, const RopeSpec& s) {
    const std::string legacy(name.substr(0, name.size() - std::string_view(".weight").size()));
    if (f_.find_tensor(legacy)) {
      warn("tensor \"" + legacy + "\" has no \".weight\" suffix: llama.cpp looks only for \"" +
           std::string(name) + "\" and does not use it; neither does posenc");
    }
    const auto it = f_.rope_tensors.find(name);
    if (it == f_.rope_tensors.end()) return nullptr;
    const auto n = static_cast<std::size_t>(s.rotary_dim / 2);
    // llama.cpp creates the tensor with shape {n_rot / 2} and refuses any other shape, even one
    // with the same element count such as [n/2, 2] (llama_model_loader::check_tensor_dims:
    // "tensor ... has wrong shape; expected ..., got ...").
    const GgufTensorInfo* info = f_.find_tensor(name);
    bool shape_ok = !info->ne.empty() && info->ne[0] == n;
    for (std::size_t d = 1; d < info->ne.size(); ++d) shape_ok = shape_ok && info->ne[d] == 1;
    if (!shape_ok) {
      std::string shape;
      for (std::uint64_t ne : info->ne) shape += (shape.empty() ? "" : ", ") + std::to_string(ne);
      fail("tensor " + std::string(name) + " has shape [" + shape + "]; llama.cpp requires [" +
           std::to_string(n) + "] (" + p_ + "rope.dimension_count " + std::to_string(s.rotary_dim) +
           " / 2, one divisor per rotated pair) and refuses the file otherwise");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (!(it->second[i] > 0.0f) || !std::isfinite(it->second[i])) {
        fail("tensor " + std::string(name) + "[" + std::to_string(i) + "] (" + num(it->second[i]) +
             ") must be a finite number greater than 0");
      }
    }
    return &it->second;
  }

  void read_scaling(RopeSpec& s, GgmlRopeParams& g) {
    const std::string type_key = p_ + "rope.scaling.type";
    const auto type_str = string(type_key);
    if (type_str && *type_str != "none" && *type_str != "linear" && *type_str != "yarn" &&
        *type_str != "longrope") {
      fail(type_key + " (\"" + *type_str +
           "\") is not a scaling type llama.cpp knows (none, "
           "linear, yarn, longrope)");
    }
    // load_hparams: `std::string rope_scaling("linear")` when the key is absent.
    const std::string type = type_str.value_or("linear");

    const auto base = number(p_ + "rope.freq_base");
    s.rope_theta = base ? base->value : static_cast<double>(kFreqBase);
    if (!base) note(p_ + "rope.freq_base is not set: llama.cpp's default 10000");

    // rope.scaling.factor, else the old key rope.scale_linear; 0 means unset (freq_scale 1).
    auto factor = number(p_ + "rope.scaling.factor");
    if (!factor) {
      factor = number(p_ + "rope.scale_linear");
      if (factor) note("the factor comes from the legacy key " + p_ + "rope.scale_linear");
    }
    if (factor && factor->f32 == 0.0f) factor.reset();
    if (factor && !(factor->value > 0)) {
      fail(p_ + "rope.scaling.factor (" + num(factor->value) + ") must be greater than 0");
    }
    orig_ctx_ = integer(p_ + "rope.scaling.original_context_length");
    // The pre-training context, whatever the scaling type (Phi-3's files set it with no scaling
    // type, for its LongRoPE tensors); yarn and longrope fall back to context_length below.
    if (orig_ctx_) s.original_max_position_embeddings = *orig_ctx_;
    const auto attn = number(p_ + "rope.scaling.attn_factor");
    const auto log_mul = number(p_ + "rope.scaling.yarn_log_multiplier");
    const auto ext = number(p_ + "rope.scaling.yarn_ext_factor");
    const auto yarn_attn = number(p_ + "rope.scaling.yarn_attn_factor");
    const auto beta_fast = number(p_ + "rope.scaling.yarn_beta_fast");
    const auto beta_slow = number(p_ + "rope.scaling.yarn_beta_slow");
    // Says whether the model was tuned; no number changes, but llama.cpp reads it as a bool.
    if (const GgufValue* tuned = get(p_ + "rope.scaling.finetuned");
        tuned && tuned->type != GgufType::kBool) {
      wrong_type(p_ + "rope.scaling.finetuned", *tuned, "bool");
    }

    const std::vector<float>* freqs = tensor(kGgufRopeFreqs, s);
    const std::vector<float>* longf = tensor(kGgufRopeFactorsLong, s);
    const std::vector<float>* shortf = tensor(kGgufRopeFactorsShort, s);
    if ((longf == nullptr) != (shortf == nullptr)) {
      fail("the file has tensor " +
           std::string(longf ? kGgufRopeFactorsLong : kGgufRopeFactorsShort) + " but not " +
           std::string(longf ? kGgufRopeFactorsShort : kGgufRopeFactorsLong) +
           "; LongRoPE needs both");
    }
    const bool has_longrope = longf != nullptr;
    // llama.cpp divides the frequencies by rope_freqs, or by the LongRoPE factors when the file
    // has them (llama_model::get_rope_factors), whatever the scaling type. A longrope spec
    // carries its factors itself; any other spec carries the divisors llama.cpp uses.
    if (has_longrope && type != "longrope" && type_str) {
      s.freq_factors.assign(shortf->begin(), shortf->end());
    } else if (freqs && !has_longrope) {
      s.freq_factors.assign(freqs->begin(), freqs->end());
    }
    if (type == "longrope" && !has_longrope) {
      fail(type_key + " (\"longrope\") needs the tensors " + std::string(kGgufRopeFactorsLong) +
           " and " + std::string(kGgufRopeFactorsShort) + ", which the file does not have");
    }

    // ---- ggml_rope_ext as llama-context.cpp sets it up (float32 throughout).
    g.n_dims = static_cast<int>(s.rotary_dim);
    g.mode = mode_;
    g.freq_base = base ? base->f32 : kFreqBase;
    g.freq_scale = factor ? 1.0f / factor->f32 : 1.0f;
    if (type == "none") g.freq_scale = 1.0f;  // "never scale if scaling type is none"
    const std::int64_t n_ctx_orig = orig_ctx_.value_or(ctx_train_);
    const std::string orig_key =
        p_ + (orig_ctx_ ? "rope.scaling.original_context_length" : "context_length");
    origin("n_ctx_orig", orig_key);
    origin("original_max_position_embeddings", orig_key);
    origin("freq_base", p_ + "rope.freq_base");
    origin("rope_theta", p_ + "rope.freq_base");
    for (const char* field : {"factor", "freq_scale"}) {
      origin(field, p_ + (f_.find(p_ + "rope.scaling.factor") || !f_.find(p_ + "rope.scale_linear")
                              ? "rope.scaling.factor"
                              : "rope.scale_linear"));
    }
    origin("beta_fast", p_ + "rope.scaling.yarn_beta_fast");
    origin("beta_slow", p_ + "rope.scaling.yarn_beta_slow");
    origin("ext_factor", p_ + "rope.scaling.yarn_ext_factor");
    origin("extrapolation_factor", p_ + "rope.scaling.yarn_ext_factor");
    origin("attn_factor", p_ + "rope.scaling.attn_factor", p_ + "rope.scaling.yarn_attn_factor");
    origin("attention_factor", p_ + "rope.scaling.attn_factor",
           p_ + "rope.scaling.yarn_attn_factor");
    origin("mscale_all_dim", p_ + "rope.scaling.yarn_log_multiplier");
    origins_["freq_factors"] =
        "from tensor " + std::string(longf ? kGgufRopeFactorsShort : kGgufRopeFreqs);
    g.n_ctx_orig = static_cast<int>(n_ctx_orig);
    g.beta_fast = beta_fast ? beta_fast->f32 : kBetaFast;
    g.beta_slow = beta_slow ? beta_slow->f32 : kBetaSlow;
    // yarn_ext_factor < 0 means "not set": 1 for yarn, else 0.
    g.ext_factor = ext && ext->f32 >= 0.0f ? ext->f32 : (type == "yarn" ? 1.0f : 0.0f);
    const bool deepseek2 = arch_ == "deepseek2";
    float mscale_all = 0.0f;  // hparams.rope_yarn_log_mul after the DeepSeek-2 fix
    if (log_mul) mscale_all = deepseek2 ? log_mul->f32 / kDeepseek2LogMulScale : log_mul->f32;
    float mscale = 1.0f;
    if (deepseek2 && mscale_all != 1.0f) mscale = mscale_all;
    float attn_factor = yarn_attn ? yarn_attn->f32 : 1.0f;
    if (g.ext_factor != 0.0f) {
      const float s_f32 = 1.0f / g.freq_scale;
      attn_factor = mscale_all != 0.0f
                        ? ggml_get_mscale(s_f32, mscale) / ggml_get_mscale(s_f32, mscale_all)
                        : ggml_get_mscale(s_f32, 1.0f);
      attn_factor = detail::ggml_host_yarn_attn_factor(attn_factor, s_f32);
    }
    if (attn) attn_factor *= attn->f32;
    g.attn_factor = attn_factor;
    if (has_longrope) {
      g.freq_factors = *shortf;
      note("freq_factors = " + std::string(kGgufRopeFactorsShort) + " (llama.cpp switches to " +
           std::string(kGgufRopeFactorsLong) +
           " when its context per sequence exceeds n_ctx_orig " + std::to_string(n_ctx_orig) + ")");
    } else if (freqs) {
      g.freq_factors = *freqs;
      note("freq_factors = " + std::string(kGgufRopeFreqs));
    }
    note("n_ctx_orig " + std::to_string(n_ctx_orig) +
         (orig_ctx_ ? " from rope.scaling.original_context_length" : " from context_length"));

    // ---- The spec: what the keys ask for, in Hugging Face's terms.
    if (freqs) {
      note(std::string(kGgufRopeFreqs) + ": " + std::to_string(freqs->size()) +
           " precomputed frequency divisors (Llama 3 scaling, written by convert_hf_to_gguf.py), "
           "carried as the spec's freq_factors");
      if (has_longrope) {
        warn("the file has both " + std::string(kGgufRopeFreqs) +
             " and LongRoPE factors; llama.cpp "
             "uses the LongRoPE ones");
      }
    }
    if (has_longrope && (type == "longrope" || !type_str)) {
      read_longrope(s, *shortf, *longf, factor, attn);
      return;
    }
    if (has_longrope) {
      warn("the LongRoPE tensors are present but " + type_key + " is \"" + type +
           "\": llama.cpp divides "
           "the frequencies by " +
           std::string(kGgufRopeFactorsShort) + " (freq_factors) and by " +
           std::string(kGgufRopeFactorsLong) +
           " once its context per sequence exceeds n_ctx_orig (" + std::to_string(n_ctx_orig) +
           "); the spec carries the short ones");
    }
    if (type == "yarn") {
      read_yarn(s, factor, attn, log_mul, ext, yarn_attn, beta_fast, beta_slow, deepseek2, mscale);
      return;
    }
    if (type == "none" && factor && factor->value != 1.0) {
      warn(p_ + "rope.scaling.factor (" + num(factor->value) + ") is ignored: " + type_key +
           " is \"none\", which never scales (llama.cpp sets freq_scale 1)");
    }
    if (type == "linear" && factor && factor->value != 1.0) {
      s.method = Method::kLinear;
      s.factor = factor->value;
      if (!type_str) note(type_key + " is not set: llama.cpp reads \"linear\"");
    } else if (type == "linear" && type_str && !factor) {
      warn(type_key + " is \"linear\" but no rope.scaling.factor is set: no scaling");
    }
    for (const auto& [key, v] : {std::pair{"rope.scaling.yarn_log_multiplier", log_mul},
                                 std::pair{"rope.scaling.yarn_beta_fast", beta_fast},
                                 std::pair{"rope.scaling.yarn_beta_slow", beta_slow}}) {
      if (v) warn(p_ + key + " (" + num(v->value) + ") is unused: " + type_key + " is not yarn");
    }
    if (g.ext_factor != 0.0f) {
      warn(p_ + "rope.scaling.yarn_ext_factor (" + num(ext->value) +
           ") makes llama.cpp blend "
           "YaRN's ramp into scaling type \"" +
           type + "\"; the spec does not");
    }
    if (g.attn_factor != 1.0f) {
      warn("llama.cpp multiplies cos and sin by " + num(g.attn_factor) +
           " (rope.scaling."
           "attn_factor / yarn_attn_factor); rope_type \"" +
           method_name(s) +
           "\" has no attention factor, so the spec leaves it out (see ggml.attn_factor)");
    }
  }

  void read_longrope(RopeSpec& s, const std::vector<float>& shortf, const std::vector<float>& longf,
                     const std::optional<Number>& factor, const std::optional<Number>& attn) {
    s.method = Method::kLongrope;
    s.longrope.short_factor.assign(shortf.begin(), shortf.end());  // f32 widened exactly
    s.longrope.long_factor.assign(longf.begin(), longf.end());
    if (orig_ctx_) {
      s.original_max_position_embeddings = *orig_ctx_;
    } else if (ctx_train_ > 0) {
      s.original_max_position_embeddings = ctx_train_;
      warn(p_ + "rope.scaling.original_context_length is not set: llama.cpp uses " + p_ +
           "context_length (" + std::to_string(ctx_train_) +
           "), so the long factors are never chosen "
           "within the trained context");
    } else {
      fail("LongRoPE needs " + p_ + "rope.scaling.original_context_length or " + p_ +
           "context_length");
    }
    if (factor) {
      s.factor = factor->value;
      warn(p_ + "rope.scaling.factor (" + num(factor->value) +
           ") is set beside the LongRoPE factors: "
           "llama.cpp also divides every frequency by it (freq_scale 1/" +
           num(factor->value) + "); the spec uses it only for the attention factor");
    } else if (ctx_train_ > 0) {
      // transformers (Phi-3 keeps L at the top level): factor = max_position_embeddings / L.
      s.factor =
          static_cast<double>(ctx_train_) / static_cast<double>(s.original_max_position_embeddings);
    }
    if (attn) s.longrope.attention_factor = attn->value;
  }

  void read_yarn(RopeSpec& s, const std::optional<Number>& factor,
                 const std::optional<Number>& attn, const std::optional<Number>& log_mul,
                 const std::optional<Number>& ext, const std::optional<Number>& yarn_attn,
                 const std::optional<Number>& beta_fast, const std::optional<Number>& beta_slow,
                 bool deepseek2, float mscale) {
    YarnParams& y = s.yarn;
    s.method = Method::kYarn;
    if (orig_ctx_) {
      s.original_max_position_embeddings = *orig_ctx_;
    } else if (ctx_train_ > 0) {
      s.original_max_position_embeddings = ctx_train_;
      warn(p_ + "rope.scaling.original_context_length is not set: llama.cpp uses " + p_ +
           "context_length (" + std::to_string(ctx_train_) + ")");
    } else {
      fail("yarn needs " + p_ + "rope.scaling.original_context_length or " + p_ + "context_length");
    }
    if (factor) {
      s.factor = factor->value;
    } else {
      warn(p_ +
           "rope.scaling.factor is not set: llama.cpp's freq_scale is 1, so YaRN changes "
           "nothing");
    }
    y.beta_fast = beta_fast ? beta_fast->value : static_cast<double>(kBetaFast);
    y.beta_slow = beta_slow ? beta_slow->value : static_cast<double>(kBetaSlow);
    y.truncate = true;  // ggml_rope_yarn_corr_dims always floors and ceils
    if (ext && ext->value >= 0) y.extrapolation_factor = ext->value;
    const bool blends = !(ext && ext->value == 0);
    if (!blends) {
      // llama.cpp: no ramp, and cos and sin scaled by yarn_attn_factor * attn_factor.
      y.attention_factor = (yarn_attn ? yarn_attn->value : 1.0) * (attn ? attn->value : 1.0);
      return;
    }
    if (yarn_attn) {
      warn(p_ + "rope.scaling.yarn_attn_factor (" + num(yarn_attn->value) +
           ") is not used: "
           "llama.cpp recomputes the attention factor from the factor and yarn_log_multiplier "
           "when yarn_ext_factor is not 0");
    }
    if (log_mul && log_mul->f32 != 0.0f) {  // llama.cpp: 0 means none
      if (deepseek2) {
        // llama.cpp divides the stored 0.1 * mscale_all_dim back and, the file having no
        // mscale, takes mscale = mscale_all_dim (DeepSeek-V2's configs set both alike).
        y.mscale_all_dim = decimal_of(log_mul->f32, 0.1);  // the converter's Python 0.1
        y.mscale = mscale == 1.0f ? 1.0 : *y.mscale_all_dim;
        note("yarn_log_multiplier " + num(log_mul->value) + " / 0.1 = mscale_all_dim " +
             num(*y.mscale_all_dim) + " (DeepSeek-2's pre-scaled key); mscale = " + num(*y.mscale));
      } else {
        y.attention_factor = yarn_mscale(s.factor, 1.0) / yarn_mscale(s.factor, log_mul->value);
        warn(p_ + "rope.scaling.yarn_log_multiplier (" + num(log_mul->value) +
             ") is taken as "
             "mscale_all_dim with mscale 1 for the attention factor (" +
             num(*y.attention_factor) +
             "), as llama-context.cpp does; it is not applied to the "
             "softmax scale for architecture " +
             arch_);
      }
    }
    if (attn && attn->value != 1.0) {
      // llama.cpp multiplies its derived attention factor by rope.scaling.attn_factor.
      double derived = y.attention_factor.value_or(0.0);
      if (!y.attention_factor) {
        derived = y.mscale && y.mscale_all_dim && *y.mscale != 0 && *y.mscale_all_dim != 0
                      ? yarn_mscale(s.factor, *y.mscale) / yarn_mscale(s.factor, *y.mscale_all_dim)
                      : yarn_mscale(s.factor, 1.0);
      }
      y.attention_factor = derived * attn->value;
      note("attention factor " + num(derived) + " x rope.scaling.attn_factor " + num(attn->value));
    }
  }

  // ggml_rope_multi's sections into ggml's parameters, and the spec's axis map in ggml's sense
  // (AxisRule::kGgml: 4 axes t, h, w, e; positions [4, tokens]).
  void set_multi(GgufModel& out) {
    GgmlRopeParams& g = out.ggml;
    g.sections = sections_;
    RopeSpec& s = out.config.spec;
    // finish()'s validate() refuses such a head, naming head_dim; the axis map of its n_dims
    // (up to 2^31) would first allocate a byte per pair (found by fuzz_gguf: 16 s, 1 GB).
    if (s.head_dim > kMaxHeadDim) return;
    try {
      validate(g);
      validate_head_dim(g, s.head_dim);
      s.axis_map = ggml_axis_map(g);
    } catch (const Error& e) {
      fail_derived(std::string(e.what()) + " (" + origins_["sections"] + "; head_dim " +
                   origins_["head_dim"] + ")");
    }
    std::string e_pairs;
    for (std::size_t i = 0; i < s.axis_map.slot_axis.size(); ++i) {
      if (s.axis_map.slot_axis[i] == 3)
        e_pairs += (e_pairs.empty() ? "" : ", ") + std::to_string(i);
    }
    if (!e_pairs.empty()) {
      note("pairs " + e_pairs + " read the fourth position axis e, which llama.cpp sets to 0 " +
           "for text tokens (transformers reads t there)");
    }
  }

  // Validation, and every key not read: RoPE-looking ones are warnings, the rest ignored.
  void finish(GgufModel& out) {
    ModelConfig& c = out.config;
    try {
      for (std::string& w : validate(c.spec)) warnings_.push_back(f_.source + ": " + w);
    } catch (const Error& e) {
      fail_derived(e.what());
    }
    try {
      validate(out.ggml);
    } catch (const Error& e) {
      fail_derived(std::string("llama.cpp's parameters: ") + e.what());
    }
    for (const auto& [key, value] : f_.metadata) {
      if (read_.count(key) != 0 && key != p_ + "rope.scaling.finetuned") continue;
      if (key == p_ + "rope.scaling.finetuned") {
        c.ignored_keys.push_back(key);
      } else if (key.rfind(p_ + "rope.", 0) == 0 || mentions_rope(key)) {
        warn(key + " (" + value.describe() +
             ") is not a RoPE key posenc understands for "
             "architecture " +
             arch_ + "; it was not applied");
      } else {
        c.ignored_keys.push_back(key);
      }
    }
    for (const GgufTensorInfo& t : f_.tensors) {
      if (t.name.rfind("rope", 0) == 0 && t.name != kGgufRopeFreqs &&
          t.name != kGgufRopeFactorsLong && t.name != kGgufRopeFactorsShort &&
          t.name + ".weight" != kGgufRopeFreqs && t.name + ".weight" != kGgufRopeFactorsLong &&
          t.name + ".weight" != kGgufRopeFactorsShort) {
        warn("tensor \"" + t.name + "\" looks RoPE-related but is not one posenc reads");
      }
    }
    c.warnings.insert(c.warnings.end(), warnings_.begin(), warnings_.end());
    out.notes = std::move(notes_);
  }

  std::string arch_;
  std::string p_;  // "ARCH."
  GgmlMode mode_ = GgmlMode::kNormal;
  std::array<int, 4> sections_{};  // rope.dimension_sections, for the multi modes
  std::int64_t ctx_train_ = 0;
  std::optional<std::int64_t> orig_ctx_;
  std::map<std::string, std::string> origins_;  // field -> "from KEY (value)"; see origin()
  std::vector<std::string> notes_;
};

}  // namespace

GgufModel gguf_model(const GgufFile& file) { return Mapper(file).map(); }

GgufModel load_gguf_model(const std::filesystem::path& path) { return gguf_model(read_gguf(path)); }

}  // namespace posenc
