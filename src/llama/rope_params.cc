// A scaling method's parameters beyond its factor (posenc/llama/rope_params.h).
#include "posenc/llama/rope_params.h"

#include <cmath>

#include "posenc/core/error.h"
#include "util/format.h"

namespace posenc::llama {
namespace {

constexpr RopeParamInfo kTable[] = {
    {"attention_factor", "--attention-factor", kParamYarn, &RopeParams::attention_factor},
    {"beta_fast", "--beta-fast", kParamYarn, &RopeParams::beta_fast},
    {"beta_slow", "--beta-slow", kParamYarn, &RopeParams::beta_slow},
    {"mscale", "--mscale", kParamYarn, &RopeParams::mscale},
    {"mscale_all_dim", "--mscale-all-dim", kParamYarn, &RopeParams::mscale_all_dim},
    {"extrapolation_factor", "--extrapolation-factor", kParamYarn,
     &RopeParams::extrapolation_factor},
    {"truncate", "--truncate", kParamYarnDims, nullptr},
    {"low_freq_factor", "--low-freq-factor", kParamLlama3, &RopeParams::low_freq_factor},
    {"high_freq_factor", "--high-freq-factor", kParamLlama3, &RopeParams::high_freq_factor},
};

}  // namespace

std::span<const RopeParamInfo> rope_param_table() { return kTable; }

const RopeParamInfo& rope_param_info(std::string_view key) {
  for (const RopeParamInfo& info : kTable) {
    if (info.key == key) return info;
  }
  std::string keys;
  for (const RopeParamInfo& info : kTable)
    keys += (keys.empty() ? "" : ", ") + std::string(info.key);
  throw Error("unknown RoPE parameter \"" + std::string(key) + "\" (expected one of " + keys + ")");
}

std::string_view param_name(const RopeParamInfo& info, ParamNames names) {
  return names == ParamNames::kKeys ? info.key : info.flag;
}

bool RopeParams::has(const RopeParamInfo& info) const {
  return info.number ? (this->*info.number).has_value() : truncate.has_value();
}

std::string RopeParams::text(const RopeParamInfo& info) const {
  if (!info.number) return *truncate ? "true" : "false";
  return detail::num(*(this->*info.number));
}

bool RopeParams::empty() const {
  for (const RopeParamInfo& info : kTable) {
    if (has(info)) return false;
  }
  return true;
}

void RopeParams::override_with(const RopeParams& over) {
  for (const RopeParamInfo& info : kTable) {
    if (!over.has(info)) continue;
    if (info.number) {
      this->*info.number = over.*info.number;
    } else {
      truncate = over.truncate;
    }
  }
}

std::string RopeParams::flags() const {
  std::string out;
  for (const RopeParamInfo& info : kTable) {
    if (has(info)) out += (out.empty() ? "" : " ") + std::string(info.flag) + " " + text(info);
  }
  return out;
}

std::vector<std::string> unread_params(const RopeParams& params, const RopeSpec& spec,
                                       ParamNames names) {
  std::vector<std::string> out;
  for (const RopeParamInfo& info : kTable) {
    if (params.has(info) && !method_reads(spec, info.param))
      out.emplace_back(param_name(info, names));
  }
  return out;
}

void apply_rope_params(RopeSpec& spec, const RopeParams& params, std::string_view method,
                       ParamNames names) {
  for (const RopeParamInfo& info : kTable) {
    if (!params.has(info)) continue;
    const std::string name(param_name(info, names));
    const std::string value = params.text(info);
    if (!method_reads(spec, info.param)) {
      throw Error(name + " (" + value + ") has no effect on method " + std::string(method) +
                  ": only " + methods_reading(info.param) + " read it");
    }
    if (info.number && !std::isfinite(*(params.*info.number)))
      throw Error(name + " (" + value + ") must be finite");
  }
  if (params.attention_factor) {
    if (!(*params.attention_factor > 0)) {
      throw Error(std::string(param_name(kTable[0], names)) + " (" + params.text(kTable[0]) +
                  ") must be positive");
    }
    spec.yarn.attention_factor = params.attention_factor;
  }
  if (params.beta_fast) spec.yarn.beta_fast = *params.beta_fast;
  if (params.beta_slow) spec.yarn.beta_slow = *params.beta_slow;
  if (params.mscale) spec.yarn.mscale = params.mscale;
  if (params.mscale_all_dim) spec.yarn.mscale_all_dim = params.mscale_all_dim;
  if (params.extrapolation_factor) spec.yarn.extrapolation_factor = *params.extrapolation_factor;
  if (params.truncate) spec.yarn.truncate = *params.truncate;
  if (params.low_freq_factor) spec.llama3.low_freq_factor = *params.low_freq_factor;
  if (params.high_freq_factor) spec.llama3.high_freq_factor = *params.high_freq_factor;
  // validate() names the RopeSpec field, which is the key; a flag's user reads --beta-slow there.
  try {
    validate(spec);
  } catch (const Error& e) {
    if (names == ParamNames::kKeys || params.empty()) throw;
    throw Error(std::string(e.what()) + " (from " + params.flags() + ")");
  }
}

}  // namespace posenc::llama
