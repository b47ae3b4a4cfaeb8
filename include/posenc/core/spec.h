// posenc/core/spec.h: RopeSpec, what a model asks of its rotary position embedding.
//
// A RopeSpec is pure description: dims, base, layout, the scaling method and its parameters,
// named after Hugging Face's config keys so that the parser is a thin mapping. Frequencies
// (frequencies.h) turns it into numbers.
//
// Notation (docs/design.md §3): d_h head_dim; D rotary_dim; n = D/2 rotated pairs, i in [0, n);
// b rope_theta; s factor; L original_max_position_embeddings; L' max_position_embeddings.
//
//   head:  [ 0 ... rotary_offset ... rotary_offset + D ... d_h )
//                    └──── rotated ────┘   (the rest is left untouched)
//   kHalfSplit:   pair i = (i, i + n)      GPT-NeoX, Llama in Hugging Face
//   kInterleaved: pair i = (2i, 2i + 1)    GPT-J, RoFormer, llama.cpp's normal mode
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/defaults.h"

namespace posenc {

// Scaling methods of docs/design.md §3. The registry key of each is `method_name()`.
enum class Method {
  kNone,          // "default": w_i = b^(-2i/D)
  kLinear,        // "linear": Position Interpolation, w_i / s
  kNtk,           // "ntk": static NTK-aware, base b * s^(D/(D-2))
  kDynamic,       // "dynamic": Hugging Face dynamic NTK, base grows with the sequence length
  kYarn,          // "yarn": ramp blend of w/s and w, attention factor
  kDynamicYarn,   // "dynamic-yarn": yarn with s = max(1, seq_len / L)
  kLlama3,        // "llama3": wavelength bands, smooth blend in between
  kLongrope,      // "longrope": per-pair factors, short or long by sequence length
  kProportional,  // "proportional": first int(rho * d_h / 2) pairs of a d_h-wide table, / s
  kNtkAlpha,      // "ntk-alpha": Hunyuan's NTK alpha, base b * alpha^(D/(D-2))
};

enum class Layout { kHalfSplit, kInterleaved };

// Which ramp YaRN blends with. Every implementation (Hugging Face, llama.cpp, vLLM) ramps over
// the pair index between correction dims; the paper (eq. 18-19) ramps over r = L / lambda.
enum class YarnRamp { kPairIndex, kPaper };

struct YarnParams {
  std::optional<double> attention_factor;  // explicit; else derived from mscale / factor
  std::optional<double> mscale;            // DeepSeek: numerator of the attention factor
  std::optional<double> mscale_all_dim;    // DeepSeek: denominator, and the softmax multiplier
  double beta_fast = kYarnBetaFast;        // rotations: pairs above keep w (extrapolate)
  double beta_slow = kYarnBetaSlow;        // rotations: pairs below get w / s (interpolate)
  bool truncate = true;                    // floor/ceil the correction dims (gpt-oss: false)
  double extrapolation_factor = kYarnExtrapolationFactor;  // llama.cpp ext_factor
  YarnRamp ramp = YarnRamp::kPairIndex;
};

struct Llama3Params {
  double low_freq_factor = kLlama3LowFreqFactor;
  double high_freq_factor = kLlama3HighFreqFactor;
};

struct LongropeParams {
  std::vector<double> short_factor;  // n entries, used while seq_len <= L
  std::vector<double> long_factor;   // n entries, used once seq_len > L
  std::optional<double> attention_factor;
};

// Multi-axis RoPE (M-RoPE): which position axis each frequency slot j in [0, n) reads
// (docs/design.md "Axis maps"; ../shared/docs/rope-in-engines.md 1.1). Positions then come as
// [axes, tokens], axis-major. Built by the constructors below, never by hand.
enum class AxisRule {
  kSingle,       // one axis: plain RoPE, every slot reads the token's one position
  kContiguous,   // Qwen2-VL, Qwen2.5-VL, GLM-4.1V: [s_t, s_h, s_w] slot ranges in order
  kInterleaved,  // Qwen3-VL mrope_interleaved: j%3==1 && j<3 s_h -> h, j%3==2 && j<3 s_w -> w
  kErnie,        // ERNIE-4.5-VL: sections (s_h, s_w, s_t); j < s_h + s_w alternates h, w; then t
  kXdrope,       // HunYuan-VL XD-RoPE: 4 contiguous sections, positions ordered p, w, h, t
  kGgml,         // ggml_rope_multi (ggml.h ggml_axis_map): 4 axes t, h, w, e; sections repeat
  kVision,       // ViT 2D RoPE (Qwen2-VL..3-VL, Llama 4, ggml VISION): contiguous sections whose
                 // frequency ladder restarts: slot j has w = b^(-2 (j - start(j)) / n)
};

struct AxisMap {
  AxisRule rule = AxisRule::kSingle;
  std::vector<std::int64_t> sections;   // as the config gives them (mrope_section, ...)
  std::vector<std::uint8_t> slot_axis;  // axis of slot j; empty for kSingle
  std::int64_t axes = 1;                // position axes: 1, 3, or 4 (XD-RoPE)
  bool operator==(const AxisMap&) const = default;
};

// Qwen2-VL / Qwen2.5-VL mrope_section [s_t, s_h, s_w] (transformers' modeling_qwen2_vl.py
// apply_multimodal_rotary_pos_emb; vLLM MRotaryEmbedding): j < s_t -> t, < s_t + s_h -> h, else w.
AxisMap mrope_sections(std::span<const std::int64_t> sections);
// Qwen3-VL mrope_interleaved (Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope):
// j%3==1 && j<3 s_h -> h; j%3==2 && j<3 s_w -> w; else t.
AxisMap mrope_interleaved(std::span<const std::int64_t> sections);
// ERNIE-4.5-VL mrope_section ordered (s_h, s_w, s_t) (Ernie4_5_VLMoeTextRotaryEmbedding; vLLM
// ernie45_vl_rope.py "[h w h w ... t t t]"): j < s_h + s_w: even j -> h, odd j -> w; else t.
AxisMap ernie_mrope(std::span<const std::int64_t> sections);
// HunYuan-VL XD-RoPE xdrope_section [s_0..s_3] (vLLM xdrope.py): four contiguous sections over
// four axes, positions [4, tokens] ordered p, w, h, t.
AxisMap xdrope_sections(std::span<const std::int64_t> sections);
// Vision towers' 2D RoPE, sections [s_0, s_1(, ...)] (2 to 4, each > 0): section k -> axis k, and
// each section restarts the ladder, w_j = b^(-2 (j - start(j)) / n), n = rotary_dim / 2 (Qwen2-VL
// VisionRotaryEmbedding(head_dim/2): [s_0, s_1] = [head_dim/4, head_dim/4], axes (row, col);
// Llama4VisionRotaryEmbedding: the same sections, axes (x, y) = (col + 1, row + 1); ggml VISION).
// Only plain RoPE (rope_type default, no freq_factors) takes it.
AxisMap vision_sections(std::span<const std::int64_t> sections);
// The first slot of the section slot j is in (0 for maps without a restarted ladder).
std::int64_t section_start(const AxisMap& map, std::int64_t j);

// "t", "h", "w", "e" (XD-RoPE: "p", "w", "h", "t"; vision: "s0".."s3", section k's coordinate)
// for axis a of `map`.
std::string_view axis_name(const AxisMap& map, std::int64_t axis);
// "single", "contiguous", "interleaved", "ernie", "xdrope", "ggml", "vision".
std::string_view axis_rule_name(AxisRule rule);
// The axis slot j reads: map.slot_axis[j], 0 for a one-axis map.
inline std::int64_t slot_axis(const AxisMap& map, std::int64_t j) {
  return map.slot_axis.empty() ? 0 : map.slot_axis[static_cast<std::size_t>(j)];
}

// validate() refuses a larger head_dim: no model comes near it, and the bound keeps a typo (or a
// fuzzer) from asking for terabytes.
inline constexpr std::int64_t kMaxHeadDim = 65536;

struct RopeSpec {
  Method method = Method::kNone;
  std::int64_t head_dim = 0;       // d_h
  std::int64_t rotary_dim = 0;     // D: even, rotary_offset + D <= d_h
  std::int64_t rotary_offset = 0;  // first rotated dim of each head
  Layout layout = Layout::kHalfSplit;
  double rope_theta = kDefaultRopeTheta;              // b
  double factor = kDefaultFactor;                     // s
  std::int64_t original_max_position_embeddings = 0;  // L; 0 when the model has none
  std::int64_t max_position_embeddings = 0;           // L'; 0 when unknown
  double partial_rotary_factor = 1.0;                 // rho; used by proportional (its D is d_h)
  double alpha = 1.0;                                 // ntk-alpha: Hunyuan's rope_scaling.alpha
  YarnParams yarn;
  Llama3Params llama3;
  LongropeParams longrope;
  // Divisors of each pair's frequency, applied after the method: w_i / freq_factors[i]. This is
  // llama.cpp's freq_factors argument of ggml_rope_ext, which a GGUF file carries as the
  // rope_freqs tensor (convert_hf_to_gguf.py precomputes Llama 3 scaling into it). Empty: none;
  // else n = rotary_dim / 2 finite numbers > 0. Not with llama3, longrope or proportional, which
  // compute their own divisors.
  std::vector<double> freq_factors;
  // Which position axis each slot reads (M-RoPE). The default is one axis: plain RoPE.
  AxisMap axis_map;
};

// The parameter groups a method reads (MethodInfo::reads): one bit per group of RopeSpec fields.
// head_dim, rotary_dim, rotary_offset, layout, rope_theta and freq_factors are read by every
// method.
enum MethodParam : unsigned {
  kParamFactor = 1u << 0,           // factor s
  kParamOriginalContext = 1u << 1,  // original_max_position_embeddings L
  kParamMaxContext = 1u << 2,       // L' as a parameter (dynamic NTK's trained length)
  kParamYarn = 1u << 3,             // beta_fast, beta_slow, mscale, mscale_all_dim, extrapolation
  kParamYarnDims = 1u << 4,         // yarn.truncate: the ramp between correction dims
  kParamAttentionFactor = 1u << 5,  // an explicit attention factor (yarn's or longrope's)
  kParamLlama3 = 1u << 6,           // low_freq_factor, high_freq_factor
  kParamLongrope = 1u << 7,         // short_factor, long_factor
  kParamProportion = 1u << 8,       // partial_rotary_factor as the fraction of d_h/2 pairs rotated
  kParamAlpha = 1u << 9,            // alpha (ntk-alpha)
};

// How a method finds its attention factor (the multiplier of cos and sin).
enum class AttentionRule {
  kOne,       // always 1
  kYarn,      // explicit, else g(s, mscale) / g(s, mscale_all_dim), else 0.1 ln s + 1
  kLongrope,  // explicit, else sqrt(1 + ln s / ln L), 1 when s <= 1
};

// Whether one engine runs a method as the model asks; `reason` says why not.
struct EngineSupport {
  bool supported = true;
  std::string_view reason;  // empty when supported
};

// One entry of the method registry: every fact about a method that code outside its frequency
// function needs. `method_info` finds it; `methods()` lists them all (docs/design.md §3).
struct MethodInfo {
  std::string_view name;  // registry name: what method_name() prints and set_method() parses
  Method method;
  YarnRamp ramp;               // kPaper only for "yarn-paper"
  unsigned reads;              // MethodParam bits of the parameters the method reads
  bool factor_required;        // a context extension to it needs a factor (or a target context)
  bool factor_is_ratio;        // factor = the context it reaches / L (reachable_context)
  bool depends_on_seq_len;     // its frequencies change with the sequence length
  AttentionRule attention;     // how its attention factor is found
  EngineSupport transformers;  // transformers' ROPE_INIT_FUNCTIONS
  EngineSupport llama_cpp;     // llama.cpp (convert_hf_to_gguf.py + ggml_rope_ext)
  EngineSupport vllm;          // vLLM's get_rope

