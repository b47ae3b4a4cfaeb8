// llama.cpp's rope, from its public sources: ggml/src/ggml-cpu/ops.cpp (rope_yarn,
// rope_yarn_ramp, ggml_rope_cache_init), ggml/src/ggml.c (ggml_rope_yarn_corr_dims),
// src/llama-context.cpp (the host-side yarn attn_factor) and convert_hf_to_gguf.py (rope_freqs).
// Every operation is float32 as there; the library is built with -ffp-contract=off.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "core/ggml_model.h"
#include "core/methods.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "util/format.h"

namespace posenc {
namespace {

using detail::ggml_get_mscale;
using detail::ggml_host_yarn_attn_factor;
using detail::ggml_kernel_mscale;
using detail::num;

constexpr float kPi = std::numbers::pi_v<float>;

// ggml_rope_yarn_corr_dim: n_dims * logf(n_ctx_orig / (n_rot * 2 * pi)) / (2 * logf(base)).
float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * kPi)) / (2.0f * std::log(base));
}

struct CorrDims {
  float lo = 0.0f;
  float hi = 0.0f;
};

CorrDims corr_dims(const GgmlRopeParams& p) {
  if (p.ext_factor == 0.0f) return {};  // unused by rope_yarn; ggml_rope() passes zeros here
  const float start = std::floor(corr_dim(p.n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base));
  const float end = std::ceil(corr_dim(p.n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base));
  return {std::max(0.0f, start), std::min(static_cast<float>(p.n_dims - 1), end)};
}

// rope_yarn_ramp: 1 - clamp((i0/2 - low) / max(0.001, high - low), 0, 1).
float yarn_ramp(float low, float high, int pair) {
  const float y =
      (static_cast<float>(pair) - low) / std::max(static_cast<float>(kYarnRampGuard), high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

// rope_yarn's angle for pair i, given the running theta = p * theta_scale^i.
struct PairAngle {
  float angle;
  float ramp_mix;  // weight of the extrapolated angle (0 without ext_factor)
};

PairAngle pair_angle(const GgmlRopeParams& p, const CorrDims& corr, int i, float theta) {
  const float ff = p.freq_factors.empty() ? 1.0f : p.freq_factors[static_cast<std::size_t>(i)];
  const float theta_extrap = theta / ff;
  const float theta_interp = p.freq_scale * theta_extrap;
  if (p.ext_factor == 0.0f) return {theta_interp, 0.0f};
  const float ramp_mix = yarn_ramp(corr.lo, corr.hi, i) * p.ext_factor;
  return {theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix, ramp_mix};
}

float theta_scale_of(const GgmlRopeParams& p) {
  return std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
}

// convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: rope_freqs for llama3 scaling,
// computed on float32 torch scalars (so `2 * math.pi / freq` is reciprocal-then-multiply).
std::vector<float> llama3_rope_freqs(const RopeSpec& spec) {
  const int n = static_cast<int>(spec.rotary_dim / 2);
  const float base = static_cast<float>(spec.rope_theta);
  const double L = static_cast<double>(spec.original_max_position_embeddings);
  const double lf = spec.llama3.low_freq_factor;
  const double hf = spec.llama3.high_freq_factor;
  const double low_wavelen = L / lf;
  const double high_wavelen = L / hf;
  std::vector<float> factors(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(spec.rotary_dim);
    const float freq =
        1.0f / static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(e)));
    const float wavelen = 1.0f / freq * static_cast<float>(2.0 * std::numbers::pi);
    float f;
    if (wavelen < static_cast<float>(high_wavelen)) {
      f = 1.0f;
    } else if (wavelen > static_cast<float>(low_wavelen)) {
      f = static_cast<float>(spec.factor);
    } else {
      // hf == lf: only wavelen == L lands here; convert_hf_to_gguf.py would divide 0 by 0.
      const float smooth = hf == lf
                               ? 0.0f
                               : (1.0f / wavelen * static_cast<float>(L) - static_cast<float>(lf)) /
                                     static_cast<float>(hf - lf);
      f = 1.0f / ((1.0f - smooth) / static_cast<float>(spec.factor) + smooth);
    }
    factors[static_cast<std::size_t>(i)] = f;
  }
  return factors;
}

int to_int(std::int64_t v, const char* field) {
  if (v > std::numeric_limits<int>::max()) {
    throw Error(std::string("ggml: ") + field + " (" + std::to_string(v) +
                ") does not fit in int32");
  }
  return static_cast<int>(v);
}

