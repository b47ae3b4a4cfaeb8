// The RoPE sidecar of a fine-tuned model file (cli/model_rope_sidecar.h).
#include "model_rope_sidecar.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/core/error.h"
#include "posenc/core/spec.h"

namespace posenc::cli {
namespace {

constexpr const char* kFormat = "posenc-rope-sidecar/1";

std::optional<double> positive_number(const nlohmann::json& j, const char* key,
                                      const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number()) {
    throw Error(fmt::format("{}: \"{}\" ({}) must be a number or null", file, key, j[key].dump()));
  }
  const double v = j[key].get<double>();
  if (!(v > 0) || !std::isfinite(v))
    throw Error(fmt::format("{}: \"{}\" ({}) must be positive", file, key, v));
  return v;
}

std::optional<double> finite_number(const nlohmann::json& j, const char* key,
                                    const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number()) {
    throw Error(fmt::format("{}: \"{}\" ({}) must be a number or null", file, key, j[key].dump()));
  }
  return j[key].get<double>();  // JSON has no inf or NaN
}

}  // namespace

std::optional<RopeSidecar> read_rope_sidecar(const std::string& model_path) {
  const std::filesystem::path path = std::filesystem::path(model_path).replace_extension(".json");
  std::error_code ec;
  // A "model" that is itself a .json file has no sidecar: the loader says what it is instead.
  if (path == std::filesystem::path(model_path) || !std::filesystem::is_regular_file(path, ec))
    return std::nullopt;
  const std::string file = "RoPE sidecar " + path.string();
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw Error(fmt::format("{}: cannot read it", file));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("{}: not JSON ({})", file, e.what()));
  }
  if (!j.is_object()) throw Error(fmt::format("{}: expected a JSON object", file));
  std::set<std::string> known = {"format", "method", "factor", "trained_context", "fine_tune"};
  for (const MethodParamInfo& info : method_param_table()) known.emplace(info.key);
  for (const auto& [key, value] : j.items()) {
    if (!known.contains(key)) {
      std::string names;
      for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
      throw Error(fmt::format("{}: unknown key \"{}\" (the keys are {})", file, key, names));
    }
  }
  if (!j.contains("format") || j["format"] != kFormat) {
    throw Error(fmt::format("{}: \"format\" ({}) must be \"{}\"", file,
                            j.contains("format") ? j["format"].dump() : "missing", kFormat));
  }
  if (!j.contains("method") || !j["method"].is_string()) {
    throw Error(fmt::format("{}: \"method\" ({}) must be a method name such as \"yarn\"", file,
                            j.contains("method") ? j["method"].dump() : "missing"));
  }
  RopeSidecar s;
  s.path = path.string();
  s.method = j["method"].get<std::string>();
  RopeSpec spec;
  try {
    set_method(spec, s.method, "method");
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", file, e.what()));
  }
  s.factor = positive_number(j, "factor", file);
  if (s.factor && !method_reads(spec, kParamFactor)) {
    throw Error(
        fmt::format("{}: \"factor\" ({}) has no effect on method {} (it has no factor, or "
                    "derives its own): it must be null",
                    file, *s.factor, s.method));
  }
  for (const MethodParamInfo& info : method_param_table()) {
    const char* key = info.key.data();  // the table's keys are literals
    if (info.number) {
      s.params.*info.number =
          info.positive ? positive_number(j, key, file) : finite_number(j, key, file);
    } else if (j.contains(key) && !j[key].is_null()) {
      if (!j[key].is_boolean()) {
        throw Error(
            fmt::format("{}: \"{}\" ({}) must be true, false or null", file, key, j[key].dump()));
      }
      s.params.truncate = j[key].get<bool>();
    }
  }
  if (const std::vector<std::string> unread =
          unread_method_params(s.params, spec, ParamNames::kKeys);
      !unread.empty()) {
    const std::string& key = unread.front();
    throw Error(fmt::format("{}: \"{}\" ({}) applies to {}, not to method {}; it must be null",
                            file, key, j[key].dump(), methods_reading(method_param_info(key).param),
                            s.method));
  }
  if (j.contains("trained_context") && !j["trained_context"].is_null()) {
    if (!j["trained_context"].is_number_integer() || j["trained_context"].get<std::int64_t>() < 2) {
      throw Error(fmt::format("{}: \"trained_context\" ({}) must be an integer of at least 2", file,
                              j["trained_context"].dump()));
    }
    s.trained_context = j["trained_context"].get<std::int64_t>();
  }
  return s;
}

RopeSpec sidecar_rope_spec(const RopeSidecar& s, const llama::Config& config) {
  try {
    RopeSpec spec = llama::rope_spec(config, s.method, s.factor.value_or(1.0));
    apply_method_params(spec, s.params, ParamNames::kKeys, "method " + s.method);
    return spec;
  } catch (const Error& e) {
    throw Error(fmt::format("RoPE sidecar {}: {}", s.path, e.what()));
  }
}

std::string sidecar_note(const RopeSidecar& s, const std::string& command) {
  std::string what = "--method " + s.method;
  if (s.factor) what += fmt::format(" --factor {}", *s.factor);
  if (!s.params.params_empty()) what += " " + s.params.param_flags();
  return fmt::format(
      "{}: RoPE from {}: {} (the settings the model was fine-tuned with; --method "
      "overrides them)\n",
      command, s.path, what);
}

}  // namespace posenc::cli
