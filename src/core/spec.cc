// RopeSpec: method names and validation (docs/design.md §3 and §6).
#include "posenc/core/spec.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "core/methods.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "util/format.h"

namespace posenc {
namespace {

using detail::num;

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

// The hf and ggml numerics round every parameter to float32 (docs/design.md §4). A double rounds to
// a finite float below 2^128 - 2^103 (FLT_MAX plus half its ulp; the tie goes to the even 2^128).
constexpr double kFloat32Overflow = 0x1p128 - 0x1p103;
constexpr double kFloat32Min = 0x1p-126;  // FLT_MIN: a smaller divisor makes 1/x overflow
constexpr const char* kFloat32Range = "(must be within float32's range, 1.2e-38 .. 3.4e38)";

bool fits_float32(double v) { return std::abs(v) < kFloat32Overflow; }

std::string list_str(std::span<const std::int64_t> v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string_view sections_field(AxisRule rule) {
  if (rule == AxisRule::kGgml) return "sections";
  if (rule == AxisRule::kVision) return "vision sections";
  return rule == AxisRule::kXdrope ? "xdrope_section" : "mrope_section";
}

// Sections of a rule: the right count, none negative. Returns their sum (the slot count).
std::int64_t check_sections(AxisRule rule, std::span<const std::int64_t> sections,
                            std::size_t count) {
  const std::string field(sections_field(rule));
  const std::string rule_name(axis_rule_name(rule));
  if (sections.size() != count) {
    throw Error(field + " (" + list_str(sections) + ") must have " + std::to_string(count) +
                " entries for the " + rule_name + " axis map, got " +
                std::to_string(sections.size()));
  }
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] < 0 || sections[i] > (std::int64_t{1} << 20)) {
      throw Error(field + "[" + std::to_string(i) + "] (" + std::to_string(sections[i]) +
                  ") must be a slot count in [0, 1048576]");
    }
    sum += sections[i];
  }
  if (sum == 0) throw Error(field + " (" + list_str(sections) + ") must not be all zeros");
  return sum;
}

AxisMap make_map(AxisRule rule, std::span<const std::int64_t> sections, std::int64_t axes) {
  AxisMap m;
  m.rule = rule;
  m.sections.assign(sections.begin(), sections.end());
  m.axes = axes;
  return m;
}

// Slots [0, sum) split into consecutive ranges, section k -> axis k.
AxisMap contiguous(AxisRule rule, std::span<const std::int64_t> sections, std::int64_t axes) {
  check_sections(rule, sections, static_cast<std::size_t>(axes));
  AxisMap m = make_map(rule, sections, axes);
  for (std::size_t k = 0; k < sections.size(); ++k) {
    m.slot_axis.insert(m.slot_axis.end(), static_cast<std::size_t>(sections[k]),
                       static_cast<std::uint8_t>(k));
  }
  return m;
}

// check_longrope words its own factor checks (its factor below 1 turns the attention factor off).
bool uses_factor(Method m) {
  return method_info(m).reads_param(kParamFactor) && m != Method::kLongrope;
}

// Collects the checks of one spec; `fail` throws with the method's name in front.
class Checker {
 public:
  explicit Checker(const RopeSpec& spec) : prefix_(method_name(spec)) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error(prefix_ + ": " + what); }
  void warn(const std::string& what) { warnings_.push_back(prefix_ + ": " + what); }

  void positive(std::string_view field, double v) {
    if (!finite_positive(v))
      fail(std::string(field) + " (" + num(v) + ") must be a finite number greater than 0");
  }
  void positive_int(std::string_view field, std::int64_t v) {
    if (v <= 0)
      fail(std::string(field) + " (" + std::to_string(v) + ") must be a positive integer");
  }
  void finite(std::string_view field, double v) {
    if (!std::isfinite(v)) fail(std::string(field) + " (" + num(v) + ") must be a finite number");
  }
  // After positive(): a divisor, base or multiplier that must stay a normal float32.
  void float32_positive(std::string_view field, double v) {
    if (!(v >= kFloat32Min && fits_float32(v))) {
      fail(std::string(field) + " (" + num(v) + ") does not survive rounding to float32 " +
           kFloat32Range);
    }
  }
  // After finite(): a value that may be 0 or negative, used as a float32.
  void float32_finite(std::string_view field, double v) {
    if (!fits_float32(v)) {
      fail(std::string(field) + " (" + num(v) + ") overflows float32 " + kFloat32Range);
    }
  }

  std::vector<std::string> take_warnings() { return std::move(warnings_); }

 private:
  std::string prefix_;
  std::vector<std::string> warnings_;
};