  bool reads_param(MethodParam p) const { return (reads & p) != 0; }
};

// Every registered method, in the order the docs list them.
std::span<const MethodInfo> methods();
// The entry of `method` (its pair-index ramp for the YaRN family).
const MethodInfo& method_info(Method method);
// The entry of a spec: "yarn-paper" for yarn with the paper's ramp, else method_info(spec.method).
const MethodInfo& method_info(const RopeSpec& spec);
// Whether the spec's method reads `param`: method_info(spec).reads, except that no ramp of the
// paper (yarn-paper, dynamic-yarn-paper) has correction dims to truncate.
bool method_reads(const RopeSpec& spec, MethodParam param);
// "yarn, yarn-paper and dynamic-yarn": the names of the methods that read `param`, for messages.
std::string methods_reading(MethodParam param);
// The same for a yes/no trait: methods_with(&MethodInfo::depends_on_seq_len).
std::string methods_with(bool MethodInfo::*trait);
// Whether the spec's frequencies depend on the sequence length (dynamic, dynamic-yarn, longrope).
bool depends_on_length(const RopeSpec& spec);

// Registry names: "default", "linear", "ntk", "dynamic", "yarn", "dynamic-yarn", "llama3",
// "longrope", "proportional", "ntk-alpha" (methods() lists them). `method_name` of a yarn spec
// with the paper's ramp is "yarn-paper".
std::string method_name(const RopeSpec& spec);
std::string_view method_name(Method method);

// Parses a method name: the names above, "none" for "default", "yarn-paper", and the legacy
// Hugging Face names "su" and "longrope" (LongRoPE), "dynamic_yarn". Sets spec.method (and
// spec.yarn.ramp for "yarn-paper"). Throws Error naming `field` and the value when unknown.
void set_method(RopeSpec& spec, std::string_view name, std::string_view field = "rope_type");

std::string_view layout_name(Layout layout);  // "half-split" or "interleaved"

// The inverse of layout_name; throws Error naming `field` and the value when it is neither.
Layout parse_layout(std::string_view name, std::string_view field = "layout");

// Checks every field the method uses. Throws Error naming the field, its value and the rule
// (e.g. "yarn: beta_fast (0.5) must be greater than beta_slow (1)"). Returns warnings for legal
// but suspicious input (factor below 1, a factor that disagrees with L' / L, ...).
std::vector<std::string> validate(const RopeSpec& spec);

// GLM-4.1V / GLM-4.5V (transformers' modeling_glm4v.py): contiguous sections on the first half of
// the head in adjacent pairs: sets rotary_dim = head_dim / 2, kInterleaved and mrope_sections.
void set_glm4v_mrope(RopeSpec& spec, std::span<const std::int64_t> sections);

// Position axes the spec reads: spec.axis_map.axes (1 for plain RoPE).
inline std::int64_t axis_count(const RopeSpec& spec) { return spec.axis_map.axes; }

// Number of rotated pairs n = D / 2 (the length of Frequencies::inv_freq).
inline std::int64_t pair_count(const RopeSpec& spec) { return spec.rotary_dim / 2; }

// The two contexts every command shows and works with, by one rule:
//   original = L, else L', else kAssumedContext (assumed = true);
//   extended = L', else s * L for a method that scales (s >= 1), else original.
struct ContextLengths {
  std::int64_t original = 0;
  std::int64_t extended = 0;
  bool assumed = false;  // neither L nor L' is set: kAssumedContext stands in for L
};
ContextLengths context_lengths(const RopeSpec& spec);

// context_lengths(spec).extended: the context the scaled model is meant to reach.
std::int64_t extended_context(const RopeSpec& spec);

}  // namespace posenc