std::string sections_str(const std::array<int, 4>& s) {
  return "[" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) +
         ", " + std::to_string(s[3]) + "]";
}

float checked_position(std::int64_t position) {
  if (position < std::numeric_limits<std::int32_t>::min() ||
      position > std::numeric_limits<std::int32_t>::max()) {
    throw Error("ggml: position (" + std::to_string(position) +
                ") does not fit ggml's int32 positions");
  }
  return static_cast<float>(position);
}

// ggml_mrope_cache_init's walk over the pairs: calls at(i, axis, theta) with the running theta of
// the axis pair i reads. Every axis multiplies by theta_scale at every pair; VISION (indep_sects)
// resets an axis at its section start through one if/else-if chain, so a section start equal to
// an earlier one (an empty section before it) is never reset.
template <typename At>
void multi_ladder(const GgmlRopeParams& p, const float base[4], const At& at) {
  const std::array<int, 4>& s = p.sections;
  const std::int64_t sum = std::int64_t{s[0]} + s[1] + s[2] + s[3];
  if (sum <= 0 || sum > std::numeric_limits<int>::max() ||
      *std::min_element(s.begin(), s.end()) < 0) {
    throw Error("ggml_rope_multi: sections " + sections_str(s) +
                " must be non-negative with a positive sum that fits an int");
  }
  const int sect_dims = static_cast<int>(sum);
  const int sec_w = s[0] + s[1];
  const int sec_e = sec_w + s[2];

  const bool vision = p.mode == GgmlMode::kVision;
  const bool imrope = p.mode == GgmlMode::kImrope;
  const float theta_scale = theta_scale_of(p);
  float theta[4] = {base[0], base[1], base[2], base[3]};
  const int pairs = ggml_pair_count(p);
  for (int i = 0; i < pairs; ++i) {
    const int sector = i % sect_dims;
    if (vision) {
      if (sector == 0) {
        theta[0] = base[0];
      } else if (sector == s[0]) {
        theta[1] = base[1];
      } else if (sector == sec_w) {
        theta[2] = base[2];
      } else if (sector == sec_e) {
        theta[3] = base[3];
      }
    }
    int axis = 0;
    if (imrope) {
      if (sector % 3 == 1 && sector < 3 * s[1]) {
        axis = 1;
      } else if (sector % 3 == 2 && sector < 3 * s[2]) {
        axis = 2;
      } else if (sector % 3 == 0 && sector < 3 * s[0]) {
        axis = 0;
      } else {
        axis = 3;  // Qwen3-VL [24, 20, 20, 0]: pairs 61 and 62
      }
    } else if (sector >= s[0] && sector < sec_w) {
      axis = 1;
    } else if (sector >= sec_w && sector < sec_e) {
      axis = 2;
    } else if (sector >= sec_e) {
      axis = 3;
    }
    at(i, axis, theta[axis]);
    for (float& t : theta) t *= theta_scale;
  }
}

}  // namespace

std::string_view ggml_mode_name(GgmlMode mode) {
  switch (mode) {
    case GgmlMode::kNormal:
      return "normal";
    case GgmlMode::kNeox:
      return "neox";
    case GgmlMode::kMrope:
      return "mrope";
    case GgmlMode::kVision:
      return "vision";
    case GgmlMode::kImrope:
      return "imrope";
  }
  return "normal";
}

GgmlMode parse_ggml_mode(std::string_view name, std::string_view field) {
  for (const GgmlMode m : {GgmlMode::kNormal, GgmlMode::kNeox, GgmlMode::kMrope, GgmlMode::kVision,
                           GgmlMode::kImrope}) {
    if (name == ggml_mode_name(m) || name == std::to_string(static_cast<int>(m))) return m;
  }
  throw Error(std::string(field) + " (\"" + std::string(name) +
              "\") is not a ggml rope mode: expected normal (0), neox (2), mrope (8), "
              "vision (24) or imrope (40)");
}

int ggml_pair_count(const GgmlRopeParams& p) {
  return p.mode == GgmlMode::kVision ? p.n_dims : p.n_dims / 2;
}

