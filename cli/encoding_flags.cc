// The encoding flags of `posenc apply` (encoding_flags.h).
#include "encoding_flags.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "options.h"
#include "posenc/core/error.h"
#include "posenc/io/npy.h"

namespace posenc::cli {
namespace {

constexpr std::int64_t kMin64 = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax64 = std::numeric_limits<std::int64_t>::max();
constexpr int kMinInt = std::numeric_limits<int>::min();
constexpr int kMaxInt = std::numeric_limits<int>::max();
constexpr const char* kSpecGroup = "Encoding (flags override the model's values)";
constexpr const char* kGgmlGroup =
    "ggml_rope_ext parameters (instead of a model or spec flags; imply --numerics ggml)";

std::string shown(const CLI::Option* o) {
  std::string value;
  for (const std::string& r : o->results()) value += (value.empty() ? "" : ",") + r;
  return o->get_name() + " (" + value + ")";
}

bool given(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

// The parameter behind each spec flag (0: every method reads it). A flag the method does not read
// is an error, never silently dropped (a user who passes --factor expects some scaling).
constexpr std::pair<std::string_view, unsigned> kFlagParams[] = {
    {"--rope-type", 0},
    {"--head-dim", 0},
    {"--rotary-dim", 0},
    {"--rotary-offset", 0},
    {"--layout", 0},
    {"--rope-theta", 0},
    {"--partial-rotary-factor", 0},  // rotary_dim = int(head_dim * rho); proportional: its own rule
    {"--factor", kParamFactor},
    {"--original-max-position-embeddings", kParamOriginalContext},
    {"--max-position-embeddings", kParamMaxContext},
    {"--attention-factor", kParamAttentionFactor},
    {"--mscale", kParamYarn},
    {"--mscale-all-dim", kParamYarn},
    {"--beta-fast", kParamYarn},
    {"--beta-slow", kParamYarn},
    {"--extrapolation-factor", kParamYarn},
    {"--truncate", kParamYarnDims},
    {"--low-freq-factor", kParamLlama3},
    {"--high-freq-factor", kParamLlama3},
    {"--short-factor", kParamLongrope},
    {"--long-factor", kParamLongrope},
    {"--alpha", kParamAlpha},
};

// Whether the spec's method reads the parameter behind `flag`; a flag missing above is read by
// none.
bool flag_read(const RopeSpec& spec, std::string_view flag) {
  for (const auto& [name, param] : kFlagParams) {
    if (name == flag) return param == 0 || method_reads(spec, static_cast<MethodParam>(param));
  }
  return false;
}

GgmlMode parse_mode(const std::string& name) {
  try {
    return parse_ggml_mode(name, "--mode");
  } catch (const Error&) {
    throw Error("--mode (\"" + name +
                "\") must be normal (0, pairs (2i, 2i + 1)), neox (2, pairs (i, i + n_dims/2)), "
                "or one of ggml_rope_multi's mrope (8), imrope (40), vision (24)");
  }
}

// --sections A,B,C,D: exactly four non-negative integers.
std::array<int, 4> parse_sections(const std::string& text) {
  auto fail = [&] {
    throw Error("--sections (\"" + text +
                "\") must be 4 comma-separated non-negative integers t,h,w,e (ggml_rope_multi's "
                "sections, e.g. 16,24,24,0)");
  };
  std::array<int, 4> out{};
  std::size_t k = 0, start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (k == out.size() || item.empty() || item.size() > 9 ||
        item.find_first_not_of("0123456789") != std::string::npos) {
      fail();
    }
    out[k++] = std::stoi(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (k != out.size()) fail();
  return out;
}

std::vector<float> read_freq_factors(const std::string& path) {
  const NpyArray a = read_npy_flag("--freq-factors", path);
  if (a.descr != "<f4" || a.shape.size() != 1) {
    std::string shape;
    for (auto d : a.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw Error("--freq-factors: " + path + " holds '" + a.descr + "' of shape [" + shape +
                "]; expected a float32 ('<f4') vector of one divisor per rotated pair (n_dims / 2; "
                "n_dims for --mode vision)");
  }
  std::vector<float> out(static_cast<std::size_t>(a.shape[0]));
  std::memcpy(out.data(), a.data.data(), a.data.size());
  return out;
}

}  // namespace

NpyArray read_npy_flag(const std::string& flag, const std::string& path) {
  try {
    return read_npy(path);
  } catch (const Error& e) {
    throw Error(flag + ": " + e.what());
  }
}

std::string given_names(const std::vector<CLI::Option*>& options) {
  std::string names;
  for (const CLI::Option* o : options) {
    if (given(o)) names += (names.empty() ? "" : ", ") + shown(o);
  }
  return names;
}

void add_encoding_flags(CLI::App* cmd, EncodingFlags& f) {
  // The model options of model_source.h, without its context-extension flags: here a flag sets
  // the spec's parameter directly, with or without a model.
  f.model_options = {
      add_text(cmd, "model", f.model.path,
               "The model: a Hugging Face config.json or a .gguf file (optional)", "PATH"),
      add_text(cmd, "--config", f.config,
               "The model's config.json or .gguf (the same as the positional)", "PATH"),
      add_text(cmd, "--preset", f.model.preset,
               "A built-in model preset instead of a file (see `posenc presets`)", "NAME"),
      add_text(cmd, "--layer-type", f.model.layer_type,
               "For configs with one RoPE per layer type (transformers v5): which one", "NAME")};
  SpecFlags& s = f.spec;
  auto spec = [&](CLI::Option* o) {
    o->group(kSpecGroup);
    f.spec_options.push_back(o);
  };
  std::string names;
  for (const MethodInfo& m : methods()) names += (names.empty() ? "" : "|") + std::string(m.name);
  spec(add_text(cmd, "--rope-type", s.rope_type, names));
  spec(add_integer(cmd, "--head-dim", s.head_dim, kMin64, kMax64,
                   "d_h (default: the model's, else the tensors' last dim)"));
  spec(add_integer(
      cmd, "--rotary-dim", s.rotary_dim, kMin64, kMax64,
      "D, rotated dims per head (default: the model's; without one, or with --head-dim or "
      "--partial-rotary-factor, int(head_dim * partial_rotary_factor); proportional: head_dim)"));
  spec(add_integer(cmd, "--rotary-offset", s.rotary_offset, kMin64, kMax64,
                   "First rotated dim of each head (default 0)"));
  spec(add_text(cmd, "--layout", s.layout,
                "half-split (pairs (i, i+n), the default) or interleaved (pairs (2i, 2i+1))"));
  spec(add_number(cmd, "--rope-theta", s.rope_theta, "Base b (default 10000)"));
  spec(add_number(cmd, "--factor", s.factor, "Scaling factor s"));
  spec(add_integer(cmd, "--original-max-position-embeddings", s.original_max_position_embeddings,
                   kMin64, kMax64, "L, the original context"));
  spec(add_integer(cmd, "--max-position-embeddings", s.max_position_embeddings, kMin64, kMax64,
                   "L', the extended context (dynamic)"));
  spec(add_number(cmd, "--attention-factor", s.attention_factor,
                  "yarn, longrope: explicit attention factor"));
  spec(add_number(cmd, "--mscale", s.mscale, "yarn (DeepSeek): numerator of the attention factor"));
  spec(add_number(cmd, "--mscale-all-dim", s.mscale_all_dim,
                  "yarn (DeepSeek): denominator of the attention factor"));
  spec(add_bool(cmd, "--truncate", s.truncate,
                "yarn: floor/ceil the correction dims, true|false (default true)"));
  spec(add_number(cmd, "--extrapolation-factor", s.extrapolation_factor,
                  "yarn: weight of the extrapolated frequency (default 1)"));
  spec(add_number(cmd, "--low-freq-factor", s.low_freq_factor, "llama3 (default 1)"));
  spec(add_number(cmd, "--high-freq-factor", s.high_freq_factor, "llama3 (default 4)"));
  CLI::Option* sf = add_numbers(cmd, "--short-factor", s.short_factor,
                                "longrope: rotary_dim/2 comma-separated factors");
  CLI::Option* lf = add_numbers(cmd, "--long-factor", s.long_factor,
                                "longrope: rotary_dim/2 comma-separated factors");
  spec(sf);
  spec(lf);
  f.short_factor_option = sf;
  f.long_factor_option = lf;
  spec(add_number(cmd, "--alpha", s.alpha, "ntk-alpha: Hunyuan's alpha, base b * alpha^(D/(D-2))"));
  spec(add_number(cmd, "--partial-rotary-factor", s.partial_rotary_factor,
                  "rho: rotary_dim = int(head_dim * rho); proportional: rotates int(rho * head_dim "
                  "/ 2) pairs"));
  for (auto [name, value, help] :
       {std::tuple{"--beta-fast", &s.beta_fast,
                   "yarn / ggml: rotations above which pairs keep w (default 32)"},
        std::tuple{"--beta-slow", &s.beta_slow,
                   "yarn / ggml: rotations below which pairs get w/s (default 1)"}}) {
    f.shared_options.push_back(add_number(cmd, name, *value, help)->group(kSpecGroup));
  }

  GgmlFlags& g = f.ggml;
  auto ggml = [&](CLI::Option* o) {
    o->group(kGgmlGroup);
    f.ggml_options.push_back(o);
  };
  ggml(
      add_integer(cmd, "--n-dims", g.n_dims, kMinInt, kMaxInt, "Rotated dims (default: head_dim)"));
  ggml(add_text(cmd, "--mode", g.mode,
                "normal (0: pairs (2i, 2i+1), the default), neox (2: pairs (i, i + n_dims/2)), or "
                "ggml_rope_multi's mrope (8), imrope (40) and vision (24: pairs (i, i + n_dims), "
                "n_dims = head_dim/2), which take --sections and --positions of shape [4, tokens] "
                "(t, h, w, e)"));
  ggml(add_text(cmd, "--sections", g.sections,
                "mrope / imrope / vision: ggml_rope_multi's sections t,h,w,e (GGUF "
                "rope.dimension_sections), e.g. 16,24,24,0",
                "A,B,C,D"));
  ggml(add_integer(cmd, "--n-ctx-orig", g.n_ctx_orig, kMinInt, kMaxInt,
                   "Original context (default 0)"));
  ggml(add_number(cmd, "--freq-base", g.freq_base, "Base (default 10000)"));
  ggml(add_number(cmd, "--freq-scale", g.freq_scale, "1 / scaling factor (default 1)"));
  ggml(
      add_number(cmd, "--ext-factor", g.ext_factor, "YaRN extrapolation mix (default 0: no ramp)"));
  ggml(add_number(cmd, "--attn-factor", g.attn_factor, "Multiplies cos and sin (default 1)"));
  ggml(add_text(cmd, "--freq-factors", g.freq_factors,
                "float32 .npy of n_dims/2 frequency divisors (rope_freqs; --mode vision: n_dims)",
                "PATH"));
}

bool uses_ggml_params(const EncodingFlags& f) {
  const std::string ggml = given_names(f.ggml_options);
  if (ggml.empty()) return false;
  std::string other = given_names(f.model_options);
  const std::string spec = given_names(f.spec_options);
  if (!spec.empty()) other += (other.empty() ? "" : ", ") + spec;
  if (!other.empty()) {
    throw Error("ggml_rope_ext parameters (" + ggml +
                ") cannot be mixed with a model or RoPE spec flags (" + other + "): give one kind");
  }
  return true;
}

RopeSpec spec_from_flags(const EncodingFlags& f, std::int64_t tensor_head_dim,
                         std::vector<std::string>& warnings, std::string& source) {
  ModelSourceOptions model = f.model;
  if (!f.config.empty()) {
    if (!model.path.empty()) {
      throw Error("give the model either as CONFIG (\"" + model.path + "\") or as --config (\"" +
                  f.config + "\"), not both");
    }
    model.path = f.config;
  }
  const bool has_model = !model.path.empty() || !model.preset.empty();
  RopeSpec spec;
  if (has_model) {
    ModelConfig config = load_model_source(model);
    spec = config.spec;
    source = config.source;
    warnings.insert(warnings.end(), config.warnings.begin(), config.warnings.end());
  } else {
    if (!model.layer_type.empty()) {
      throw Error("--layer-type (\"" + model.layer_type +
                  "\") needs a model: give CONFIG or --config");
    }
    spec.head_dim = tensor_head_dim;
    source = "flags";
  }

  const SpecFlags& s = f.spec;
  if (s.rope_type) set_method(spec, *s.rope_type, "--rope-type");
  if (s.head_dim) spec.head_dim = *s.head_dim;
  if (s.partial_rotary_factor) {
    const double rho = *s.partial_rotary_factor;
    if (!(std::isfinite(rho) && rho > 0 && rho <= 1)) {
      throw Error(fmt::format("--partial-rotary-factor ({}) must be in (0, 1]", rho));
    }
    spec.partial_rotary_factor = rho;
  }
  if (s.rotary_dim) {
    spec.rotary_dim = *s.rotary_dim;
  } else if (spec.method == Method::kProportional) {
    spec.rotary_dim = spec.head_dim;
  } else if (!has_model || s.head_dim || s.partial_rotary_factor) {
    // transformers: int(head_dim * partial_rotary_factor).
    spec.rotary_dim =
        static_cast<std::int64_t>(static_cast<double>(spec.head_dim) * spec.partial_rotary_factor);
  }
  if (s.rotary_offset) spec.rotary_offset = *s.rotary_offset;
  if (s.layout) spec.layout = parse_layout(*s.layout, "--layout");
  if (s.rope_theta) spec.rope_theta = *s.rope_theta;
  if (s.factor) spec.factor = *s.factor;
  if (s.original_max_position_embeddings)
    spec.original_max_position_embeddings = *s.original_max_position_embeddings;
  if (s.max_position_embeddings) spec.max_position_embeddings = *s.max_position_embeddings;
  // Unchecked here: every flag the method does not read is refused below, all at once.
  assign_method_params(spec, s);
  if (given(f.short_factor_option)) spec.longrope.short_factor = s.short_factor;
  if (given(f.long_factor_option)) spec.longrope.long_factor = s.long_factor;

  std::vector<CLI::Option*> all = f.spec_options;
  all.insert(all.end(), f.shared_options.begin(), f.shared_options.end());
  if (has_model && !given_names(all).empty()) source += " + flags";
  std::string unread;
  for (const CLI::Option* o : all) {
    if (given(o) && !flag_read(spec, o->get_name()))
      unread += (unread.empty() ? "" : ", ") + shown(o);
  }
  if (!unread.empty()) {
    throw Error(unread + ": rope_type " + method_name(spec) + " (from " + source +
                ") does not read this, so it would have no effect; give --rope-type for a method "
                "that does");
  }
  return spec;
}

GgmlRopeParams ggml_params_from_flags(const EncodingFlags& f, std::int64_t tensor_head_dim) {
  const GgmlFlags& g = f.ggml;
  GgmlRopeParams p;
  if (tensor_head_dim > std::numeric_limits<int>::max()) {
    throw Error("head_dim (" + std::to_string(tensor_head_dim) +
                ") does not fit ggml's int32 n_dims");
  }
  if (g.mode) p.mode = parse_mode(*g.mode);
  // VISION rotates (i, i + n_dims) over the whole head: its n_dims is half the head.
  const auto head = static_cast<int>(tensor_head_dim);
  p.n_dims = g.n_dims.value_or(p.mode == GgmlMode::kVision ? head / 2 : head);
  if (p.n_dims > tensor_head_dim) {
    throw Error("--n-dims (" + std::to_string(p.n_dims) + ") exceeds the tensors' head_dim (" +
                std::to_string(tensor_head_dim) + ")");
  }
  if (ggml_is_multi(p.mode) && !g.sections) {
    throw Error("--mode " + std::string(ggml_mode_name(p.mode)) +
                " (ggml_rope_multi) needs --sections A,B,C,D (t, h, w, e; a GGUF's "
                "rope.dimension_sections)");
  }
  if (!ggml_is_multi(p.mode) && g.sections) {
    throw Error("--sections (\"" + *g.sections + "\") is read only by --mode mrope, imrope or " +
                "vision (ggml_rope_multi); --mode " + std::string(ggml_mode_name(p.mode)) +
                " takes one position per token");
  }
  if (g.sections) p.sections = parse_sections(*g.sections);
  if (g.n_ctx_orig) p.n_ctx_orig = *g.n_ctx_orig;
  if (g.freq_base) p.freq_base = *g.freq_base;
  if (g.freq_scale) p.freq_scale = *g.freq_scale;
  if (g.ext_factor) p.ext_factor = *g.ext_factor;
  if (g.attn_factor) p.attn_factor = *g.attn_factor;
  if (f.spec.beta_fast) p.beta_fast = static_cast<float>(*f.spec.beta_fast);
  if (f.spec.beta_slow) p.beta_slow = static_cast<float>(*f.spec.beta_slow);
  if (g.freq_factors) p.freq_factors = read_freq_factors(*g.freq_factors);
  validate(p);
  validate_head_dim(p, tensor_head_dim);
  return p;
}

}  // namespace posenc::cli
