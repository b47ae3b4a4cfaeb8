// The method parameter flags (cli/method_param_flags.h).
#include "method_param_flags.h"

#include <string_view>

#include "options.h"

namespace posenc::cli {
namespace {

// What each flag does, by key; the table says which methods read it.
std::string help(std::string_view key) {
  if (key == "beta_fast") return "YaRN: rotations above which pairs keep w (default 32)";
  if (key == "beta_slow") return "YaRN: rotations below which pairs get w/s (default 1)";
  if (key == "attention_factor")
    return "YaRN, LongRoPE: attention factor, multiplies cos and sin (YaRN's default 0.1 ln s + "
           "1; 1 switches the temperature off)";
  if (key == "mscale") return "YaRN (DeepSeek): numerator mscale of the attention factor";
  if (key == "mscale_all_dim") return "YaRN (DeepSeek): denominator mscale, and the softmax scale";
  if (key == "extrapolation_factor")
    return "YaRN: weight of the extrapolated frequency, in [0, 1] (llama.cpp ext_factor; "
           "default 1)";
  if (key == "low_freq_factor") return "llama3: low_freq_factor (default 1)";
  if (key == "high_freq_factor") return "llama3: high_freq_factor (default 4)";
  if (key == "alpha") return "ntk-alpha (Hunyuan): base rope_theta * alpha^(D/(D-2))";
  return "YaRN: floor/ceil the correction range (true, the default) or not (false, as gpt-oss)";
}

}  // namespace

void add_method_param_flags(CLI::App* cmd, MethodParams& params, const std::string& group,
                            bool alpha) {
  for (const MethodParamInfo& info : method_param_table()) {
    if (!alpha && info.key == "alpha") continue;
    const std::string flag(info.flag);
    CLI::Option* o = info.number ? add_number(cmd, flag, params.*info.number, help(info.key))
                                 : add_bool(cmd, flag, params.truncate, help(info.key));
    o->group(group);
  }
}

}  // namespace posenc::cli