AxisMap ggml_axis_map(const GgmlRopeParams& p) {
  if (!ggml_is_multi(p.mode)) return {};
  validate(p);
  AxisMap m;
  m.rule = AxisRule::kGgml;
  m.axes = 4;
  m.sections.assign(p.sections.begin(), p.sections.end());
  m.slot_axis.resize(static_cast<std::size_t>(ggml_pair_count(p)));
  const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  multi_ladder(p, one, [&](int i, int axis, float) {
    m.slot_axis[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(axis);
  });
  return m;
}

void validate_head_dim(const GgmlRopeParams& p, std::int64_t head_dim) {
  const std::string mode(ggml_mode_name(p.mode));
  if (p.n_dims > head_dim) {
    throw Error("ggml_rope: n_dims (" + std::to_string(p.n_dims) +
                ") must not exceed the head dim (" + std::to_string(head_dim) + ")");
  }
  if (p.mode == GgmlMode::kVision && 2 * static_cast<std::int64_t>(p.n_dims) != head_dim) {
    throw Error(
        "ggml_rope_multi: mode vision rotates pairs (i, i + n_dims) over the whole head, "
        "so n_dims (" +
        std::to_string(p.n_dims) + ") must be head_dim / 2 (head_dim " + std::to_string(head_dim) +
        ")");
  }
  if (ggml_is_multi(p.mode)) {
    std::int64_t sum = 0;
    for (const int v : p.sections) sum += v;
    if (sum > head_dim) {
      throw Error("ggml_rope_multi: sections " + sections_str(p.sections) + " sum to " +
                  std::to_string(sum) + ", more than the head dim (" + std::to_string(head_dim) +
                  "; ggml asserts sum(sections) <= ne0)");
    }
  }
}

// The same classes of input that validate(const RopeSpec&) refuses, in ggml's terms. ggml itself
// checks none of this: freq_base <= 1 makes theta_scale >= 1 (the angles of high pairs grow, or
// with ext_factor the ramp divides by ln 1 = 0), attn_factor <= 0 zeroes or flips every cos and
// sin, a negative n_ctx_orig makes the log of the correction dims NaN, and beta_fast <= beta_slow
// inverts the ramp. Legal but odd values (freq_scale above 1, ext_factor outside [0, 1], a
// correction range that clamping inverts) are warnings, as in spec mode.
std::vector<std::string> validate(const GgmlRopeParams& p) {
  auto fail = [](const std::string& what) { throw Error("ggml_rope_ext: " + what); };
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& what) { warnings.push_back("ggml_rope_ext: " + what); };
  if (p.n_dims <= 0 || p.n_dims % 2 != 0) {
    fail("n_dims (" + std::to_string(p.n_dims) + ") must be a positive even number");
  }
  if (!(std::isfinite(p.freq_base) && p.freq_base > 1.0f)) {
    fail("freq_base (" + num(p.freq_base) +
         ") must be a finite number greater than 1, as rope_theta must: "
         "theta_scale = freq_base^(-2 / n_dims) has to be below 1");
  }
  if (!(std::isfinite(p.freq_scale) && p.freq_scale >= std::numeric_limits<float>::min())) {
    fail("freq_scale (" + num(p.freq_scale) +
         ") must be a finite number greater than 0 (a normal float32, "
         "at least 1.2e-38: ggml takes ln(1 / freq_scale))");
  }
  if (p.freq_scale > 1.0f) {
    warn("freq_scale (" + num(p.freq_scale) +
         ") is above 1: positions are stretched (a factor of " +
         num(1.0 / static_cast<double>(p.freq_scale)) +
         ", below 1) rather than the context extended");
  }
  if (!(std::isfinite(p.attn_factor) && p.attn_factor > 0.0f)) {
    fail("attn_factor (" + num(p.attn_factor) +
         ") must be a finite number greater than 0: it multiplies cos and sin");
  }
  if (!std::isfinite(p.ext_factor)) fail("ext_factor (" + num(p.ext_factor) + ") must be finite");
  if (p.ext_factor < 0.0f || p.ext_factor > 1.0f) {
    warn("ext_factor (" + num(p.ext_factor) +
         ") is outside [0, 1]: the ramp then overshoots the unscaled frequencies");
  }
  if (p.n_ctx_orig < 0) {
    fail("n_ctx_orig (" + std::to_string(p.n_ctx_orig) +
         ") must not be negative (0: ggml_rope()'s default)");
  }
  if (ggml_is_multi(p.mode)) {
    for (std::size_t k = 0; k < p.sections.size(); ++k) {
      if (p.sections[k] < 0) {
        fail("sections[" + std::to_string(k) + "] (" + std::to_string(p.sections[k]) +
             ") must not be negative (sections " + sections_str(p.sections) + ")");
      }
    }
    // ggml sums the sections in an int (sect_dims); 64 bits here, so that no sum overflows.
    const std::int64_t sum =
        std::int64_t{p.sections[0]} + p.sections[1] + p.sections[2] + p.sections[3];
    if (sum > std::numeric_limits<int>::max()) {
      fail("sections " + sections_str(p.sections) + " sum to " + std::to_string(sum) +
           ", more than ggml's int sect_dims holds (" +
           std::to_string(std::numeric_limits<int>::max()) + ")");
    }
    if (std::int64_t{p.sections[0]} + p.sections[1] + p.sections[2] <= 0) {
      fail("sections " + sections_str(p.sections) + ": mode " +
           std::string(ggml_mode_name(p.mode)) +
           " needs a positive t, h or w section (ggml asserts sections[0..2] are not all 0)");
    }
  } else if (p.sections != std::array<int, 4>{}) {
    fail("sections " + sections_str(p.sections) + " are read only by the multi modes (mrope, " +
         "imrope, vision); mode " + std::string(ggml_mode_name(p.mode)) + " would ignore them");
  }
  if (!p.freq_factors.empty()) {
    const int pairs = ggml_pair_count(p);
    if (p.freq_factors.size() != static_cast<std::size_t>(pairs)) {
      fail("freq_factors has " + std::to_string(p.freq_factors.size()) + " entries; expected " +
           (p.mode == GgmlMode::kVision ? "n_dims (mode vision reads one per pair of the head) = "
                                        : "n_dims / 2 = ") +
           std::to_string(pairs));
    }
    for (std::size_t i = 0; i < p.freq_factors.size(); ++i) {
      if (!(p.freq_factors[i] > 0.0f)) {
        fail("freq_factors[" + std::to_string(i) + "] (" + num(p.freq_factors[i]) +
             ") must be greater than 0");
      }
    }
  }
  if (p.ext_factor != 0.0f) {
    if (p.n_ctx_orig <= 0) {
      fail("n_ctx_orig (" + std::to_string(p.n_ctx_orig) + ") must be positive when ext_factor (" +
           num(p.ext_factor) + ") is not 0");
    }
    if (!(p.beta_fast > 0.0f && p.beta_slow > 0.0f && std::isfinite(p.beta_fast) &&
          std::isfinite(p.beta_slow))) {
      fail("beta_fast (" + num(p.beta_fast) + ") and beta_slow (" + num(p.beta_slow) +
           ") must be finite and greater than 0 when ext_factor is not 0");
    }
    if (!(p.beta_fast > p.beta_slow)) {
      fail("beta_fast (" + num(p.beta_fast) + ") must be greater than beta_slow (" +
           num(p.beta_slow) + ") when ext_factor is not 0");
    }
    const float lo = std::floor(corr_dim(p.n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base));
    const float hi = std::ceil(corr_dim(p.n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base));
    if (std::max(0.0f, lo) > std::min(static_cast<float>(p.n_dims - 1), hi)) {
      warn("beta_fast (" + num(p.beta_fast) + ") and beta_slow (" + num(p.beta_slow) +
           ") give the correction range " + num(lo) + " .. " + num(hi) +
           ", inverted once clamped to 0 .. " + std::to_string(p.n_dims - 1) + " (n_ctx_orig " +
           std::to_string(p.n_ctx_orig) + ", freq_base " + num(p.freq_base) +
           "): there is no ramp");
    }
  }
  return warnings;
}

