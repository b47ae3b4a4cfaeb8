// A scaling method's parameters beyond its factor (posenc/core/method_params.h).
#include "posenc/core/method_params.h"

#include <cmath>

#include "posenc/core/error.h"
#include "util/format.h"

namespace posenc {
namespace {

// The order of the flags in messages and in ExtendOptions::flags().
constexpr MethodParamInfo kTable[] = {
    {"beta_fast", "--beta-fast", kParamYarn, false, &MethodParams::beta_fast},
    {"beta_slow", "--beta-slow", kParamYarn, false, &MethodParams::beta_slow},
    {"attention_factor", "--attention-factor", kParamAttentionFactor, true,
     &MethodParams::attention_factor},
    {"mscale", "--mscale", kParamYarn, false, &MethodParams::mscale},
    {"mscale_all_dim", "--mscale-all-dim", kParamYarn, false, &MethodParams::mscale_all_dim},
    {"extrapolation_factor", "--extrapolation-factor", kParamYarn, false,
     &MethodParams::extrapolation_factor},
    {"low_freq_factor", "--low-freq-factor", kParamLlama3, true, &MethodParams::low_freq_factor},
    {"high_freq_factor", "--high-freq-factor", kParamLlama3, true, &MethodParams::high_freq_factor},
    {"alpha", "--alpha", kParamAlpha, true, &MethodParams::alpha},
    {"truncate", "--truncate", kParamYarnDims, false, nullptr},
};

}  // namespace

std::span<const MethodParamInfo> method_param_table() { return kTable; }

const MethodParamInfo& method_param_info(std::string_view key) {
  for (const MethodParamInfo& info : kTable) {
    if (info.key == key) return info;
  }
  std::string keys;
  for (const MethodParamInfo& info : kTable)
    keys += (keys.empty() ? "" : ", ") + std::string(info.key);
  throw Error("unknown method parameter \"" + std::string(key) + "\" (the parameters are " + keys +
              ")");
}

std::string_view param_name(const MethodParamInfo& info, ParamNames names) {
  return names == ParamNames::kKeys ? info.key : info.flag;
}

bool MethodParams::has(const MethodParamInfo& info) const {
  return info.number ? (this->*info.number).has_value() : truncate.has_value();
}

std::string MethodParams::text(const MethodParamInfo& info) const {
  if (!info.number) return *truncate ? "true" : "false";
  return detail::num(*(this->*info.number));
}

bool MethodParams::params_empty() const {
  for (const MethodParamInfo& info : kTable) {
    if (has(info)) return false;
  }
  return true;
}

void MethodParams::override_params(const MethodParams& over) {
  for (const MethodParamInfo& info : kTable) {
    if (!over.has(info)) continue;
    if (info.number) {
      this->*info.number = over.*info.number;
    } else {
      truncate = over.truncate;
    }
  }
}

std::string MethodParams::param_flags() const {
  std::string out;
  for (const MethodParamInfo& info : kTable) {
    if (has(info)) out += (out.empty() ? "" : " ") + std::string(info.flag) + " " + text(info);
  }
  return out;
}

std::vector<std::string> unread_method_params(const MethodParams& params, const RopeSpec& spec,
                                              ParamNames names) {
  std::vector<std::string> out;
  for (const MethodParamInfo& info : kTable) {
    if (params.has(info) && !method_reads(spec, info.param))
      out.emplace_back(param_name(info, names));
  }
  return out;
}

void set_method_params(RopeSpec& spec, const MethodParams& p, ParamNames names,
                       std::string_view method_label) {
  for (const MethodParamInfo& info : kTable) {
    if (!p.has(info)) continue;
    const std::string name(param_name(info, names));
    if (info.number) {
      const double v = *(p.*info.number);
      if (!std::isfinite(v) || (info.positive && !(v > 0))) {
        throw Error(name + " (" + p.text(info) + ") must be a finite number" +
                    (info.positive ? " greater than 0" : ""));
      }
    }
    if (!method_reads(spec, info.param)) {
      throw Error(name + " (" + p.text(info) + ") applies to " + methods_reading(info.param) +
                  ", not to " + std::string(method_label));
    }
  }
  assign_method_params(spec, p);
}

void assign_method_params(RopeSpec& spec, const MethodParams& p) {
  YarnParams& y = spec.yarn;
  if (p.beta_fast) y.beta_fast = *p.beta_fast;
  if (p.beta_slow) y.beta_slow = *p.beta_slow;
  if (p.attention_factor) {
    (method_info(spec).attention == AttentionRule::kLongrope ? spec.longrope.attention_factor
                                                             : y.attention_factor) =
        *p.attention_factor;
  }
  if (p.mscale) y.mscale = p.mscale;
  if (p.mscale_all_dim) y.mscale_all_dim = p.mscale_all_dim;
  if (p.extrapolation_factor) y.extrapolation_factor = *p.extrapolation_factor;
  if (p.low_freq_factor) spec.llama3.low_freq_factor = *p.low_freq_factor;
  if (p.high_freq_factor) spec.llama3.high_freq_factor = *p.high_freq_factor;
  if (p.alpha) spec.alpha = *p.alpha;
  if (p.truncate) y.truncate = *p.truncate;
}

void apply_method_params(RopeSpec& spec, const MethodParams& params, ParamNames names,
                         std::string_view method_label) {
  set_method_params(spec, params, names, method_label);
  try {
    validate(spec);
  } catch (const Error& e) {
    if (names == ParamNames::kKeys || params.params_empty()) throw;
    throw Error(std::string(e.what()) + " (with " + params.param_flags() + ")");
  }
}

}  // namespace posenc