void check_dims(const RopeSpec& s, Checker& c) {
  c.positive_int("head_dim", s.head_dim);
  if (s.head_dim > kMaxHeadDim) {
    c.fail("head_dim (" + std::to_string(s.head_dim) + ") must be at most " +
           std::to_string(kMaxHeadDim));
  }
  if (s.rotary_dim <= 0 || s.rotary_dim % 2 != 0) {
    c.fail("rotary_dim (" + std::to_string(s.rotary_dim) + ") must be a positive even number");
  }
  if (s.rotary_offset < 0) {
    c.fail("rotary_offset (" + std::to_string(s.rotary_offset) + ") must not be negative");
  }
  if (s.rotary_dim > s.head_dim - s.rotary_offset) {  // rotary_offset + rotary_dim > head_dim
    c.fail("rotary_offset + rotary_dim (" + std::to_string(s.rotary_offset) + " + " +
           std::to_string(s.rotary_dim) + ") must not exceed head_dim (" +
           std::to_string(s.head_dim) + ")");
  }
  if (!(std::isfinite(s.rope_theta) && s.rope_theta > 1)) {
    c.fail("rope_theta (" + num(s.rope_theta) + ") must be a finite number greater than 1");
  }
  c.float32_positive("rope_theta", s.rope_theta);
  if (static_cast<float>(s.rope_theta) == 1.0f) {  // ggml's ramp divides by ln(freq_base)
    c.fail("rope_theta (" + num(s.rope_theta) + ") rounds to 1 in float32; it must be at least " +
           num(static_cast<double>(std::nextafter(1.0f, 2.0f))));
  }
  if (s.max_position_embeddings < 0) {
    c.positive_int("max_position_embeddings", s.max_position_embeddings);
  }
  if (s.original_max_position_embeddings < 0) {
    c.positive_int("original_max_position_embeddings", s.original_max_position_embeddings);
  }
  // Contexts are counted in int64 and positions in float: keep s * L far from overflow.
  if (std::isfinite(s.factor) &&
      s.factor * static_cast<double>(s.original_max_position_embeddings) > 0x1p53) {
    c.fail("factor (" + num(s.factor) + ") times original_max_position_embeddings (" +
           std::to_string(s.original_max_position_embeddings) + ") exceeds 2^53 positions");
  }
}

void check_factor(const RopeSpec& s, Checker& c) {
  c.positive("factor", s.factor);
  c.float32_positive("factor", s.factor);
  if (s.factor < 1) {
    c.warn("factor (" + num(s.factor) +
           ") is below 1: positions are compressed rather than the context extended "
           "(transformers expects a float >= 1)");
  }
}

