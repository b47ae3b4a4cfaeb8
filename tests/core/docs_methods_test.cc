// docs/design.md §3's trait table lists exactly the registry's methods and traits (spec.h
// MethodInfo). On a mismatch the test prints the table the registry gives, to paste in.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "posenc/core/spec.h"

namespace {

std::string yes(bool b) { return b ? "yes" : "no"; }

std::string engine(const posenc::EngineSupport& e) { return e.supported ? "yes" : "no"; }

std::string reads(const posenc::MethodInfo& m) {
  static constexpr std::pair<unsigned, const char*> kNames[] = {
      {posenc::kParamFactor, "factor"},
      {posenc::kParamOriginalContext, "L"},
      {posenc::kParamMaxContext, "L'"},
      {posenc::kParamYarn, "yarn"},
      {posenc::kParamYarnDims, "truncate"},
      {posenc::kParamAttentionFactor, "attention_factor"},
      {posenc::kParamLlama3, "llama3"},
      {posenc::kParamLongrope, "short/long_factor"},
      {posenc::kParamProportion, "partial_rotary_factor"},
      {posenc::kParamAlpha, "alpha"},
  };
  std::string out;
  unsigned seen = 0;
  for (const auto& [bit, name] : kNames) {
    seen |= bit;
    if (m.reads & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  EXPECT_EQ(m.reads & ~seen, 0u) << m.name << " reads a group this test does not name";
  return out.empty() ? "—" : out;
}

std::string attention(posenc::AttentionRule r) {
  switch (r) {
    case posenc::AttentionRule::kOne:
      return "1";
    case posenc::AttentionRule::kYarn:
      return "yarn";
    case posenc::AttentionRule::kLongrope:
      return "longrope";
  }
  return "?";
}

std::string expected_table() {
  std::string t =
      "| method | reads | factor required | factor = extension ratio | depends on seq_len | "
      "attention factor | "
      "transformers | llama.cpp | vLLM |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const posenc::MethodInfo& m : posenc::methods()) {
    t += "| `" + std::string(m.name) + "` | " + reads(m) + " | " + yes(m.factor_required) + " | " +
         yes(m.factor_is_ratio) + " | " + yes(m.depends_on_seq_len) + " | " +
         attention(m.attention) + " | " + engine(m.transformers) + " | " + engine(m.llama_cpp) +
         " | " + engine(m.vllm) + " |\n";
  }
  return t;
}

TEST(DocsMethods, DesignTraitTableIsTheRegistry) {
  std::ifstream in(std::string(POSENC_SOURCE_DIR) + "/docs/design.md");
  ASSERT_TRUE(in) << "cannot read docs/design.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin =
      "<!-- method-traits: generated from the registry; tests/core/docs_methods_test.cc -->\n";
  const std::string end = "<!-- /method-traits -->";
  const auto a = doc.find(begin);
  const auto b = doc.find(end);
  ASSERT_NE(a, std::string::npos) << "docs/design.md lacks the marker " << begin;
  ASSERT_NE(b, std::string::npos) << "docs/design.md lacks the marker " << end;
  EXPECT_EQ(doc.substr(a + begin.size(), b - a - begin.size()), expected_table());
}

// Every method has a row in §3's formula table too.
TEST(DocsMethods, DesignFormulaTableNamesEveryMethod) {
  std::ifstream in(std::string(POSENC_SOURCE_DIR) + "/docs/design.md");
  std::stringstream ss;
  ss << in.rdbuf();
  for (const posenc::MethodInfo& m : posenc::methods()) {
    if (m.name == "yarn-paper") continue;  // a ramp of yarn, described below the table
    EXPECT_NE(ss.str().find("| `" + std::string(m.name) + "` "), std::string::npos)
        << m.name << " has no row in docs/design.md §3's formula table (\"| `name` ... |\")";
  }
}

}  // namespace
