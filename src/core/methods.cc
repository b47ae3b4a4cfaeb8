// The scaling methods of docs/design.md §3, one function each, registered by rope_type name.
//
// Each function is written once over an arithmetic type T and mirrors Hugging Face
// transformers' modeling_rope_utils.py operation by operation:
//   - a Python scalar meeting a float32 tensor is first rounded to T: T(x);
//   - `base ** t` is a float32 pow with the base rounded to float32, over the whole exponent
//     tensor: torch's kernel picks Sleef or libm powf by the entry's index within the tensor
//     (rpow below; torch_float32.h);
//   - `1.0 / t` is a reciprocal; `scalar / tensor` is torch's `t.reciprocal() * scalar`, two
//     roundings (Tensor.__rtruediv__), which matters for llama3's 2*pi / inv_freq;
//   - Python-side arithmetic (correction range, attention factor) stays in double.
// With T = double the same lines are the float64 formulas of the precise convention.
// The library is built with -ffp-contract=off so that no multiply-add is fused.
#include "core/methods.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "core/torch_float32.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"

namespace posenc::detail {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

// `base ** exponents` for one whole exponent tensor: in float32 what torch computes (which
// function depends on the index and the tensor's length, so never split the vector); in double
// std::pow.
template <typename T>
std::vector<T> rpow(T base, const std::vector<T>& exponents) {
  if constexpr (std::is_same_v<T, float>) {
    return torch_pow(base, exponents);
  } else {
    std::vector<T> p(exponents.size());
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = std::pow(base, exponents[i]);
    return p;
  }
}

template <typename T>
std::vector<double> widen(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

// torch.arange(0, D, 2, dtype=int64).float() / D: exponents 2i / D for `count` pairs.
template <typename T>
std::vector<T> exponents(std::int64_t count, std::int64_t denominator) {
  std::vector<T> e(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    e[static_cast<std::size_t>(i)] = static_cast<T>(2 * i) / static_cast<T>(denominator);
  }
  return e;
}

// 1 / base^(2i/D): transformers' `1.0 / (base ** (arange(0, dim, 2) / dim))`.
template <typename T>
std::vector<T> plain_inv_freq(double base, std::int64_t rotary_dim) {
  std::vector<T> inv = rpow(static_cast<T>(base), exponents<T>(rotary_dim / 2, rotary_dim));
  for (T& x : inv) x = T(1) / x;
  return inv;
}

// ln(unscaled / scaled) / ln(s): how far a pair moved towards w / s, in log space.
std::vector<double> log_weights(const std::vector<double>& unscaled,
                                const std::vector<double>& scaled, double s) {
  std::vector<double> w(scaled.size(), 0.0);
  if (!(s > 1.0)) return w;  // no scaling: nothing moved
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (scaled[i] != unscaled[i] && scaled[i] > 0)
      w[i] = std::log(unscaled[i] / scaled[i]) / std::log(s);
  }
  return w;
}

// NTK bases b' = b s^(D/(D-2)) (any s != 1) move pair i by exactly (2i/D)(D/(D-2)) = 2i/(D-2) of
// the way to w / s in log space; computed directly rather than through rounded logarithms.
std::vector<double> ntk_weights(std::int64_t rotary_dim) {
  std::vector<double> w(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t i = 0; i < w.size(); ++i) {
    w[i] = 2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim - 2);
  }
  return w;
}

template <typename T>
MethodResult finish(std::vector<T> inv, std::vector<T> unscaled, std::vector<double> weight) {
  MethodResult r;
  r.inv_freq = widen(inv);
  r.unscaled_inv_freq = widen(unscaled);
  r.interpolation_weight = std::move(weight);
  return r;
}

template <typename T>
MethodResult none(const RopeSpec& spec, std::int64_t) {
  auto inv = plain_inv_freq<T>(spec.rope_theta, spec.rotary_dim);
  auto r = finish(inv, inv, std::vector<double>(inv.size(), 0.0));
  r.base = spec.rope_theta;
  return r;
}