GgmlRopeParams ggml_params_from_spec(const RopeSpec& spec, std::int64_t seq_len) {
  validate(spec);
  GgmlRopeParams p;
  p.n_dims = to_int(spec.rotary_dim, "rotary_dim");
  p.mode = spec.layout == Layout::kInterleaved ? GgmlMode::kNormal : GgmlMode::kNeox;
  p.freq_base = static_cast<float>(spec.rope_theta);
  switch (spec.method) {
    case Method::kNone:
      break;
    case Method::kLinear:
      p.freq_scale = 1.0f / static_cast<float>(spec.factor);
      break;
    case Method::kNtk:
      p.freq_base = static_cast<float>(detail::ntk_base(spec));
      break;
    case Method::kNtkAlpha:
      p.freq_base = static_cast<float>(detail::ntk_alpha_base(spec));
      break;
    case Method::kDynamic:
      p.freq_base = static_cast<float>(detail::dynamic_ntk_base(spec, seq_len));
      break;
    case Method::kYarn:
    case Method::kDynamicYarn: {
      if (spec.yarn.ramp == YarnRamp::kPaper) {
        throw Error("ggml numerics: " + method_name(spec) +
                    " has no llama.cpp equivalent (ggml ramps over the pair index)");
      }
      const double s =
          spec.method == Method::kYarn ? spec.factor : detail::dynamic_yarn_scale(spec, seq_len);
      const float factor = static_cast<float>(s);
      p.freq_scale = 1.0f / factor;
      p.ext_factor = static_cast<float>(spec.yarn.extrapolation_factor);
      p.n_ctx_orig =
          to_int(spec.original_max_position_embeddings, "original_max_position_embeddings");
      p.beta_fast = static_cast<float>(spec.yarn.beta_fast);
      p.beta_slow = static_cast<float>(spec.yarn.beta_slow);
      // llama-context.cpp: yarn_attn_factor = the attention factor (float32 get_mscale), then
      // divided by 1 + 0.1 ln(factor), which rope_yarn multiplies back.
      const YarnParams& y = spec.yarn;
      float af;
      if (y.attention_factor) {
        af = static_cast<float>(*y.attention_factor);
      } else if (y.mscale && y.mscale_all_dim && *y.mscale != 0.0 && *y.mscale_all_dim != 0.0) {
        af = ggml_get_mscale(factor, static_cast<float>(*y.mscale)) /
             ggml_get_mscale(factor, static_cast<float>(*y.mscale_all_dim));
      } else {
        af = ggml_get_mscale(factor, 1.0f);
      }
      // rope_yarn multiplies 1 + 0.1 ln(1/freq_scale) back only while ext_factor != 0, and
      // llama-context.cpp divides it out under the same condition; with extrapolation_factor 0
      // the attention factor goes to ggml as it is.
      p.attn_factor = p.ext_factor != 0.0f ? ggml_host_yarn_attn_factor(af, factor) : af;
      break;
    }
    case Method::kLlama3:
      p.freq_factors = llama3_rope_freqs(spec);
      break;
    case Method::kLongrope: {
      const bool use_long = seq_len > spec.original_max_position_embeddings;
      const auto& f = use_long ? spec.longrope.long_factor : spec.longrope.short_factor;
      p.freq_factors.assign(f.begin(), f.end());
      const double s = spec.factor;
      p.attn_factor = static_cast<float>(
          spec.longrope.attention_factor
              ? *spec.longrope.attention_factor
              : (s <= 1.0
                     ? 1.0
                     : std::sqrt(1.0 + std::log(s) / std::log(static_cast<double>(
                                                         spec.original_max_position_embeddings)))));
      break;
    }
    case Method::kProportional: {
      // A head_dim-wide rotation whose unrotated pairs divide their angle by +inf (angle 0).
      p.freq_scale = 1.0f / static_cast<float>(spec.factor);
      const auto rotated = static_cast<std::size_t>(detail::proportional_rotated_pairs(spec));
      p.freq_factors.assign(static_cast<std::size_t>(p.n_dims / 2),
                            std::numeric_limits<float>::infinity());
      for (std::size_t i = 0; i < rotated; ++i) p.freq_factors[i] = 1.0f;
      break;
    }
  }
  // rope_freqs (validate() refuses them beside llama3, longrope and proportional, whose own
  // divisors fill freq_factors above).
  if (!spec.freq_factors.empty())
    p.freq_factors.assign(spec.freq_factors.begin(), spec.freq_factors.end());
  return p;
}

