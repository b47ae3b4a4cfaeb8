// posenc/analysis/doctor.h: the known pitfalls of a model's RoPE across engines, each with what to
// do.
//
// diagnose() runs every check on a parsed config and returns one Finding per pitfall it finds.
// The numbers in each finding are computed for the model at hand (pairs that differ, angle
// errors, attention factors per engine), with the engines' rules from posenc/analysis/engines.h.
//
//   id                          fires when
//   integer-factor              the config writes factor as an integer (transformers warns)
//   factor-mismatch             yarn's factor disagrees with max_position_embeddings / original
//   missing-original-context    original_max_position_embeddings was inferred, not given
//   attention-factor-engines    yarn/longrope sets attention_factor, mscale or mscale_all_dim, or
//                               the engines' attention factors / softmax multipliers disagree
//   truncate-ignored            yarn with truncate: false (llama.cpp floors and ceils anyway)
//   partial-rotary              fewer dims rotated than the head has, or a partial_rotary_factor
//                               that only some engines apply
//   dynamic-kv-cache            dynamic NTK or dynamic YaRN: frequencies change under a KV cache
//   longrope-switch             LongRoPE's short/long switch at the original context
//   half-precision-table        always: cos/sin rounded to fp16/bf16 near the extended context
//   engine-unsupported          an engine cannot run the method as the model asks
//   llama4-pair-layout          Llama 4: adjacent pairs in transformers, halves (permuted
//                               weights) in vLLM and SGLang
//   gemma3-sliding-layers       sliding layers with unscaled RoPE beside scaled global ones,
//                               and the angle error if an engine scales them too (vLLM #29111)
//   llama3-equal-freq-factors   llama3 with low_freq_factor == high_freq_factor (Llama 4 Scout)
//   M-RoPE (a spec with an axis map, or a VL model_type; src/analysis/doctor_mrope.cc):
//   mrope-bf16-cache            an axis map: vLLM / SGLang keep the M-RoPE cos/sin cache in bf16
//   mrope-position-rule         a VL family: where hf-4.5 and hf-5.3 ids first differ (layout)
//   mrope-fractional-seconds    Qwen2.5-VL: second_per_grid_ts truncated to an integer
//   mrope-yarn                  an axis map with a YaRN-family method: engines and the factor
//   imrope-fourth-axis          an interleaved map (Qwen3-VL): llama.cpp IMROPE reads e there
//
// Example (DeepSeek-V3): integer-factor (info), attention-factor-engines (info: every engine
// uses 1 and a softmax multiplier of 1.8739), half-precision-table (info).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/mrope_positions.h"
#include "posenc/io/config.h"

namespace posenc {

struct Finding {
  std::string id;        // stable identifier, e.g. "truncate-ignored"
  std::string severity;  // "error" | "warning" | "info"
  std::string title;     // one line
  std::string detail;    // what happens, in which engine, with the numbers for this model
  std::string advice;    // what to do
};

// What the M-RoPE position checks read besides the config.
struct DoctorOptions {
  // The VL model's vision settings (load_vision_config of the same config.json); nullopt: the
  // family from model_type (mrope_model_for_type) with transformers' defaults.
  std::optional<MropeVision> vision;
  // The prompt the position checks use; empty: kDoctorMropeLayout.
  std::vector<MropeSegment> layout;
};

// The representative prompt of the position checks when no layout is given: text, an image,
// text, a 16-group video at 2 s per group, text.
inline constexpr std::string_view kDoctorMropeLayout =
    "text:16,image:1x28x28,text:8,video:16x28x28@2,text:8";

// Every check against `config` (its spec, model_type and parse warnings). Findings come in the
// order of the table above. Throws Error only when the spec itself (or options.vision) is
// invalid.
std::vector<Finding> diagnose(const ModelConfig& config);
std::vector<Finding> diagnose(const ModelConfig& config, const DoctorOptions& options);

// How many findings have each severity (what `posenc doctor` prints last).
struct FindingCounts {
  int error = 0;
  int warning = 0;
  int info = 0;
};
FindingCounts count_findings(const std::vector<Finding>& findings);

}  // namespace posenc