// The attention factor g(s, mscale) / g(s, mscale_all_dim) and DeepSeek's softmax multiplier
// g(s, mscale_all_dim)^2, g(s, m) = 0.1 m ln s + 1, at the scale the spec asks for (dynamic-yarn:
// its extended context; compute_frequencies checks each other length).
void check_yarn_scalars(const RopeSpec& s, Checker& c) {
  const YarnParams& y = s.yarn;
  double scale = s.factor;
  if (s.method == Method::kDynamicYarn) {
    scale = detail::dynamic_yarn_scale(s, extended_context(s));
  }
  const std::string at = "at scale " + num(scale);
  auto g_positive = [&](const char* field, double m) {
    const double g = yarn_mscale(scale, m);
    if (!(g > 0 && fits_float32(g))) {
      c.fail(std::string(field) + " (" + num(m) + ") gives " + at + " g = 0.1 * " + field +
             " * ln(" + num(scale) + ") + 1 = " + num(g) +
             "; it must be a finite number greater than 0 " + kFloat32Range);
    }
    return g;
  };
  const bool mscale_ratio = !y.attention_factor && y.mscale && y.mscale_all_dim &&
                            *y.mscale != 0.0 && *y.mscale_all_dim != 0.0;
  if (y.mscale_all_dim && *y.mscale_all_dim != 0.0) {
    const double g = g_positive("mscale_all_dim", *y.mscale_all_dim);
    if (!(g * g >= kFloat32Min && fits_float32(g * g))) {
      c.fail("mscale_all_dim (" + num(*y.mscale_all_dim) + ") gives " + at +
             " the softmax-scale multiplier " + num(g) + "^2 = " + num(g * g) +
             ", outside float32 " + kFloat32Range);
    }
  }
  if (mscale_ratio) {
    g_positive("mscale", *y.mscale);
    const double a = detail::yarn_attention_factor(y, scale);
    if (!(a >= kFloat32Min && fits_float32(a))) {
      c.fail("mscale (" + num(*y.mscale) + ") and mscale_all_dim (" + num(*y.mscale_all_dim) +
             ") give " + at + " the attention factor " + num(a) + ", outside float32 " +
             kFloat32Range);
    }
  }
}

// The correction range of the pair-index ramp as methods.cc computes it. Once clamped to
// [0, D-1] it can come out inverted (low above high): transformers' ramp then divides by the
// negative span while llama.cpp's divides by max(0.001, high - low), and neither is a ramp.
void check_correction_range(const RopeSpec& s, Checker& c) {
  const YarnParams& y = s.yarn;
  const double dim = static_cast<double>(s.rotary_dim);
  const double L = static_cast<double>(s.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return dim * std::log(L / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(s.rope_theta));
  };
  double lo = correction_dim(y.beta_fast);
  double hi = correction_dim(y.beta_slow);
  if (y.truncate) {
    lo = std::floor(lo);
    hi = std::ceil(hi);
  }
  if (std::max(lo, 0.0) > std::min(hi, dim - 1.0)) {
    c.warn("beta_fast (" + num(y.beta_fast) + ") and beta_slow (" + num(y.beta_slow) +
           ") give the correction range " + num(lo) + " .. " + num(hi) +
           ", inverted once clamped to 0 .. " + num(dim - 1.0) + " (rotary_dim " +
           std::to_string(s.rotary_dim) + ", rope_theta " + num(s.rope_theta) +
           ", original_max_position_embeddings " +
           std::to_string(s.original_max_position_embeddings) +
           "): there is no ramp, and transformers and llama.cpp resolve it differently");
  }
}

void check_yarn(const RopeSpec& s, Checker& c) {
  const YarnParams& y = s.yarn;
  c.positive_int("original_max_position_embeddings", s.original_max_position_embeddings);
  c.finite("beta_fast", y.beta_fast);
  c.positive("beta_slow", y.beta_slow);
  if (!(y.beta_fast > y.beta_slow)) {
    c.fail("beta_fast (" + num(y.beta_fast) + ") must be greater than beta_slow (" +
           num(y.beta_slow) + ")");
  }
  c.float32_positive("beta_fast", y.beta_fast);
  c.float32_positive("beta_slow", y.beta_slow);
  if (y.attention_factor) {
    c.positive("attention_factor", *y.attention_factor);
    c.float32_positive("attention_factor", *y.attention_factor);
  }
  if (y.mscale) {
    c.finite("mscale", *y.mscale);
    c.float32_finite("mscale", *y.mscale);
  }
  if (y.mscale_all_dim) {
    c.finite("mscale_all_dim", *y.mscale_all_dim);
    c.float32_finite("mscale_all_dim", *y.mscale_all_dim);
  }
  c.finite("extrapolation_factor", y.extrapolation_factor);
  c.float32_finite("extrapolation_factor", y.extrapolation_factor);
  check_yarn_scalars(s, c);
  if (y.ramp == YarnRamp::kPairIndex) check_correction_range(s, c);
  if (y.extrapolation_factor < 0 || y.extrapolation_factor > 1) {
    c.warn("extrapolation_factor (" + num(y.extrapolation_factor) +
           ") is outside [0, 1]: the ramp then overshoots the unscaled frequencies");
  }
  if (s.method == Method::kYarn && s.max_position_embeddings > 0) {
    const double implicit = static_cast<double>(s.max_position_embeddings) /
                            static_cast<double>(s.original_max_position_embeddings);
    if (implicit != s.factor && implicit != 1.0) {
      c.warn("factor (" + num(s.factor) +
             ") differs from max_position_embeddings / original_max_position_embeddings (" +
             std::to_string(s.max_position_embeddings) + " / " +
             std::to_string(s.original_max_position_embeddings) + " = " + num(implicit) +
             "); the explicit factor is used");
    }
  }
}