// Position Interpolation (Chen et al. 2023): w / s; transformers `inv_freq /= factor`.
template <typename T>
MethodResult linear(const RopeSpec& spec, std::int64_t) {
  const auto unscaled = plain_inv_freq<T>(spec.rope_theta, spec.rotary_dim);
  auto inv = unscaled;
  for (T& x : inv) x /= static_cast<T>(spec.factor);
  auto r = finish(inv, unscaled, std::vector<double>(inv.size(), 1.0));
  r.scale = spec.factor;
  r.base = spec.rope_theta;
  return r;
}

// Static NTK-aware scaling (bloc97, 2023): new base b * s^(D/(D-2)), so that the lowest
// frequency is divided by exactly s while the highest is kept.
// Plain RoPE over a new base, the static NTK shape shared by ntk and ntk-alpha: `scale` is s or
// alpha (1 leaves every pair kept).
template <typename T>
MethodResult rebased(const RopeSpec& spec, double scale, double base) {
  const auto unscaled = plain_inv_freq<T>(spec.rope_theta, spec.rotary_dim);
  const auto inv = plain_inv_freq<T>(base, spec.rotary_dim);
  auto r =
      finish(inv, unscaled,
             scale != 1.0 ? ntk_weights(spec.rotary_dim) : std::vector<double>(inv.size(), 0.0));
  r.scale = scale;
  r.base = base;
  return r;
}

template <typename T>
MethodResult ntk(const RopeSpec& spec, std::int64_t) {
  return rebased<T>(spec, spec.factor, ntk_base(spec));
}

// Dynamic NTK (transformers `_compute_dynamic_ntk_parameters` as called from the forward pass):
// above L' the base is recomputed from the int64 sequence length with float32 tensor arithmetic;
// at or below L' (and at initialisation) the plain frequencies are used.
template <typename T>
MethodResult dynamic(const RopeSpec& spec, std::int64_t seq_len) {
  const auto unscaled = plain_inv_freq<T>(spec.rope_theta, spec.rotary_dim);
  if (seq_len <= spec.max_position_embeddings) {
    auto r = finish(unscaled, unscaled, std::vector<double>(unscaled.size(), 0.0));
    r.base = spec.rope_theta;
    return r;
  }
  const T d = static_cast<T>(spec.rotary_dim);
  const T s = static_cast<T>(spec.factor);
  const T growth = s * static_cast<T>(seq_len) / static_cast<T>(spec.max_position_embeddings) -
                   static_cast<T>(spec.factor - 1.0);
  // `tensor ** python_float` on a 0-dim float32 tensor is std::pow(float, double) in torch
  // (pow_tensor_scalar): the exponent stays a double, and the double result is rounded once.
  const double exponent = static_cast<double>(d) / (static_cast<double>(d) - 2.0);
  const T base = static_cast<T>(spec.rope_theta) *
                 static_cast<T>(std::pow(static_cast<double>(growth), exponent));
  std::vector<T> inv = rpow(base, exponents<T>(spec.rotary_dim / 2, spec.rotary_dim));
  for (T& x : inv) x = T(1) / x;
  // The scale dynamic NTK reaches at this length: s * seq_len / L' - (s - 1).
  auto r =
      finish(inv, unscaled,
             growth != T(1) ? ntk_weights(spec.rotary_dim) : std::vector<double>(inv.size(), 0.0));
  r.scale = static_cast<double>(growth);
  r.base = static_cast<double>(base);
  return r;
}

