// Every command that takes method flags accepts and refuses the same (method, parameter flag)
// pairs, and the accepted ones are exactly what the method registry (spec.h MethodInfo) says.
// `apply` takes --rope-type and its spec flags; inspect, compare, doctor, plot and report take
// --scaling and the extension flags (extend.h). One CLI run per (command, method, flag), except
// `report` (seconds per page): every refused pair, and one accepted flag per method.
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/method_params.h"
#include "posenc/core/spec.h"
#include "posenc/io/npy.h"
#include "support/cli_runner.h"
#include "support/temp_files.h"

namespace {

using posenc::MethodInfo;
using posenc::MethodParam;

constexpr const char* kTag = "posenc_method_flags";

posenc_cli::CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, kTag);
}

std::string q_path() {
  static const std::string path = [] {
    const auto p = posenc_test::temp_dir(kTag) / "q.npy";
    std::vector<float> q(4 * 1 * 8, 0.5f);
    std::vector<std::byte> bytes(q.size() * 4);
    std::memcpy(bytes.data(), q.data(), bytes.size());
    const std::vector<std::int64_t> shape = {4, 1, 8};
    posenc::write_npy(p, "<f4", shape, bytes);
    return p.string();
  }();
  return path;
}

struct Flag {
  std::string name;
  std::string value;
  unsigned param;  // MethodParam bits; 0: every method reads it
};

// apply's parameter flags, with a legal value for a head_dim of 8 (4 pairs).
const std::vector<Flag> kApplyFlags = {
    {"--rope-theta", "20000", 0},
    {"--partial-rotary-factor", "1", 0},
    {"--factor", "2", posenc::kParamFactor},
    {"--original-max-position-embeddings", "64", posenc::kParamOriginalContext},
    {"--max-position-embeddings", "64", posenc::kParamMaxContext},
    {"--attention-factor", "1.5", posenc::kParamAttentionFactor},
    {"--mscale", "1", posenc::kParamYarn},
    {"--mscale-all-dim", "1", posenc::kParamYarn},
    {"--beta-fast", "32", posenc::kParamYarn},
    {"--beta-slow", "1", posenc::kParamYarn},
    {"--extrapolation-factor", "1", posenc::kParamYarn},
    {"--truncate", "false", posenc::kParamYarnDims},
    {"--low-freq-factor", "1", posenc::kParamLlama3},
    {"--high-freq-factor", "4", posenc::kParamLlama3},
    {"--short-factor", "1,1,1,1", posenc::kParamLongrope},
    {"--long-factor", "2,2,2,2", posenc::kParamLongrope},
    {"--alpha", "2", posenc::kParamAlpha},
};

// The extension flags that set a method's parameter (--factor and --target-context set the
// context to reach, for every method but none: checked on their own below).
const std::vector<Flag> kExtensionFlags = {
    {"--rope-theta", "20000", 0},
    {"--attention-factor", "1.5", posenc::kParamAttentionFactor},
    {"--mscale", "1", posenc::kParamYarn},
    {"--mscale-all-dim", "1", posenc::kParamYarn},
    {"--beta-fast", "32", posenc::kParamYarn},
    {"--beta-slow", "1", posenc::kParamYarn},
    {"--extrapolation-factor", "1", posenc::kParamYarn},
    {"--truncate", "false", posenc::kParamYarnDims},
    {"--low-freq-factor", "1", posenc::kParamLlama3},
    {"--high-freq-factor", "4", posenc::kParamLlama3},
    {"--alpha", "2", posenc::kParamAlpha},
};

// A valid spec of each method from apply's flags alone (head_dim 8).
std::map<std::string, std::string> apply_base(const MethodInfo& m) {
  std::map<std::string, std::string> b;
  if (m.reads_param(posenc::kParamFactor)) b["--factor"] = "4";
  if (m.reads_param(posenc::kParamOriginalContext)) b["--original-max-position-embeddings"] = "64";
  if (m.reads_param(posenc::kParamMaxContext)) b["--max-position-embeddings"] = "64";
  if (m.reads_param(posenc::kParamLongrope)) {
    b["--short-factor"] = "1,1,1,1";
    b["--long-factor"] = "2,2,2,2";
  }
  if (m.reads_param(posenc::kParamAlpha)) b["--alpha"] = "4";
  return b;
}

// The model and flags that give each method through the extension flags.
std::string extension_base(const MethodInfo& m, const std::string& tested = "") {
  const std::string name(m.name);
  if (name == "longrope") return "--preset phi-3-mini-128k";
  if (name == "proportional") {
    return posenc_test::write_temp_file(
        kTag, "proportional.json",
        R"({"head_dim": 256, "max_position_embeddings": 8192, "rope_parameters": {
        "rope_type": "proportional", "factor": 8.0, "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}})");
  }
  std::string out = "--preset llama-2-7b --scaling " + name;
  if (m.factor_required) out += " --factor 4";
  if (m.reads_param(posenc::kParamAlpha) && tested != "--alpha") out += " --alpha 4";
  return out;
}

bool registry_reads(const MethodInfo& m, unsigned param) {
  if (param == 0) return true;
  posenc::RopeSpec spec;
  posenc::set_method(spec, m.name);
  return posenc::method_reads(spec, static_cast<MethodParam>(param));
}

// Whether the run refused `flag` for the method not reading it (apply's and extend's wording);
// any other outcome must be a success.
bool refused(const posenc_cli::CliRun& r, const Flag& f, const std::string& context) {
  const std::string given = f.name + " (" + f.value;
  const bool apply_words = r.err.find(given) != std::string::npos &&
                           r.err.find("does not read this") != std::string::npos;
  const bool extend_words = r.err.find(given + ") applies to") != std::string::npos;
  if (apply_words || extend_words) {
    EXPECT_NE(r.status, 0) << context;
    return true;
  }
  EXPECT_EQ(r.status, 0) << context << "\n" << r.err;
  return false;
}