void check_llama3(const RopeSpec& s, Checker& c) {
  c.positive_int("original_max_position_embeddings", s.original_max_position_embeddings);
  c.positive("low_freq_factor", s.llama3.low_freq_factor);
  c.positive("high_freq_factor", s.llama3.high_freq_factor);
  c.float32_positive("low_freq_factor", s.llama3.low_freq_factor);
  c.float32_positive("high_freq_factor", s.llama3.high_freq_factor);
  if (s.llama3.high_freq_factor < s.llama3.low_freq_factor) {
    c.fail("high_freq_factor (" + num(s.llama3.high_freq_factor) +
           ") must be greater than or equal to low_freq_factor (" + num(s.llama3.low_freq_factor) +
           ")");
  }
  // Llama 4 Scout ships low == high: the smooth band shrinks to the one wavelength L, and the
  // smooth term (L/lambda - lf) / (hf - lf) divides by zero (frequencies keep transformers'
  // torch.where result: the band is empty, no NaN).
  if (s.llama3.high_freq_factor == s.llama3.low_freq_factor) {
    c.warn("high_freq_factor (" + num(s.llama3.high_freq_factor) + ") equals low_freq_factor (" +
           num(s.llama3.low_freq_factor) +
           "): there is no smooth band, pairs with a wavelength "
           "above original_max_position_embeddings / low_freq_factor are divided by factor and "
           "the others kept (transformers warns that high_freq_factor should be greater)");
  }
  if (s.max_position_embeddings > 0 &&
      s.original_max_position_embeddings >= s.max_position_embeddings) {
    c.warn("original_max_position_embeddings (" +
           std::to_string(s.original_max_position_embeddings) +
           ") should be less than max_position_embeddings (" +
           std::to_string(s.max_position_embeddings) + ")");
  }
}