// YaRN (Peng et al. 2023, §3.2-3.4) as transformers `_compute_yarn_parameters` computes it, with
// the paper's ramp over r = L / lambda (eq. 17-18) as an option.
template <typename T>
MethodResult yarn_at_scale(const RopeSpec& spec, double scale) {
  const YarnParams& y = spec.yarn;
  const std::int64_t n = spec.rotary_dim / 2;
  const double dim = static_cast<double>(spec.rotary_dim);
  const double L = static_cast<double>(spec.original_max_position_embeddings);

  const std::vector<T> pos_freqs =
      rpow(static_cast<T>(spec.rope_theta), exponents<T>(n, spec.rotary_dim));
  std::vector<T> extrap(pos_freqs.size());
  std::vector<T> interp(extrap.size());
  for (std::size_t i = 0; i < extrap.size(); ++i) {
    const T pos_freq = pos_freqs[i];
    extrap[i] = T(1) / pos_freq;
    interp[i] = T(1) / (static_cast<T>(scale) * pos_freq);
  }

  MethodResult r;
  // e_i: weight of the extrapolated (unscaled) frequency.
  std::vector<T> e(extrap.size());
  if (y.ramp == YarnRamp::kPairIndex) {
    // find_correction_dim: the pair index at which a frequency turns `rotations` times over L.
    auto correction_dim = [&](double rotations) {
      return dim * std::log(L / (rotations * kTwoPi)) / (2.0 * std::log(spec.rope_theta));
    };
    double lo = correction_dim(y.beta_fast);
    double hi = correction_dim(y.beta_slow);
    if (y.truncate) {
      lo = std::floor(lo);
      hi = std::ceil(hi);
    }
    lo = std::max(lo, 0.0);
    hi = std::min(hi, dim - 1.0);
    r.correction_low = lo;
    r.correction_high = hi;
    if (lo == hi) hi += kYarnRampGuard;  // linear_ramp_factor's "prevent singularity"
    const T t_lo = static_cast<T>(lo);
    const T t_span = static_cast<T>(hi - lo);
    for (std::size_t i = 0; i < e.size(); ++i) {
      const T ramp = std::clamp((static_cast<T>(i) - t_lo) / t_span, T(0), T(1));
      e[i] = T(1) - ramp;
    }
  } else {
    // Paper: gamma(r) = 0 below alpha = beta_slow rotations, 1 above beta = beta_fast.
    const T t_L = static_cast<T>(L);
    const T t_two_pi = static_cast<T>(kTwoPi);
    const T t_slow = static_cast<T>(y.beta_slow);
    const T t_span = static_cast<T>(y.beta_fast - y.beta_slow);
    for (std::size_t i = 0; i < e.size(); ++i) {
      const T rotations = t_L * extrap[i] / t_two_pi;  // r = L / lambda, lambda = 2 pi / w
      e[i] = std::clamp((rotations - t_slow) / t_span, T(0), T(1));
    }
  }
  const T ext = static_cast<T>(y.extrapolation_factor);
  std::vector<T> inv(extrap.size());
  r.interpolation_weight.resize(extrap.size());
  for (std::size_t i = 0; i < inv.size(); ++i) {
    if (y.extrapolation_factor != 1.0) e[i] = e[i] * ext;
    const T keep = T(1) - e[i];
    inv[i] = interp[i] * keep + extrap[i] * e[i];
    r.interpolation_weight[i] = static_cast<double>(keep);
  }
  r.inv_freq = widen(inv);
  r.unscaled_inv_freq = widen(extrap);
  r.attention_factor = yarn_attention_factor(y, scale);
  if (y.mscale_all_dim && *y.mscale_all_dim != 0.0) {
    // DeepSeek-V2/V3 attention: softmax_scale *= yarn_get_mscale(s, mscale_all_dim)^2.
    const double m = yarn_mscale(scale, *y.mscale_all_dim);
    r.softmax_scale_multiplier = m * m;
  }
  r.scale = scale;
  r.base = spec.rope_theta;
  return r;
}

template <typename T>
MethodResult yarn(const RopeSpec& spec, std::int64_t) {
  return yarn_at_scale<T>(spec, spec.factor);
}

template <typename T>
MethodResult dynamic_yarn(const RopeSpec& spec, std::int64_t seq_len) {
  return yarn_at_scale<T>(spec, dynamic_yarn_scale(spec, seq_len));
}

