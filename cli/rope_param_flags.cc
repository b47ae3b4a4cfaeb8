// The method parameter flags of eval and generate (cli/rope_param_flags.h).
#include "rope_param_flags.h"

#include <string>
#include <string_view>

#include "options.h"

namespace posenc::cli {
namespace {

constexpr const char* kGroup = "Method parameters (default: the method's; a sidecar's when given)";

// What each flag does, by key; the table says which methods read it.
std::string help(std::string_view key) {
  if (key == "attention_factor")
    return "YaRN methods: this attention factor instead of 0.1 ln(s) + 1 (1 switches the "
           "temperature off)";
  if (key == "beta_fast") return "YaRN methods: rotations above which pairs keep w (default 32)";
  if (key == "beta_slow") return "YaRN methods: rotations below which pairs get w/s (default 1)";
  if (key == "mscale") return "YaRN methods (DeepSeek): numerator mscale of the attention factor";
  if (key == "mscale_all_dim")
    return "YaRN methods (DeepSeek): denominator mscale, and the softmax scale";
  if (key == "extrapolation_factor")
    return "YaRN methods: weight of the extrapolated frequency, in [0, 1] (default 1)";
  if (key == "truncate")
    return "yarn, dynamic-yarn: floor/ceil the correction dims (default true; false as gpt-oss)";
  if (key == "low_freq_factor") return "llama3: low_freq_factor (default 1)";
  return "llama3: high_freq_factor (default 4)";
}

}  // namespace

void add_rope_param_flags(CLI::App* cmd, llama::RopeParams& params) {
  for (const llama::RopeParamInfo& info : llama::rope_param_table()) {
    const std::string flag(info.flag);
    CLI::Option* o = info.number ? add_number(cmd, flag, params.*info.number, help(info.key))
                                 : add_bool(cmd, flag, params.truncate, help(info.key));
    o->group(kGroup);
  }
}

}  // namespace posenc::cli
