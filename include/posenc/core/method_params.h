// posenc/core/method_params.h: a scaling method's parameters beyond its factor, as every caller
// that changes a RoPE sets them: `--scaling`'s flags on a model (io/extend.h ExtendOptions), the
// flags of `posenc eval` and `posenc generate`, posenc.finetune's flags, Llama.set_rope's keywords
// and the RoPE sidecar of a fine-tuned model (posenc-rope-sidecar/1).
//
// Each has one name, written two ways: the key (snake_case: the sidecar's JSON key, the Python
// keyword, the RopeSpec field) and the flag (--kebab-case). Unset means the method's default, or
// the model's value (docs/design.md §3):
//
//   key                   flag                     read by (spec.h)          RopeSpec field
//   beta_fast             --beta-fast              kParamYarn                yarn.beta_fast
//   beta_slow             --beta-slow              kParamYarn                yarn.beta_slow
//   attention_factor      --attention-factor       kParamAttentionFactor     yarn's, or longrope's
//   mscale                --mscale                 kParamYarn                yarn.mscale
//   mscale_all_dim        --mscale-all-dim         kParamYarn                yarn.mscale_all_dim
//   extrapolation_factor  --extrapolation-factor   kParamYarn                yarn.extrapolation_factor
//   low_freq_factor       --low-freq-factor        kParamLlama3              llama3.low_freq_factor
//   high_freq_factor      --high-freq-factor       kParamLlama3              llama3.high_freq_factor
//   alpha                 --alpha                  kParamAlpha               alpha (ntk-alpha)
//   truncate              --truncate true|false    kParamYarnDims            yarn.truncate
//
// A parameter the method does not read (spec.h method_reads) is an error, never silently
// dropped. attention_factor, low_freq_factor, high_freq_factor and alpha must be finite and above
// 0, the others finite; validate() then checks how they fit together (beta_fast > beta_slow, ...).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/spec.h"

namespace posenc {

struct MethodParamInfo;

struct MethodParams {
  std::optional<double> beta_fast;
  std::optional<double> beta_slow;
  std::optional<double> attention_factor;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  std::optional<double> extrapolation_factor;
  std::optional<double> low_freq_factor;
  std::optional<double> high_freq_factor;
  std::optional<double> alpha;
  std::optional<bool> truncate;

  bool params_empty() const;                            // no parameter set
  bool has(const MethodParamInfo& info) const;          // whether that one is set
  std::string text(const MethodParamInfo& info) const;  // a set one's value: "16", "false"
  // Each parameter `over` sets replaces this one's (flags over a sidecar).
  void override_params(const MethodParams& over);
  // The set parameters as flags, in the table's order: "--beta-fast 16 --truncate false".
  std::string param_flags() const;
};

// Which way messages name a parameter.
enum class ParamNames {
  kKeys,   // "beta_fast": the sidecar, Python
  kFlags,  // "--beta-fast": the CLI, posenc.finetune
};

// One row of the table above. A number's `number` points at its field; truncate, the one
// boolean, has `number` null.
struct MethodParamInfo {
  std::string_view key;
  std::string_view flag;
  MethodParam param;  // the RopeSpec parameter group that reads it
  bool positive;      // must be above 0 (else only finite)
  std::optional<double> MethodParams::*number;
};
std::span<const MethodParamInfo> method_param_table();
// The row of a key ("beta_fast"); throws Error naming the keys for any other.
const MethodParamInfo& method_param_info(std::string_view key);
// "beta_fast" or "--beta-fast".
std::string_view param_name(const MethodParamInfo& info, ParamNames names);

// The set parameters `spec`'s method does not read, named as `names` says.
std::vector<std::string> unread_method_params(const MethodParams& params, const RopeSpec& spec,
                                              ParamNames names);

// Sets the parameters on `spec`. Throws Error naming the parameter for a value that is not finite
// (or not above 0 where it must be), and for one the method does not read: "--beta-fast (16)
// applies to yarn, yarn-paper and dynamic-yarn, not to <method_label>" (label: `rope_type
// "linear"`, `method linear`). Does not validate() the result.
void set_method_params(RopeSpec& spec, const MethodParams& params, ParamNames names,
                       std::string_view method_label);

// Sets the parameters given on `spec`'s fields, unchecked (attention_factor: longrope's for
// longrope, else yarn's). For a caller that checks them its own way (`posenc apply`'s flags).
void assign_method_params(RopeSpec& spec, const MethodParams& params);

// set_method_params, then validate(); with flag names, validate()'s error (which names the
// RopeSpec field) ends with the flags it came from: "(with --beta-fast 1 --beta-slow 2)".
void apply_method_params(RopeSpec& spec, const MethodParams& params, ParamNames names,
                         std::string_view method_label);

}  // namespace posenc