// Llama 3.1 (Meta's apply_scaling; transformers `_compute_llama3_parameters`): keep pairs whose
// wavelength is below L / high_freq_factor, divide those above L / low_freq_factor by s, and
// blend in between with gamma = (L / lambda - lf) / (hf - lf).
template <typename T>
MethodResult llama3(const RopeSpec& spec, std::int64_t) {
  const double L = static_cast<double>(spec.original_max_position_embeddings);
  const double lf = spec.llama3.low_freq_factor;
  const double hf = spec.llama3.high_freq_factor;
  const T low_freq_wavelen = static_cast<T>(L / lf);
  const T high_freq_wavelen = static_cast<T>(L / hf);
  const T s = static_cast<T>(spec.factor);

  const auto unscaled = plain_inv_freq<T>(spec.rope_theta, spec.rotary_dim);
  std::vector<T> inv(unscaled.size());
  std::vector<double> weight(unscaled.size());
  for (std::size_t i = 0; i < inv.size(); ++i) {
    const T w = unscaled[i];
    const T wavelen = T(1) / w * static_cast<T>(kTwoPi);  // 2*math.pi / inv_freq
    const T banded = wavelen > low_freq_wavelen ? w / s : w;
    // hf == lf (Llama 4 Scout): the band holds only wavelen == L, where transformers' 0/0 would
    // be NaN; vLLM's guard (smooth = 0) is taken there, and every other pair is banded anyway.
    const T smooth = hf == lf ? T(0)
                              : (T(1) / wavelen * static_cast<T>(L) - static_cast<T>(lf)) /
                                    static_cast<T>(hf - lf);
    const T smoothed = (T(1) - smooth) * banded / s + smooth * banded;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    inv[i] = medium ? smoothed : banded;
    weight[i] =
        medium ? static_cast<double>(T(1) - smooth) : (wavelen > low_freq_wavelen ? 1.0 : 0.0);
  }
  auto r = finish(inv, unscaled, std::move(weight));
  r.scale = spec.factor;
  r.base = spec.rope_theta;
  return r;
}

// LongRoPE (Ding et al. 2024; transformers `_compute_longrope_parameters`): w_i / f_i with the
// long factors once the sequence is longer than L, and attention factor sqrt(1 + ln s / ln L).
template <typename T>
MethodResult longrope(const RopeSpec& spec, std::int64_t seq_len) {
  const double L = static_cast<double>(spec.original_max_position_embeddings);
  const bool use_long = seq_len > spec.original_max_position_embeddings;
  const auto& factors = use_long ? spec.longrope.long_factor : spec.longrope.short_factor;
  const auto unscaled = plain_inv_freq<T>(spec.rope_theta, spec.rotary_dim);
  const std::vector<T> pos_freqs =
      rpow(static_cast<T>(spec.rope_theta), exponents<T>(spec.rotary_dim / 2, spec.rotary_dim));
  std::vector<T> inv(pos_freqs.size());
  for (std::size_t i = 0; i < inv.size(); ++i) {
    inv[i] = T(1) / (static_cast<T>(factors[i]) * pos_freqs[i]);
  }
  auto r = finish(inv, unscaled, {});
  const double s = spec.factor;
  r.interpolation_weight = log_weights(r.unscaled_inv_freq, r.inv_freq, s);
  if (spec.longrope.attention_factor) {
    r.attention_factor = *spec.longrope.attention_factor;
  } else {
    r.attention_factor = s <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s) / std::log(L));
  }
  r.uses_long_factors = use_long;
  r.scale = s;
  r.base = spec.rope_theta;
  return r;
}