void check_longrope(const RopeSpec& s, Checker& c) {
  c.positive_int("original_max_position_embeddings", s.original_max_position_embeddings);
  c.positive("factor", s.factor);
  c.float32_positive("factor", s.factor);
  const auto n = static_cast<std::size_t>(pair_count(s));
  for (auto [field, list] : {std::pair{"short_factor", &s.longrope.short_factor},
                             std::pair{"long_factor", &s.longrope.long_factor}}) {
    if (list->size() != n) {
      // Phi-4-mini (rotary_dim 96 of head_dim 128): lists of head_dim / 2 entries are the MLC and
      // TVM mistake.
      const bool head_sized =
          s.rotary_dim < s.head_dim && list->size() == static_cast<std::size_t>(s.head_dim / 2);
      c.fail(std::string(field) + " has " + std::to_string(list->size()) +
             " entries; expected rotary_dim / 2 = " + std::to_string(n) +
             (head_sized ? " (that is head_dim / 2 = " + std::to_string(s.head_dim / 2) +
                               "; the factors cover the rotated dims only, rotary_dim " +
                               std::to_string(s.rotary_dim) + ")"
                         : ""));
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string name = std::string(field) + "[" + std::to_string(i) + "]";
      c.positive(name, (*list)[i]);
      c.float32_positive(name, (*list)[i]);
    }
  }
  if (s.longrope.attention_factor) {
    c.positive("attention_factor", *s.longrope.attention_factor);
    c.float32_positive("attention_factor", *s.longrope.attention_factor);
  } else if (s.factor > 1.0 && s.original_max_position_embeddings == 1) {
    c.fail(
        "original_max_position_embeddings (1) makes the attention factor sqrt(1 + ln(factor) / "
        "ln(original_max_position_embeddings)) divide by ln(1) = 0; give attention_factor or a "
        "longer context");
  }
  // transformers takes factor = max_position_embeddings / original_max_position_embeddings for
  // Phi-3-style configs; an original context above the extended one makes that a compression.
  if (s.max_position_embeddings > 0 &&
      s.original_max_position_embeddings > s.max_position_embeddings) {
    c.warn("original_max_position_embeddings (" +
           std::to_string(s.original_max_position_embeddings) +
           ") is above max_position_embeddings (" + std::to_string(s.max_position_embeddings) +
           "): the long factors are never reached within the model's context, and factor (" +
           num(s.factor) + ") " +
           (s.factor < 1 ? "below 1 compresses positions rather than extending the context"
                         : "does not describe the extension"));
  } else if (s.factor < 1) {
    c.warn("factor (" + num(s.factor) +
           ") is below 1: positions are compressed rather than the context extended; the attention "
           "factor is then 1");
  }
}

void check_proportional(const RopeSpec& s, Checker& c) {
  const double rho = s.partial_rotary_factor;
  if (!(std::isfinite(rho) && rho > 0 && rho <= 1)) {
    c.fail("partial_rotary_factor (" + num(rho) + ") must be in (0, 1]");
  }
  if (s.rotary_dim != s.head_dim || s.rotary_offset != 0) {
    c.fail("rotary_dim (" + std::to_string(s.rotary_dim) + ") must equal head_dim (" +
           std::to_string(s.head_dim) + "): proportional RoPE fills a head_dim-wide table");
  }
  if (static_cast<std::int64_t>(rho * static_cast<double>(s.head_dim) / 2) < 1) {
    c.fail("partial_rotary_factor (" + num(rho) + ") rotates no pair of head_dim " +
           std::to_string(s.head_dim));
  }
}

// llama.cpp's rope_freqs divide the frequencies of any method that has no divisors of its own.
void check_freq_factors(const RopeSpec& s, Checker& c) {
  if (s.freq_factors.empty()) return;
  if (s.method == Method::kLlama3 || s.method == Method::kLongrope ||
      s.method == Method::kProportional) {
    c.fail("freq_factors (" + std::to_string(s.freq_factors.size()) +
           " divisors, llama.cpp's rope_freqs) cannot be combined with this method, which computes "
           "its own per-pair divisors");
  }
  const auto n = static_cast<std::size_t>(pair_count(s));
  if (s.freq_factors.size() != n) {
    c.fail("freq_factors has " + std::to_string(s.freq_factors.size()) +
           " entries; expected rotary_dim / 2 = " + std::to_string(n));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::string field = "freq_factors[" + std::to_string(i) + "]";
    c.positive(field, s.freq_factors[i]);
    c.float32_positive(field, s.freq_factors[i]);
  }
}

