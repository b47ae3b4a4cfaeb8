// tests/support/real_specs.h: the real specs, in precise numerics, that the on-the-fly rows are
// tested on against the exact path and the table path (tests/rope/cos_sin_fast_test.cc,
// tests/rope/on_the_fly_apply_test.cc; test-only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"
#include "posenc/io/presets.h"
#include "support/spec_builder.h"

namespace posenc_test {

// The largest position the stepped rows' bound covers (|p| < 2^31, which exact_sincos reduces
// exactly).
inline constexpr std::int64_t kTop = (std::int64_t{1} << 31) - 1;

struct Named {
  std::string name;
  posenc::Frequencies freqs;
};

// Real specs in precise numerics: plain RoPE, Llama 3 scaling, YaRN (with DeepSeek's attention
// factor), LongRoPE's long factors, partial rotary (half-split and interleaved), the multi-axis
// maps of Qwen2-VL (sections) and Qwen3-VL (interleaved).
inline std::vector<Named> RealSpecs() {
  std::vector<Named> out;
  out.push_back({"plain-10000-128",
                 posenc::compute_frequencies(posenc::testing::make_spec(posenc::Method::kNone))});
  for (const char* preset : {"llama-3.1-8b", "qwen2.5-7b-instruct-yarn4", "deepseek-v2-lite",
                             "pythia-410m", "gpt-j-6b", "qwen2-vl-7b", "qwen3-vl-8b"}) {
    out.push_back({preset, posenc::compute_frequencies(posenc::load_preset(preset).spec)});
  }
  out.push_back({"phi-3-mini-128k@131072",
                 posenc::compute_frequencies(posenc::load_preset("phi-3-mini-128k").spec,
                                             posenc::Numerics::kPrecise, 131072)});
  // Proportional RoPE: the first quarter of the pairs rotated (by 1/8 of their frequencies), the
  // other 48 at frequency 0, which the stepper writes without anchoring or stepping them.
  posenc::RopeSpec proportional =
      posenc::testing::make_spec(posenc::Method::kProportional, 128, 10000.0, 8.0);
  proportional.partial_rotary_factor = 0.25;
  out.push_back({"proportional-0.25-128", posenc::compute_frequencies(proportional)});
  return out;
}

}  // namespace posenc_test