TEST(MethodFlags, ApplyAcceptsExactlyWhatTheRegistrySays) {
  for (const MethodInfo& m : posenc::methods()) {
    for (const Flag& f : kApplyFlags) {
      std::map<std::string, std::string> flags = apply_base(m);
      flags[f.name] = f.value;
      std::string args = "apply --q " + q_path() + " --positions-range 0 -o " +
                         (posenc_test::temp_dir(kTag) / "out.npy").string() + " --rope-type " +
                         std::string(m.name);
      for (const auto& [k, v] : flags) args += " " + k + " " + v;
      const bool expected = registry_reads(m, f.param);
      EXPECT_EQ(!refused(posenc(args), f, args), expected)
          << m.name << " " << f.name << ": posenc " << args;
    }
  }
}

TEST(MethodFlags, EveryExtensionCommandAgreesWithApplyAndTheRegistry) {
  const std::string out = (posenc_test::temp_dir(kTag) / "out").string();
  const std::vector<std::string> commands = {"inspect", "compare", "doctor",
                                             "plot wavelengths -o " + out + ".svg",
                                             "report -o " + out + ".html"};
  for (const MethodInfo& m : posenc::methods()) {
    bool report_accepted = false;
    for (const Flag& f : kExtensionFlags) {
      const bool expected = registry_reads(m, f.param);
      for (const std::string& cmd : commands) {
        if (cmd.starts_with("report") && expected && report_accepted) continue;  // seconds a page
        const std::string args =
            cmd + " " + extension_base(m, f.name) + " " + f.name + " " + f.value;
        EXPECT_EQ(!refused(posenc(args), f, args), expected)
            << m.name << " " << f.name << ": posenc " << args;
        if (cmd.starts_with("report") && expected) report_accepted = true;
      }
    }
  }
}

TEST(MethodFlags, ExtensionTargetFlagsNeedAScalingMethod) {
  for (const MethodInfo& m : posenc::methods()) {
    for (const std::string flag : {"--factor 2", "--target-context 8192"}) {
      // The factor of a method that needs one is in the base already: give only the target.
      std::string base = extension_base(m);
      if (const auto at = base.find(" --factor 4"); at != std::string::npos) base.erase(at, 11);
      const std::string args = "inspect " + base + " " + flag;
      const posenc_cli::CliRun r = posenc(args);
      const bool none = m.method == posenc::Method::kNone;
      EXPECT_EQ(r.status != 0, none) << args << "\n" << r.err;
      if (none) {
        EXPECT_NE(r.err.find("needs a scaling method"), std::string::npos) << r.err;
      }
    }
  }
}

// eval and generate take llama::Model::rope_spec's methods and refuse the options a method does not
// read, by the same registry: --factor (the factor), every method parameter of
// core/method_params.h's table but ntk-alpha's --alpha (with a value valid beside the defaults),
// and --step (a method that depends on the length).
TEST(MethodFlags, EvalAndGenerateAgreeWithTheRegistry) {
  const std::string model =
      std::string(POSENC_SHARED_DIR) + "/models/stories260K/tinystories_260k_v1.bin";
  const std::string text = std::string(POSENC_SHARED_DIR) + "/data/austen/prideprejudice.txt";
  struct Option {
    std::string flag;
    std::function<bool(const posenc::RopeSpec&)> reads;
    const char* refusal;
  };
  std::vector<Option> options = {
      {"--factor 2",
       [](const posenc::RopeSpec& s) { return posenc::method_reads(s, posenc::kParamFactor); },
       "has no effect"},
      {"--step 32", [](const posenc::RopeSpec& s) { return posenc::depends_on_length(s); },
       "has no effect"},
  };
  const std::map<std::string, std::string> values = {
      {"beta_fast", "16"},      {"beta_slow", "2"},        {"attention_factor", "1.5"},
      {"mscale", "1"},          {"mscale_all_dim", "1"},   {"extrapolation_factor", "0.5"},
      {"low_freq_factor", "2"}, {"high_freq_factor", "8"}, {"truncate", "false"}};
  for (const posenc::MethodParamInfo& info : posenc::method_param_table()) {
    if (info.key == "alpha") continue;
    const posenc::MethodParam param = info.param;
    options.push_back(
        {std::string(info.flag) + " " + values.at(std::string(info.key)),
         [param](const posenc::RopeSpec& s) { return posenc::method_reads(s, param); },
         "applies to"});
  }
  for (const std::string method :
       {"none", "linear", "ntk", "yarn", "yarn-paper", "dynamic", "dynamic-yarn", "llama3"}) {
    posenc::RopeSpec spec;
    posenc::set_method(spec, method);
    for (const Option& o : options) {
      const std::string args = "eval --model " + model + " --text " + text +
                               " --ctx 64 --max-tokens 64 --method " + method + " " + o.flag;
      const posenc_cli::CliRun r = posenc(args);
      EXPECT_EQ(r.status == 0, o.reads(spec)) << "posenc " << args << "\n" << r.err;
      if (r.status != 0) {
        EXPECT_NE(r.err.find(o.refusal), std::string::npos) << "posenc " << args << "\n" << r.err;
      }
    }
    const std::string args = "generate --model " + model +
                             " --prompt \"Once\" --tokens 1 --method " + method + " --factor 2";
    const posenc_cli::CliRun r = posenc(args);
    EXPECT_EQ(r.status == 0, posenc::method_reads(spec, posenc::kParamFactor))
        << "posenc " << args << "\n"
        << r.err;
  }
}

}  // namespace