namespace detail {

float ggml_get_mscale(float scale, float mscale) {
  return scale <= 1.0f ? 1.0f
                       : static_cast<float>(kYarnMscaleSlope) * mscale * std::log(scale) + 1.0f;
}

float ggml_host_yarn_attn_factor(float attention_factor, float factor) {
  return attention_factor *
         (1.0f / (1.0f + static_cast<float>(kYarnMscaleSlope) * std::log(factor)));
}

float ggml_kernel_mscale(const GgmlRopeParams& p) {
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f)
    mscale *= 1.0f + static_cast<float>(kYarnMscaleSlope) * std::log(1.0f / p.freq_scale);
  return mscale;
}

void ggml_cos_sin(const GgmlRopeParams& p, std::int64_t position, double* cos_out,
                  double* sin_out) {
  if (ggml_is_multi(p.mode)) {
    const std::int64_t all[4] = {position, position, position, position};
    ggml_multi_cos_sin(p, all, cos_out, sin_out);
    return;
  }
  checked_position(position);
  const float theta_scale = theta_scale_of(p);
  const CorrDims corr = corr_dims(p);
  const float mscale = ggml_kernel_mscale(p);
  float theta = static_cast<float>(position);
  for (int i = 0; i < p.n_dims / 2; ++i) {
    const float angle = pair_angle(p, corr, i, theta).angle;
    cos_out[i] = std::cos(angle) * mscale;
    sin_out[i] = std::sin(angle) * mscale;
    theta *= theta_scale;
  }
}