void check_axis_map(const RopeSpec& spec, Checker& c) {
  const AxisMap& m = spec.axis_map;
  if (m.rule == AxisRule::kSingle) {
    if (m.axes != 1 || !m.slot_axis.empty() || !m.sections.empty()) {
      c.fail("axis_map: a single-axis map has 1 axis and no sections, got " +
             std::to_string(m.axes) + " axes and sections " + list_str(m.sections));
    }
    return;
  }
  if (m.axes < 2 || m.axes > 4) {
    c.fail("axis_map: " + std::to_string(m.axes) + " position axes; a multi-axis map has 2 to 4");
  }
  const std::int64_t n = pair_count(spec);
  const std::string field(sections_field(m.rule));
  std::int64_t sum = 0;
  for (const std::int64_t v : m.sections) sum += v;
  // ggml's sections repeat cyclically (or run past the last pair): only the slot count must fit.
  const bool cyclic = m.rule == AxisRule::kGgml;
  if ((!cyclic && sum != n) || static_cast<std::int64_t>(m.slot_axis.size()) != n) {
    c.fail(field + " (" + list_str(m.sections) + ") sums to " + std::to_string(sum) +
           ", but rotary_dim / 2 is " + std::to_string(n) + " (rotary_dim " +
           std::to_string(spec.rotary_dim) +
           "): every frequency slot reads exactly one axis (vLLM's MRotaryEmbedding asserts "
           "sum(mrope_section) == rotary_dim // 2; ggml repeating shorter sections is "
           "llama.cpp's mode, not this spec)");
  }
  for (const std::uint8_t a : m.slot_axis) {
    if (a >= m.axes) {
      c.fail("axis_map: slot axis " + std::to_string(a) + " is not below the axis count (" +
             std::to_string(m.axes) + ")");
    }
  }
  if (m.rule == AxisRule::kVision) {
    // The restarted ladder is defined for plain RoPE only: no vision tower scales it, and a
    // method's per-pair formula (YaRN's ramp, llama3's bands) has no restarted form to follow.
    if (spec.method != Method::kNone) {
      c.fail("rope_type (\"" + method_name(spec) + "\") cannot be used with the vision axis map (" +
             list_str(m.sections) +
             "): its restarted frequency ladder takes rope_type default only");
    }
    if (!spec.freq_factors.empty()) {
      c.fail("freq_factors (" + std::to_string(spec.freq_factors.size()) +
             " entries) cannot be used with the vision axis map: its ladder restarts per "
             "section, so no per-pair divisor is defined");
    }
    if (static_cast<std::int64_t>(m.sections.size()) != m.axes) {
      c.fail("vision sections (" + list_str(m.sections) + ") must have one entry per axis (" +
             std::to_string(m.axes) + ")");
    }
  }
}

}  // namespace

std::string_view method_name(Method method) { return method_info(method).name; }

std::string method_name(const RopeSpec& spec) {
  const MethodInfo& m = method_info(spec);
  if (spec.yarn.ramp == YarnRamp::kPaper && m.ramp != YarnRamp::kPaper &&
      m.reads_param(kParamYarn)) {
    return std::string(m.name) + "-paper";  // dynamic-yarn-paper
  }
  return std::string(m.name);
}

void set_method(RopeSpec& spec, std::string_view name, std::string_view field) {
  spec.yarn.ramp = YarnRamp::kPairIndex;
  if (name == "none") name = "default";
  if (name == "su") name = "longrope";  // Phi-3's first configs, renamed in transformers 4.42
  if (name == "dynamic_yarn") name = "dynamic-yarn";
  YarnRamp ramp = YarnRamp::kPairIndex;
  if (name == "dynamic-yarn-paper") {
    ramp = YarnRamp::kPaper;
    name = "dynamic-yarn";
  }
  for (const MethodInfo& m : methods()) {
    if (name == m.name) {
      spec.method = m.method;
      spec.yarn.ramp = m.ramp == YarnRamp::kPaper ? m.ramp : ramp;
      return;
    }
  }
  std::string list;
  for (const MethodInfo& m : methods()) {
    if (m.ramp != YarnRamp::kPaper) list += std::string(m.name) + ", ";
  }
  throw Error(std::string(field) + " (\"" + std::string(name) + "\") must be one of " + list +
              "yarn-paper (aliases: none, su, dynamic_yarn)");
}

std::string_view layout_name(Layout layout) {
  return layout == Layout::kHalfSplit ? "half-split" : "interleaved";
}

Layout parse_layout(std::string_view name, std::string_view field) {
  if (name == "half-split") return Layout::kHalfSplit;
  if (name == "interleaved") return Layout::kInterleaved;
  throw Error(std::string(field) + " (\"" + std::string(name) +
              "\") must be half-split (pairs (i, i + n)) or interleaved (pairs (2i, 2i + 1))");
}

