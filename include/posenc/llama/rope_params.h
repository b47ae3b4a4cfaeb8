// posenc/llama/rope_params.h: the parameters of a scaling method beyond its factor, as
// `posenc eval`, `posenc generate`, posenc.finetune and the RoPE sidecar of a fine-tuned model
// (posenc-rope-sidecar/1) set them for a llama2.ts model.
//
// Each has one name, written two ways: the key (snake_case: the sidecar's JSON key, the Python
// keyword, the RopeSpec field) and the flag (--kebab-case: the CLI's and posenc.finetune's). Unset
// means the method's default (docs/design.md §3):
//
//   key                   flag                     read by                default
//   attention_factor      --attention-factor       yarn family            0.1 ln s + 1 (derived)
//   beta_fast             --beta-fast              yarn family            32
//   beta_slow             --beta-slow              yarn family            1
//   mscale                --mscale                 yarn family            unset (DeepSeek's)
//   mscale_all_dim        --mscale-all-dim         yarn family            unset (DeepSeek's)
//   extrapolation_factor  --extrapolation-factor   yarn family            1
//   truncate              --truncate true|false    yarn, dynamic-yarn     true
//   low_freq_factor       --low-freq-factor        llama3                 1
//   high_freq_factor      --high-freq-factor       llama3                 4
//
// "Read by" is spec.h's method_reads (kParamYarn, kParamYarnDims, kParamLlama3): a parameter the
// method does not read is an error, never silently dropped.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/spec.h"

namespace posenc::llama {

struct RopeParamInfo;

struct RopeParams {
  std::optional<double> attention_factor;
  std::optional<double> beta_fast;
  std::optional<double> beta_slow;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  std::optional<double> extrapolation_factor;
  std::optional<bool> truncate;
  std::optional<double> low_freq_factor;
  std::optional<double> high_freq_factor;

  bool empty() const;
  bool has(const RopeParamInfo& info) const;          // whether that field is set
  std::string text(const RopeParamInfo& info) const;  // a set field's value: "16", "false"
  // Each field of `over` that is set replaces this one's (flags over a sidecar).
  void override_with(const RopeParams& over);
  // The set fields as flags, in the table's order: "--beta-fast 16 --truncate false".
  std::string flags() const;
};

// Which way messages name a parameter.
enum class ParamNames {
  kKeys,   // "beta_fast": the sidecar, Python
  kFlags,  // "--beta-fast": the CLI, posenc.finetune
};

// One parameter of the table above. A number's `number` points at its field; truncate, the one
// boolean, has `number` null.
struct RopeParamInfo {
  std::string_view key;
  std::string_view flag;
  MethodParam param;  // the RopeSpec parameter group that reads it
  std::optional<double> RopeParams::*number;
};
std::span<const RopeParamInfo> rope_param_table();
// The entry of a key of the table ("beta_fast"); throws Error for any other.
const RopeParamInfo& rope_param_info(std::string_view key);

// "beta_fast" or "--beta-fast".
std::string_view param_name(const RopeParamInfo& info, ParamNames names);

// The set parameters `spec`'s method does not read, named as `names` says.
std::vector<std::string> unread_params(const RopeParams& params, const RopeSpec& spec,
                                       ParamNames names);

// Sets the parameters on `spec` (attention_factor: the YaRN one), then validates it. `method` is
// the name the caller gave the method ("none", where method_name says "default"). Throws Error
// naming the parameter: one the method does not read ("--beta-fast (16) has no effect on method
// linear: only yarn, yarn-paper, dynamic-yarn read it"), an attention factor that is not positive,
// or validate()'s error of the result.
void apply_rope_params(RopeSpec& spec, const RopeParams& params, std::string_view method,
                       ParamNames names);

}  // namespace posenc::llama
