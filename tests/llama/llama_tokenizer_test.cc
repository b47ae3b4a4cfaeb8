// The stories260K tokenizer: the fast merge loop (priority queue) against the plain one (llama2.c's
// rescan) on three whole novels, and hand-checked strings.
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/llama/llama.h"

namespace {

const std::string kShared = std::string(POSENC_SHARED_DIR);

const posenc::llama::Tokenizer& tokenizer() {
  static const posenc::llama::Model m =
      posenc::llama::Model::load(kShared + "/models/stories260K/tinystories_260k_v1.bin");
  return m.tokenizer();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> pieces(const std::vector<std::int32_t>& ids) {
  std::vector<std::string> out;
  for (std::int32_t id : ids) out.push_back(tokenizer().piece(id));
  return out;
}

class WholeNovel : public ::testing::TestWithParam<const char*> {};

TEST_P(WholeNovel, FastEqualsPlainAndDecodesBack) {
  const std::string text = read_text(kShared + "/data/austen/" + GetParam());
  ASSERT_GT(text.size(), 600000u);
  const auto fast = tokenizer().encode(text);
  const auto plain = tokenizer().encode_plain(text);
  ASSERT_EQ(fast.size(), plain.size());
  EXPECT_EQ(fast, plain);
  // Decoding gives the text back with the dummy prefix space in front.
  EXPECT_EQ(tokenizer().decode(fast), " " + text);
  RecordProperty("tokens", std::to_string(fast.size()));
}

INSTANTIATE_TEST_SUITE_P(Austen, WholeNovel,
                         ::testing::Values("prideprejudice.txt", "sensesensibility.txt",
                                           "emma.txt"),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                           std::string n = param_info.param;
                           return n.substr(0, n.find('.'));
                         });

// Expected pieces worked out from the vocabulary (scores are -(rank), so earlier pieces win):
// spaces are "▁" (U+2581), one "▁" is prepended, "\n" has no piece and falls back to <0x0A>.
TEST(Tokenizer, HandCheckedStrings) {
  using V = std::vector<std::string>;
  const std::string sp = "\xe2\x96\x81";
  EXPECT_EQ(pieces(tokenizer().encode("Once upon a time")),
            (V{sp + "Once", sp + "upon", sp + "a", sp + "time"}));
  EXPECT_EQ(tokenizer().encode("Once upon a time"),
            (std::vector<std::int32_t>{403, 407, 261, 378}));
  EXPECT_TRUE(tokenizer().encode("").empty());
  EXPECT_EQ(pieces(tokenizer().encode(" ")),
            (V{sp, sp}));  // the prefix and the space: no "▁▁" piece
  EXPECT_EQ(pieces(tokenizer().encode("a  b")), (V{sp + "a", sp, sp + "b"}));
  EXPECT_EQ(pieces(tokenizer().encode("line\n")), (V{sp + "l", "in", "e", "<0x0A>"}));
  // "oo" is a piece: of the two equal candidates in "ooo" the leftmost merges.
  EXPECT_EQ(pieces(tokenizer().encode("-ooo")), (V{sp, "-", "oo", "o"}));
  // é has a piece; the emoji U+1F600 does not, and falls back to its four UTF-8 bytes.
  EXPECT_EQ(pieces(tokenizer().encode("caf\xc3\xa9 \xf0\x9f\x98\x80")),
            (V{sp + "c", "a", "f", "\xc3\xa9", sp, "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"}));
  // A stray continuation byte is a code point of its own, through the fallback.
  EXPECT_EQ(pieces(tokenizer().encode("a\x80")), (V{sp + "a", "<0x80>"}));
  EXPECT_EQ(tokenizer().decode(tokenizer().encode("Hello world")), " Hello world");
}

TEST(Tokenizer, FastEqualsPlainOnRandomText) {
  // Long runs without byte-fallback symbols, so the plain loop really rescans long sequences.
  std::mt19937 rng(7);
  const std::string alphabet = "aeioulnrst oo ll pp.,'\xc3\xa9";
  for (int trial = 0; trial < 50; ++trial) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 3000);
    for (int i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
    EXPECT_EQ(tokenizer().encode(s), tokenizer().encode_plain(s)) << s.substr(0, 80);
  }
}

TEST(Tokenizer, RefusesAVocabularyWithoutByteFallback) {
  std::vector<std::string> p{"<unk>", "<s>", "</s>", "a"};
  try {
    posenc::llama::Tokenizer t(p, std::vector<float>(p.size(), 0.0f));
    ADD_FAILURE();
  } catch (const posenc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("<0x00>"), std::string::npos) << e.what();
  }
}

}  // namespace