std::vector<std::string> validate(const RopeSpec& spec) {
  Checker c(spec);
  check_dims(spec, c);
  if (uses_factor(spec.method)) check_factor(spec, c);
  switch (spec.method) {
    case Method::kNone:
    case Method::kLinear:
      break;
    case Method::kNtk:
    case Method::kDynamic:
      if (spec.rotary_dim <= 2) {
        c.fail("rotary_dim (" + std::to_string(spec.rotary_dim) +
               ") must be greater than 2: the NTK base uses the exponent D / (D - 2)");
      }
      if (spec.method == Method::kDynamic) {
        c.positive_int("max_position_embeddings", spec.max_position_embeddings);
      } else if (const double base = detail::ntk_base(spec);
                 !(fits_float32(base) && static_cast<float>(base) > 1.0f)) {
        c.fail("rope_theta (" + num(spec.rope_theta) + ") and factor (" + num(spec.factor) +
               ") give the NTK base rope_theta * factor^(D / (D - 2)) = " + num(base) +
               " (rotary_dim " + std::to_string(spec.rotary_dim) +
               "); it must be greater than 1 and within float32's range (1.2e-38 .. 3.4e38)");
      }
      break;
    case Method::kYarn:
    case Method::kDynamicYarn:
      check_yarn(spec, c);
      break;
    case Method::kLlama3:
      check_llama3(spec, c);
      break;
    case Method::kLongrope:
      check_longrope(spec, c);
      break;
    case Method::kProportional:
      check_proportional(spec, c);
      break;
    case Method::kNtkAlpha: {
      if (spec.rotary_dim <= 2) {
        c.fail("rotary_dim (" + std::to_string(spec.rotary_dim) +
               ") must be greater than 2: the NTK base uses the exponent D / (D - 2)");
      }
      c.positive("alpha", spec.alpha);
      if (const double base = detail::ntk_alpha_base(spec);
          !(fits_float32(base) && static_cast<float>(base) > 1.0f)) {
        c.fail("rope_theta (" + num(spec.rope_theta) + ") and alpha (" + num(spec.alpha) +
               ") give the NTK base rope_theta * alpha^(D / (D - 2)) = " + num(base) +
               " (rotary_dim " + std::to_string(spec.rotary_dim) +
               "); it must be greater than 1 and within float32's range " + kFloat32Range);
      }
      if (spec.alpha < 1) {
        c.warn("alpha (" + num(spec.alpha) +
               ") is below 1: the base shrinks and positions are compressed");
      }
      break;
    }
  }
  check_freq_factors(spec, c);
  check_axis_map(spec, c);
  return c.take_warnings();
}

AxisMap mrope_sections(std::span<const std::int64_t> sections) {
  return contiguous(AxisRule::kContiguous, sections, 3);
}

AxisMap mrope_interleaved(std::span<const std::int64_t> sections) {
  const std::int64_t n = check_sections(AxisRule::kInterleaved, sections, 3);
  AxisMap m = make_map(AxisRule::kInterleaved, sections, 3);
  m.slot_axis.resize(static_cast<std::size_t>(n), 0);
  for (std::int64_t j = 0; j < n; ++j) {
    if (j % 3 == 1 && j < 3 * sections[1]) {
      m.slot_axis[static_cast<std::size_t>(j)] = 1;
    } else if (j % 3 == 2 && j < 3 * sections[2]) {
      m.slot_axis[static_cast<std::size_t>(j)] = 2;
    }
  }
  return m;
}

AxisMap ernie_mrope(std::span<const std::int64_t> sections) {
  const std::int64_t n = check_sections(AxisRule::kErnie, sections, 3);
  const std::int64_t hw = sections[0] + sections[1];
  if (sections[0] != sections[1]) {
    // h and w alternate slot by slot, so they must have as many slots each.
    throw Error("mrope_section (" + list_str(sections) + "): ERNIE-4.5-VL's h and w sections (" +
                std::to_string(sections[0]) + ", " + std::to_string(sections[1]) +
                ") must be equal: their slots alternate h, w, h, w");
  }
  AxisMap m = make_map(AxisRule::kErnie, sections, 3);
  m.slot_axis.resize(static_cast<std::size_t>(n), 0);
  for (std::int64_t j = 0; j < hw; ++j) m.slot_axis[static_cast<std::size_t>(j)] = j % 2 ? 2 : 1;
  return m;
}