// Proportional RoPE (transformers `_compute_proportional_rope_parameters`): the first
// int(rho * d_h // 2) slots of a d_h-wide table get b^(-2i/d_h), the rest 0; all divided by s.
template <typename T>
MethodResult proportional(const RopeSpec& spec, std::int64_t) {
  const std::int64_t slots = spec.head_dim / 2;
  const std::int64_t rotated = proportional_rotated_pairs(spec);
  std::vector<T> unscaled(static_cast<std::size_t>(slots), T(0));
  const auto e = exponents<T>(rotated, spec.head_dim);
  const std::vector<T> pos_freqs = rpow(static_cast<T>(spec.rope_theta), e);
  for (std::size_t i = 0; i < e.size(); ++i) unscaled[i] = T(1) / pos_freqs[i];
  auto inv = unscaled;
  for (T& x : inv) x /= static_cast<T>(spec.factor);
  std::vector<double> weight(inv.size(), 0.0);
  for (std::size_t i = 0; i < e.size(); ++i) weight[i] = spec.factor == 1.0 ? 0.0 : 1.0;
  auto r = finish(inv, unscaled, std::move(weight));
  r.scale = spec.factor;
  r.base = spec.rope_theta;
  return r;
}

// Hunyuan's NTK alpha (transformers HunYuanDenseV1RotaryEmbedding, vLLM
// DynamicNTKAlphaRotaryEmbedding): the base b * alpha^(D/(D-2)) in Python floats, then plain RoPE
// over it. Static NTK with s = alpha, named by its own key.
template <typename T>
MethodResult ntk_alpha(const RopeSpec& spec, std::int64_t) {
  return rebased<T>(spec, spec.alpha, ntk_alpha_base(spec));
}

template <MethodResult (*F32)(const RopeSpec&, std::int64_t),
          MethodResult (*F64)(const RopeSpec&, std::int64_t)>
MethodResult dispatch(const RopeSpec& spec, std::int64_t seq_len, bool float32) {
  return float32 ? F32(spec, seq_len) : F64(spec, seq_len);
}

#define POSENC_FN(fn) &dispatch<&fn<float>, &fn<double>>

struct Entry {
  MethodInfo info;
  MethodFn fn;
};

constexpr unsigned kYarnReads = kParamOriginalContext | kParamYarn | kParamAttentionFactor;
constexpr EngineSupport kYes{};

