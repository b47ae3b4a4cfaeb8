// tests/support/spec_grid.h: the grid of RopeSpecs the reference tests sweep.
//
// Real model shapes and their neighbours: head dims 64 (DeepSeek's rope part, gpt-oss), 96
// (Phi-3), 128 (Llama), 256 (Gemma); full and half rotary dims; bases 1e4 (Llama 2), 5e5
// (Llama 3), 1e6 (Qwen, Gemma); factors 1 (identity), 2, 4.5 (not a power of two), 8 (Llama
// 3.1), 16 (YaRN Llama 2), 40 (DeepSeek-V3); every method and the YaRN options that change the
// numbers. Each entry also lists the sequence lengths worth asking for: 0 (initialisation), L,
// 2L and 10L.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "posenc/core/spec.h"
#include "support/spec_builder.h"

namespace posenc_test {

struct GridCase {
  posenc::RopeSpec spec;
  std::vector<std::int64_t> seq_lens;
};

inline constexpr std::int64_t kGridOriginal = 4096;  // L (and L' for dynamic NTK)

inline posenc::RopeSpec BaseSpec(posenc::Method method, std::int64_t head_dim,
                                 std::int64_t rotary_dim, double theta, double factor) {
  posenc::RopeSpec spec = posenc::testing::make_spec(method, head_dim, theta, factor);
  spec.rotary_dim = rotary_dim;
  return spec;
}

// Non-decreasing LongRoPE factor lists of n entries (Phi-3-like shapes: short near 1, long
// rising to about the scale factor and beyond).
inline std::vector<double> ShortFactors(std::int64_t n) {
  std::vector<double> f(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) f[i] = 1.0 + 0.05 * static_cast<double>(i) / n;
  return f;
}

inline std::vector<double> LongFactors(std::int64_t n, double factor) {
  std::vector<double> f(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(n > 1 ? n - 1 : 1);
    f[i] = 1.0 + (1.5 * factor - 1.0) * t * t;
  }
  return f;
}

// The YaRN option sets swept. `hf` says whether Hugging Face has the option (the paper ramp
// and extrapolation_factor are not in transformers, so kHf is not asked about them).
struct YarnVariant {
  posenc::YarnParams params;
  bool hf = true;
};

inline std::vector<YarnVariant> YarnVariants() {
  std::vector<YarnVariant> v;
  posenc::YarnParams p;
  v.push_back({p, true});  // defaults: beta 32/1, truncate
  p = {};
  p.truncate = false;  // gpt-oss
  v.push_back({p, true});
  p = {};
  p.mscale = 1.0;  // DeepSeek-V3
  p.mscale_all_dim = 1.0;
  v.push_back({p, true});
  p = {};
  p.mscale = 0.707;  // DeepSeek-V2
  p.mscale_all_dim = 0.707;
  v.push_back({p, true});
  p = {};
  p.mscale = 1.0;  // unequal: attention factor g(s,1)/g(s,0.5), softmax g(s,0.5)^2
  p.mscale_all_dim = 0.5;
  v.push_back({p, true});
  p = {};
  p.mscale = 1.0;  // mscale_all_dim 0: attention g(s,1), no softmax multiplier
  p.mscale_all_dim = 0.0;
  v.push_back({p, true});
  p = {};
  p.mscale = 0.8;  // only mscale: attention g(s,1)
  v.push_back({p, true});
  p = {};
  p.attention_factor = 1.5;  // explicit wins over mscale
  p.mscale = 1.0;
  p.mscale_all_dim = 0.5;
  v.push_back({p, true});
  p = {};
  p.beta_fast = 64.0;
  p.beta_slow = 2.0;
  v.push_back({p, true});
  p = {};
  p.extrapolation_factor = 0.5;  // llama.cpp ext_factor
  v.push_back({p, false});
  p = {};
  p.ramp = posenc::YarnRamp::kPaper;
  v.push_back({p, false});
  return v;
}

inline std::vector<GridCase> SpecGrid() {
  using posenc::Method;
  const std::int64_t L = kGridOriginal;
  const std::vector<std::int64_t> lens = {0, L, 2 * L, 10 * L};
  std::vector<GridCase> grid;
  for (std::int64_t head_dim : {64, 96, 128, 256}) {
    for (std::int64_t rotary_dim : {head_dim, head_dim / 2}) {
      for (double theta : {1e4, 5e5, 1e6}) {
        for (double factor : {1.0, 2.0, 4.5, 8.0, 16.0, 40.0}) {
          const auto ext = static_cast<std::int64_t>(std::llround(factor * L));
          auto add = [&](posenc::RopeSpec spec) { grid.push_back({spec, lens}); };

          if (factor == 1.0) add(BaseSpec(Method::kNone, head_dim, rotary_dim, theta, 1.0));
          add(BaseSpec(Method::kLinear, head_dim, rotary_dim, theta, factor));
          add(BaseSpec(Method::kNtk, head_dim, rotary_dim, theta, factor));
          posenc::RopeSpec alpha = BaseSpec(Method::kNtkAlpha, head_dim, rotary_dim, theta, 1.0);
          alpha.alpha = factor;
          add(alpha);

          posenc::RopeSpec dynamic =
              BaseSpec(Method::kDynamic, head_dim, rotary_dim, theta, factor);
          dynamic.max_position_embeddings = L;
          // Lengths just past L' and off the powers of two, where the float32 base rounds
          // differently from step to step.
          grid.push_back({dynamic, {0, L, L + 1, 2 * L, 3 * L + 7, 10 * L, 37 * L + 1}});

          for (const YarnVariant& variant : YarnVariants()) {
            posenc::RopeSpec yarn = BaseSpec(Method::kYarn, head_dim, rotary_dim, theta, factor);
            yarn.original_max_position_embeddings = L;
            yarn.max_position_embeddings = ext;
            yarn.yarn = variant.params;
            add(yarn);
          }
          posenc::RopeSpec dyarn =
              BaseSpec(Method::kDynamicYarn, head_dim, rotary_dim, theta, factor);
          dyarn.original_max_position_embeddings = L;
          dyarn.max_position_embeddings = ext;
          add(dyarn);

          for (std::int64_t orig : {std::int64_t{8192}, L}) {
            posenc::RopeSpec llama3 =
                BaseSpec(Method::kLlama3, head_dim, rotary_dim, theta, factor);
            llama3.original_max_position_embeddings = orig;
            llama3.max_position_embeddings = static_cast<std::int64_t>(std::llround(factor * orig));
            add(llama3);
          }
          posenc::RopeSpec llama3b = BaseSpec(Method::kLlama3, head_dim, rotary_dim, theta, factor);
          llama3b.original_max_position_embeddings = 8192;
          llama3b.max_position_embeddings = static_cast<std::int64_t>(std::llround(factor * 8192));
          llama3b.llama3.low_freq_factor = 2.0;
          llama3b.llama3.high_freq_factor = 8.0;
          add(llama3b);

          for (bool explicit_attention : {false, true}) {
            posenc::RopeSpec lr = BaseSpec(Method::kLongrope, head_dim, rotary_dim, theta, factor);
            lr.original_max_position_embeddings = L;
            lr.max_position_embeddings = ext;
            lr.longrope.short_factor = ShortFactors(rotary_dim / 2);
            lr.longrope.long_factor = LongFactors(rotary_dim / 2, factor);
            if (explicit_attention) lr.longrope.attention_factor = 1.2;
            add(lr);
          }

          if (rotary_dim == head_dim) {
            for (double rho : {1.0, 0.5, 0.25, 0.3}) {
              posenc::RopeSpec prop =
                  BaseSpec(Method::kProportional, head_dim, head_dim, theta, factor);
              prop.partial_rotary_factor = rho;
              add(prop);
            }
          }
        }
      }
    }
  }
  // The YaRN ramp guard: L = 6 puts both correction dims at or below 0, so lo = hi = 0 and the
  // upper bound becomes 0.001 (pair 0 kept, every other pair divided).
  for (double factor : {2.0, 16.0}) {
    posenc::RopeSpec guard = BaseSpec(Method::kYarn, 64, 64, 1e4, factor);
    guard.original_max_position_embeddings = 6;
    guard.max_position_embeddings = static_cast<std::int64_t>(6 * factor);
    grid.push_back({guard, {0}});
  }
  return grid;
}

// Whether kHf is defined for a grid entry (transformers has no paper ramp and no
// extrapolation_factor).
inline bool HfHas(const posenc::RopeSpec& spec) {
  return spec.yarn.ramp == posenc::YarnRamp::kPairIndex && spec.yarn.extrapolation_factor == 1.0;
}

}  // namespace posenc_test
