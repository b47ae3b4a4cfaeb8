// posenc/io/extend.h: give any model a context-extension method of the caller's choice.
//
// A model's RopeSpec (from a config.json, a .gguf file or a preset) plus a method and a target
// gives the RopeSpec of the extended model, written the way the transformers configs of extended
// models are (Qwen2.5 with its YaRN block, gpt-oss, DeepSeek):
//
//   L0 = the model's original context: original_max_position_embeddings if set, else
//        max_position_embeddings
//   factor s = target_context / L0 (or the given factor)
//   original_max_position_embeddings = L0,  max_position_embeddings = target_context (or s * L0)
//
// Dynamic NTK is the exception: it treats max_position_embeddings as the trained length and
// grows its base past it, so that field stays L0.
//
//   llama-2-7b + {scaling "yarn", target_context 65536}
//     -> yarn, factor 16, L 4096, L' 65536, attention factor 0.1 ln 16 + 1 = 1.2772588722239781
//
// ExtendOptions are the command-line flags of every posenc command that takes a model, and
// messages name them as flags ("--target-context (1000) ...").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/core/method_params.h"
#include "posenc/core/spec.h"

namespace posenc {

// The method parameters (--beta-fast, --attention-factor, ..., --alpha: core/method_params.h),
// and the flags only an extension has.
struct ExtendOptions : MethodParams {
  // --scaling: "none", "linear", "ntk", "dynamic", "yarn", "yarn-paper", "dynamic-yarn",
  // "llama3", "ntk-alpha" (with alpha), or "longrope" (only for a model that already has LongRoPE
  // factor lists). Unset: the model's own method.
  std::optional<std::string> scaling;
  std::optional<std::int64_t> target_context;  // --target-context N: s = N / L0
  std::optional<double> factor;                // --factor S (with N: must agree)
  std::optional<double> rope_theta;            // --rope-theta: replaces the base, any method

  bool empty() const;         // no option set: extend_spec returns the base unchanged
  std::string flags() const;  // the options as flags, "--scaling yarn --target-context 65536"
};

// The extended spec. Rules:
// - a new method replaces the model's own (a warning says so); the parameters of the old method
//   are dropped, except between the YaRN variants, which keep them;
// - a method that takes a factor needs --factor or --target-context, except when it replaces a
//   scaled model's method: the model's own context (L') is then the target;
// - --factor and --target-context together must agree (S == N / L0, to 1e-12 relative);
// - a target at or below L0 is allowed, with a warning (the factor does not extend anything);
// - a parameter flag that the final method does not read is an error, never silently dropped;
// - "none" removes the scaling: factor 1, L' = L0.
// Throws Error naming the flag and its value; errors of the resulting spec (spec.h validate())
// are reported with the flags that led to them. Appends to `warnings` (may be null) what the
// extension decided and the new warnings of the resulting spec.
RopeSpec extend_spec(const RopeSpec& base, const ExtendOptions& options,
                     std::vector<std::string>* warnings);

// The context a model can reach, which `posenc presets` lists: max_position_embeddings, or factor
// * original context when larger, for the methods whose factor is the extension ratio
// (MethodInfo::factor_is_ratio). It differs from context_lengths().extended (spec.h), the
// declared L' every other command shows, when a config's L' stops short of s * L. The Qwen model
// cards' YaRN blocks leave max_position_embeddings at 40960 or 32768 while factor 4 over 32768
// reaches 131072. Llama 3's factor only divides the low frequencies (Llama 3.2: factor 32 over
// 8192, 131072 in all), and dynamic NTK's max_position_embeddings is its trained length, so both
// give max_position_embeddings.
std::int64_t reachable_context(const RopeSpec& spec);

}  // namespace posenc