void ggml_multi_cos_sin(const GgmlRopeParams& p, std::span<const std::int64_t> positions,
                        double* cos_out, double* sin_out) {
  if (!ggml_is_multi(p.mode)) {
    throw Error("ggml: mode " + std::string(ggml_mode_name(p.mode)) +
                " takes one position per token, not ggml_rope_multi's four");
  }
  if (positions.size() != 4) {
    throw Error("ggml_rope_multi: a token has 4 positions (t, h, w, e), got " +
                std::to_string(positions.size()));
  }
  const float base[4] = {checked_position(positions[0]), checked_position(positions[1]),
                         checked_position(positions[2]), checked_position(positions[3])};
  const CorrDims corr = corr_dims(p);
  const float mscale = ggml_kernel_mscale(p);
  multi_ladder(p, base, [&](int i, int, float theta) {
    const float angle = pair_angle(p, corr, i, theta).angle;
    cos_out[i] = std::cos(angle) * mscale;
    sin_out[i] = std::sin(angle) * mscale;
  });
}

}  // namespace detail

Frequencies frequencies_from_ggml(const GgmlRopeParams& p) {
  validate(p);
  Frequencies f;
  f.numerics = Numerics::kGgml;
  f.ggml = p;
  const auto n = static_cast<std::size_t>(ggml_pair_count(p));
  f.spec.head_dim = 2 * static_cast<std::int64_t>(n);
  f.spec.rotary_dim = f.spec.head_dim;
  f.spec.layout = p.mode == GgmlMode::kNormal ? Layout::kInterleaved : Layout::kHalfSplit;
  f.spec.axis_map = ggml_axis_map(p);
  f.spec.rope_theta = p.freq_base;
  f.spec.factor = 1.0 / static_cast<double>(p.freq_scale);
  f.spec.original_max_position_embeddings = p.n_ctx_orig;
  f.spec.method = p.ext_factor != 0.0f ? Method::kYarn
                                       : (p.freq_scale != 1.0f ? Method::kLinear : Method::kNone);
  f.scale = f.spec.factor;
  f.base = p.freq_base;

  // The angle ggml reaches at position 1 is the per-token frequency of each pair.
  f.inv_freq.resize(n);
  f.unscaled_inv_freq.resize(n);
  f.interpolation_weight.assign(n, 0.0);
  double largest_factor = 1.0;  // for the log-space weight of divisor-style rope_freqs
  for (float x : p.freq_factors) {
    if (std::isfinite(x)) largest_factor = std::max(largest_factor, static_cast<double>(x));
  }
  // theta of each pair at position 1: the running product, restarted per section for VISION.
  std::vector<float> thetas(n);
  if (ggml_is_multi(p.mode)) {
    const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    multi_ladder(p, one, [&](int i, int, float t) { thetas[static_cast<std::size_t>(i)] = t; });
  } else {
    const float theta_scale = theta_scale_of(p);
    float theta = 1.0f;
    for (float& t : thetas) {
      t = theta;
      theta *= theta_scale;
    }
  }
  const CorrDims corr = corr_dims(p);
  for (std::size_t i = 0; i < n; ++i) {
    const float theta = thetas[i];
    const PairAngle a = pair_angle(p, corr, static_cast<int>(i), theta);
    f.inv_freq[i] = a.angle;
    f.unscaled_inv_freq[i] = theta;
    double weight = p.ext_factor != 0.0f ? 1.0 - static_cast<double>(a.ramp_mix)
                                         : (p.freq_scale != 1.0f ? 1.0 : 0.0);
    const float ff = p.freq_factors.empty() ? 1.0f : p.freq_factors[i];
    if (p.ext_factor == 0.0f && p.freq_scale == 1.0f && std::isfinite(ff) && largest_factor > 1.0) {
      weight = std::log(static_cast<double>(ff)) / std::log(largest_factor);
    }
    f.interpolation_weight[i] = weight;
  }
  if (p.ext_factor != 0.0f) {
    f.correction_low = corr.lo;
    f.correction_high = corr.hi;
  }
  f.attention_factor = ggml_kernel_mscale(p);
  return f;
}

}  // namespace posenc