// The method registry, one row per method: name, method, ramp, parameters read, factor required
// for an extension, factor = extension ratio, depends on seq_len, attention factor rule, then
// transformers, llama.cpp and vLLM support (the reasons are what src/analysis/engines/ reports;
// their sources are docs/engines.md's). Adding a method: one row here and one function above.
constexpr Entry kMethods[] = {
    {{"default", Method::kNone, YarnRamp::kPairIndex, 0, false, false, false, AttentionRule::kOne,
      kYes, kYes, kYes},
     POSENC_FN(none)},
    {{"linear", Method::kLinear, YarnRamp::kPairIndex, kParamFactor, true, true, false,
      AttentionRule::kOne, kYes, kYes, kYes},
     POSENC_FN(linear)},
    {{"ntk",
      Method::kNtk,
      YarnRamp::kPairIndex,
      kParamFactor,
      true,
      true,
      false,
      AttentionRule::kOne,
      {false, "transformers has no rope_type \"ntk\" (ROPE_INIT_FUNCTIONS)"},
      kYes,
      kYes},
     POSENC_FN(ntk)},
    {{"dynamic", Method::kDynamic, YarnRamp::kPairIndex, kParamFactor | kParamMaxContext, true,
      false, true, AttentionRule::kOne, kYes, kYes, kYes},
     POSENC_FN(dynamic)},
    {{"yarn", Method::kYarn, YarnRamp::kPairIndex, kParamFactor | kYarnReads | kParamYarnDims, true,
      true, false, AttentionRule::kYarn, kYes, kYes, kYes},
     POSENC_FN(yarn)},
    {{"yarn-paper",
      Method::kYarn,
      YarnRamp::kPaper,
      kParamFactor | kYarnReads,
      true,
      true,
      false,
      AttentionRule::kYarn,
      {false, "transformers ramps over the pair index, not the paper's r = L/lambda"},
      {false, "ggml ramps over the pair index (rope_yarn_ramp), not the paper's r = L/lambda"},
      {false,
       "vLLM ramps over the pair index (yarn_linear_ramp_mask), not the paper's r = L/lambda"}},
     POSENC_FN(yarn)},
    // No factor: s = max(1, seq_len / L).
    {{"dynamic-yarn",
      Method::kDynamicYarn,
      YarnRamp::kPairIndex,
      kYarnReads | kParamYarnDims,
      false,
      false,
      true,
      AttentionRule::kYarn,
      {false, "transformers has no dynamic YaRN rope_type (ROPE_INIT_FUNCTIONS)"},
      {false,
       "llama.cpp has no dynamic YaRN: the converter writes no scaling and the model runs plain "
       "RoPE"},
      {false, "vLLM's get_rope has no dynamic YaRN (\"Unknown RoPE scaling type\")"}},
     POSENC_FN(dynamic_yarn)},
    {{"llama3", Method::kLlama3, YarnRamp::kPairIndex,
      kParamFactor | kParamOriginalContext | kParamLlama3, true, false, false, AttentionRule::kOne,
      kYes, kYes, kYes},
     POSENC_FN(llama3)},
    {{"longrope", Method::kLongrope, YarnRamp::kPairIndex,
      kParamFactor | kParamOriginalContext | kParamLongrope | kParamAttentionFactor, true, true,
      true, AttentionRule::kLongrope, kYes, kYes, kYes},
     POSENC_FN(longrope)},
    // The factor is optional in its config (1 when absent); not a context extension.
    {{"proportional",
      Method::kProportional,
      YarnRamp::kPairIndex,
      kParamFactor | kParamProportion,
      false,
      true,
      false,
      AttentionRule::kOne,
      kYes,
      kYes,
      {false, "posenc has no record of how vLLM runs proportional RoPE (not modelled)"}},
     POSENC_FN(proportional)},
    // Hunyuan's rope_scaling {"type": "dynamic", "alpha": A}. llama.cpp's converter folds alpha
    // into rope.freq_base (convert_hf_to_gguf.py HunYuan: base * alpha ** (dim / (dim - 2))); vLLM:
    // DynamicNTKAlphaRotaryEmbedding (rotary_embedding/dynamic_ntk_alpha_rope.py).
    {{"ntk-alpha", Method::kNtkAlpha, YarnRamp::kPairIndex, kParamAlpha, false, false, false,
      AttentionRule::kOne, kYes, kYes, kYes},
     POSENC_FN(ntk_alpha)},
};

#undef POSENC_FN

const Entry& entry(Method method, YarnRamp ramp) {
  for (const Entry& e : kMethods) {
    if (e.info.method == method && e.info.ramp == ramp) return e;
  }
  for (const Entry& e : kMethods) {
    if (e.info.method == method) return e;
  }
  throw Error("no scaling method is registered for enumerator " +
              std::to_string(static_cast<int>(method)));
}

}  // namespace

namespace {

// Vision towers: `1.0 / (theta ** (arange(0, dim, 2).float() / dim))` over one exponent tensor
// of max(sections) entries (dim = n; head_dim / 4 entries in Qwen2-VL's VisionRotaryEmbedding
// and Llama4VisionRotaryEmbedding), and slot j reads entry j - start(j).
template <typename T>
MethodResult vision(const RopeSpec& spec) {
  const AxisMap& map = spec.axis_map;
  const std::int64_t n = spec.rotary_dim / 2;
  std::int64_t longest = 0;
  for (const std::int64_t s : map.sections) longest = std::max(longest, s);
  std::vector<T> ladder = rpow(static_cast<T>(spec.rope_theta), exponents<T>(longest, n));
  for (T& x : ladder) x = T(1) / x;
  std::vector<T> inv(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j)
    inv[static_cast<std::size_t>(j)] = ladder[static_cast<std::size_t>(j - section_start(map, j))];
  MethodResult r = finish(inv, inv, std::vector<double>(inv.size(), 0.0));
  r.base = spec.rope_theta;
  return r;
}

}  // namespace