AxisMap xdrope_sections(std::span<const std::int64_t> sections) {
  return contiguous(AxisRule::kXdrope, sections, 4);
}

AxisMap vision_sections(std::span<const std::int64_t> sections) {
  if (sections.size() < 2 || sections.size() > 4) {
    throw Error("vision sections (" + list_str(sections) +
                ") must have 2 to 4 entries (one per position axis), got " +
                std::to_string(sections.size()));
  }
  check_sections(AxisRule::kVision, sections, sections.size());
  for (std::size_t k = 0; k < sections.size(); ++k) {
    if (sections[k] == 0) {
      // ggml lets an empty section block the next restart; no model ships one.
      throw Error("vision sections[" + std::to_string(k) + "] (0) must be at least 1: every " +
                  "axis of a vision map reads its own section of slots");
    }
  }
  AxisMap m = contiguous(AxisRule::kVision, sections, static_cast<std::int64_t>(sections.size()));
  return m;
}

std::int64_t section_start(const AxisMap& map, std::int64_t j) {
  if (map.rule != AxisRule::kVision) return 0;
  std::int64_t start = 0;
  for (const std::int64_t s : map.sections) {
    if (j < start + s) return start;
    start += s;
  }
  return start;
}

void set_glm4v_mrope(RopeSpec& spec, std::span<const std::int64_t> sections) {
  if (spec.head_dim <= 0 || spec.head_dim % 4 != 0) {
    throw Error("GLM-4.1V: head_dim (" + std::to_string(spec.head_dim) +
                ") must be a positive multiple of 4: half of it is rotated in pairs");
  }
  spec.axis_map = mrope_sections(sections);
  spec.rotary_dim = spec.head_dim / 2;
  spec.rotary_offset = 0;
  spec.partial_rotary_factor = 0.5;
  spec.layout = Layout::kInterleaved;
}

std::string_view axis_rule_name(AxisRule rule) {
  switch (rule) {
    case AxisRule::kSingle:
      return "single";
    case AxisRule::kContiguous:
      return "contiguous";
    case AxisRule::kInterleaved:
      return "interleaved";
    case AxisRule::kErnie:
      return "ernie";
    case AxisRule::kXdrope:
      return "xdrope";
    case AxisRule::kGgml:
      return "ggml";
    case AxisRule::kVision:
      return "vision";
  }
  return "single";
}

std::string_view axis_name(const AxisMap& map, std::int64_t axis) {
  static constexpr std::string_view kThw[] = {"t", "h", "w", "e"};
  static constexpr std::string_view kPwht[] = {"p", "w", "h", "t"};
  static constexpr std::string_view kSections[] = {"s0", "s1", "s2", "s3"};
  if (axis < 0 || axis > 3) return "?";
  if (map.rule == AxisRule::kVision) return kSections[axis];
  return map.rule == AxisRule::kXdrope ? kPwht[axis] : kThw[axis];
}

ContextLengths context_lengths(const RopeSpec& spec) {
  ContextLengths c;
  const std::int64_t L = spec.original_max_position_embeddings;
  const std::int64_t L_ext = spec.max_position_embeddings;
  c.original = L > 0 ? L : L_ext > 0 ? L_ext : kAssumedContext;
  c.assumed = L <= 0 && L_ext <= 0;
  if (L_ext > 0) {
    c.extended = L_ext;
  } else {
    const double s = spec.method == Method::kNone || !std::isfinite(spec.factor)
                         ? 1.0
                         : std::max(1.0, spec.factor);
    c.extended = static_cast<std::int64_t>(std::llround(s * static_cast<double>(c.original)));
  }
  return c;
}

std::int64_t extended_context(const RopeSpec& spec) { return context_lengths(spec).extended; }

}  // namespace posenc