MethodResult vision_frequencies(const RopeSpec& spec, bool float32) {
  return float32 ? vision<float>(spec) : vision<double>(spec);
}

MethodFn find_method(const RopeSpec& spec) { return entry(spec.method, spec.yarn.ramp).fn; }

double yarn_attention_factor(const YarnParams& yarn, double scale) {
  if (yarn.attention_factor) return *yarn.attention_factor;
  // transformers: `if mscale and mscale_all_dim` (both set and non-zero).
  if (yarn.mscale && yarn.mscale_all_dim && *yarn.mscale != 0.0 && *yarn.mscale_all_dim != 0.0) {
    return yarn_mscale(scale, *yarn.mscale) / yarn_mscale(scale, *yarn.mscale_all_dim);
  }
  return yarn_mscale(scale, 1.0);
}

double dynamic_yarn_scale(const RopeSpec& spec, std::int64_t seq_len) {
  if (seq_len <= 0) return 1.0;
  return std::max(1.0, static_cast<double>(seq_len) /
                           static_cast<double>(spec.original_max_position_embeddings));
}

double dynamic_ntk_base(const RopeSpec& spec, std::int64_t seq_len) {
  const double l = static_cast<double>(std::max(seq_len, spec.max_position_embeddings));
  const double d = static_cast<double>(spec.rotary_dim);
  const double growth =
      spec.factor * l / static_cast<double>(spec.max_position_embeddings) - (spec.factor - 1.0);
  return spec.rope_theta * std::pow(growth, d / (d - 2.0));
}

double ntk_alpha_base(const RopeSpec& spec) {
  const double d = static_cast<double>(spec.rotary_dim);
  return spec.rope_theta * std::pow(spec.alpha, d / (d - 2.0));
}

double ntk_base(const RopeSpec& spec) {
  const double d = static_cast<double>(spec.rotary_dim);
  return spec.rope_theta * std::pow(spec.factor, d / (d - 2.0));
}

std::int64_t proportional_rotated_pairs(const RopeSpec& spec) {
  // Python: int(rope_proportion * head_dim // 2), a float floor division.
  return static_cast<std::int64_t>(
      std::floor(spec.partial_rotary_factor * static_cast<double>(spec.head_dim) / 2.0));
}

}  // namespace posenc::detail

namespace posenc {

std::span<const MethodInfo> methods() {
  static const auto kInfos = [] {
    std::vector<MethodInfo> v;
    for (const detail::Entry& e : detail::kMethods) v.push_back(e.info);
    return v;
  }();
  return kInfos;
}

const MethodInfo& method_info(Method method) {
  return detail::entry(method, YarnRamp::kPairIndex).info;
}

const MethodInfo& method_info(const RopeSpec& spec) {
  return detail::entry(spec.method, spec.yarn.ramp).info;
}

bool method_reads(const RopeSpec& spec, MethodParam param) {
  if (param == kParamYarnDims && spec.yarn.ramp == YarnRamp::kPaper) return false;
  return method_info(spec).reads_param(param);
}

namespace {

template <typename Pred>
std::string names_where(Pred pred) {
  std::vector<std::string_view> names;
  for (const MethodInfo& m : methods()) {
    if (pred(m)) names.push_back(m.name);
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
  }
  return out;
}

}  // namespace

std::string methods_reading(MethodParam param) {
  return names_where([param](const MethodInfo& m) { return m.reads_param(param); });
}

std::string methods_with(bool MethodInfo::*trait) {
  return names_where([trait](const MethodInfo& m) { return m.*trait; });
}

bool depends_on_length(const RopeSpec& spec) { return method_info(spec).depends_on_seq_len; }

double yarn_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return kYarnMscaleSlope * mscale * std::log(scale) + 1.0;
}

}  // namespace posenc
