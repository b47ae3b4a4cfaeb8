// posenc/io/gguf.h: the GGUF reader. Two kinds of evidence (the mapping to a ModelConfig is
// gguf_mapping_test.cc):
//  - real files written by llama.cpp's converter (../shared/testdata/gguf); their values were
//    read once by an independent 30-line Python reader written from the format description
//    (struct.unpack over the header, key-value pairs and tensor infos), and are written beside
//    each test;
//  - generated files with every value type, and malformed files, one test each, checking that the
//    message names the byte, field and value.
#include "posenc/io/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/ggml.h"
#include "posenc/io/config.h"
#include "support/gguf_test_support.h"

namespace posenc {
namespace {

using ::testing::AllOf;
using testing::config_path;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::error_of;
using testing::gguf_path;
using testing::GgufWriter;
using ::testing::HasSubstr;
using testing::HasWarning;
using ::testing::IsEmpty;
using testing::model_of;
using ::testing::Not;
using testing::tiny_llama;
using W = GgufWriter;

// ---------------------------------------------------------------------------------------------
// Real files

TEST(GgufReal, LlamaSpmVocab) {
  // Read by the Python reader: version 3, 0 tensors, 22 pairs; llama.context_length u32 4096,
  // llama.embedding_length u32 4096, llama.attention.head_count u32 32,
  // llama.rope.dimension_count u32 128, no llama.rope.freq_base, no rope.scaling keys.
  const GgufFile f = read_gguf(gguf_path("ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.metadata.size(), 22u);
  EXPECT_THAT(f.tensors, IsEmpty());
  EXPECT_EQ(f.file_size, 723869u);
  ASSERT_NE(f.find("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->count, 32000u);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->element_type, GgufType::kString);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strings().at(1), "<s>");
  EXPECT_EQ(f.find("tokenizer.ggml.scores")->element_type, GgufType::kFloat32);
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->number_at(1), 3.0);  // i32 [2, 3, 3, ...]
  EXPECT_EQ(f.find("tokenizer.ggml.add_bos_token")->describe(), "bool true");

  const GgufModel m = gguf_model(f);
  const RopeSpec& s = m.config.spec;
  EXPECT_EQ(m.config.model_type, "llama");
  EXPECT_EQ(s.method, Method::kNone);
  EXPECT_EQ(s.head_dim, 128);  // 4096 / 32
  EXPECT_EQ(s.rotary_dim, 128);
  EXPECT_EQ(s.layout, Layout::kInterleaved);  // LLAMA_ROPE_TYPE_NORM
  EXPECT_EQ(s.rope_theta, 10000.0);           // llama.cpp's default
  EXPECT_EQ(s.max_position_embeddings, 4096);
  EXPECT_THAT(m.config.warnings, IsEmpty());
  EXPECT_THAT(m.config.ignored_keys, Contains("tokenizer.ggml.tokens"));
  EXPECT_THAT(m.config.ignored_keys, Not(Contains("llama.context_length")));
  EXPECT_THAT(m.notes, HasWarning("rope.freq_base is not set"));
  EXPECT_EQ(m.ggml.n_dims, 128);
  EXPECT_EQ(m.ggml.mode, GgmlMode::kNormal);
  EXPECT_EQ(m.ggml.n_ctx_orig, 4096);
  EXPECT_EQ(m.ggml.freq_base, 10000.0f);
  EXPECT_EQ(m.ggml.freq_scale, 1.0f);
  EXPECT_EQ(m.ggml.ext_factor, 0.0f);
  EXPECT_EQ(m.ggml.attn_factor, 1.0f);
  EXPECT_THAT(m.ggml.freq_factors, IsEmpty());
}

TEST(GgufReal, Stories260KTensors) {
  // Python reader: 47 tensors, 19 pairs; llama.context_length 512, embedding_length 64,
  // head_count 8, rope.dimension_count 8, rope.freq_base f32 10000; tensor infos end at byte
  // 14086, so the data section starts at 14112 (next multiple of 32); token_embd.weight is
  // f32 [64, 512] at offset 0, output_norm.weight f32 [64] at 1039872, and 14112 + 1039872 +
  // 64 * 4 = 1054240 is the file size.
  const GgufFile f = read_gguf(gguf_path("stories260K.gguf"));
  EXPECT_EQ(f.tensors.size(), 47u);
  EXPECT_EQ(f.alignment, 32u);
  EXPECT_EQ(f.data_offset, 14112u);
  EXPECT_EQ(f.file_size, 1054240u);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_THAT(embd->ne, ElementsAre(64u, 512u));
  EXPECT_EQ(embd->ggml_type, 0u);
  EXPECT_EQ(embd->offset, 0u);
  EXPECT_EQ(embd->n_bytes, 64u * 512u * 4u);
  const GgufTensorInfo* norm = f.find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->offset, 1039872u);
  EXPECT_EQ(f.data_offset + norm->offset + norm->n_bytes, f.file_size);
  EXPECT_TRUE(f.rope_tensors.empty());

  const GgufModel m = gguf_model(f);
  EXPECT_EQ(m.config.spec.head_dim, 8);
  EXPECT_EQ(m.config.spec.rotary_dim, 8);
  EXPECT_EQ(m.config.spec.rope_theta, 10000.0);
  EXPECT_EQ(m.config.spec.max_position_embeddings, 512);
  EXPECT_EQ(m.config.spec.layout, Layout::kInterleaved);
  EXPECT_THAT(m.config.warnings, IsEmpty());
}

TEST(GgufReal, Phi3VocabIsHalfSplit) {
  // Python reader: phi3.context_length 4096, rope.scaling.original_context_length 4096,
  // embedding_length 3072, head_count 32, rope.dimension_count 96, rope.freq_base f32 10000.
  const GgufModel m = load_gguf_model(gguf_path("ggml-vocab-phi-3.gguf"));
  const RopeSpec& s = m.config.spec;
  EXPECT_EQ(m.config.model_type, "phi3");
  EXPECT_EQ(s.layout, Layout::kHalfSplit);  // LLAMA_ROPE_TYPE_NEOX
  EXPECT_EQ(m.ggml.mode, GgmlMode::kNeox);
  EXPECT_EQ(s.head_dim, 96);
  EXPECT_EQ(s.rotary_dim, 96);
  EXPECT_EQ(s.method, Method::kNone);
  EXPECT_EQ(s.max_position_embeddings, 4096);
  EXPECT_EQ(m.ggml.n_ctx_orig, 4096);
  // The key is set, so the spec has it whatever the scaling type (inspect printed "not set").
  EXPECT_EQ(s.original_max_position_embeddings, 4096);
  EXPECT_THAT(m.config.warnings, IsEmpty());
}

TEST(GgufReal, GptNeoxVocabRotatesAQuarter) {
  // Python reader: gptneox.context_length 2048, embedding_length 6144, head_count 64,
  // rope.dimension_count 24 (rotary_pct 0.25 of 96), no rope.freq_base.
  const GgufModel m = load_gguf_model(gguf_path("ggml-vocab-gpt-neox.gguf"));
  const RopeSpec& s = m.config.spec;
  EXPECT_EQ(m.config.model_type, "gptneox");
  EXPECT_EQ(s.layout, Layout::kHalfSplit);
  EXPECT_EQ(s.head_dim, 96);
  EXPECT_EQ(s.rotary_dim, 24);
  EXPECT_EQ(s.max_position_embeddings, 2048);
  EXPECT_EQ(m.ggml.n_dims, 24);
  // pythia's HF class (GPTNeoX) also rotates head_dim * rotary_pct half-split dims.
  const Frequencies f = compute_frequencies(s);
  EXPECT_EQ(f.pair_count(), 12);
}

TEST(GgufReal, MissingFileNamesThePath) {
  try {
    read_gguf(gguf_path("no-such-file.gguf"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("no-such-file.gguf"), HasSubstr("cannot read")));
  }
  EXPECT_THROW(read_gguf(std::string(POSENC_SHARED_DIR) + "/testdata/gguf"), Error);
}

// ---------------------------------------------------------------------------------------------
// Generated files: every value type, nested arrays, versions 2 and 3

TEST(GgufValues, EveryTypeInVersions2And3) {
  for (std::uint32_t version : {2u, 3u}) {
    GgufWriter w(version);
    w.kv("a.u8", W::u8(200))
        .kv("a.i8", W::i8(-100))
        .kv("a.u16", W::u16(60000))
        .kv("a.i16", W::i16(-30000))
        .kv("a.u32", W::u32(4000000000u))
        .kv("a.i32", W::i32(-2000000000))
        .kv("a.f32", W::f32(0.1f))
        .kv("a.bool", W::boolean(false))
        .kv("a.str", W::str("h\xc3\xa9llo"))
        .kv("a.u64", W::u64(std::numeric_limits<std::uint64_t>::max()))
        .kv("a.i64", W::i64(std::numeric_limits<std::int64_t>::min()))
        .kv("a.f64", W::f64(0.1))
        .kv("a.arr", W::array(5, {W::i32(-1), W::i32(7)}))
        .kv("a.empty", W::array(8, {}));
    const GgufFile f = parse_gguf(w.bytes(), "t.gguf");
    EXPECT_EQ(f.version, version);
    EXPECT_EQ(f.find("a.u8")->uint_value, 200u);
    EXPECT_EQ(f.find("a.i8")->int_value, -100);
    EXPECT_EQ(f.find("a.u16")->as_integer(), 60000);
    EXPECT_EQ(f.find("a.i16")->as_integer(), -30000);
    EXPECT_EQ(f.find("a.u32")->as_integer(), 4000000000);
    EXPECT_EQ(f.find("a.i32")->as_integer(), -2000000000);
    EXPECT_EQ(f.find("a.f32")->float_value, static_cast<double>(0.1f));  // widened exactly
    EXPECT_EQ(f.find("a.bool")->describe(), "bool false");
    EXPECT_EQ(f.find("a.str")->string_value, "h\xc3\xa9llo");
    EXPECT_EQ(f.find("a.str")->describe(), "str \"h\\xc3\\xa9llo\"");
    EXPECT_EQ(f.find("a.u64")->as_integer(), std::nullopt);  // above INT64_MAX
    EXPECT_EQ(f.find("a.u64")->describe(), "u64 18446744073709551615");
    EXPECT_EQ(f.find("a.i64")->as_integer(), std::numeric_limits<std::int64_t>::min());
    EXPECT_EQ(f.find("a.f64")->float_value, 0.1);
    EXPECT_EQ(f.find("a.f64")->describe(), "f64 0.1");
    const GgufValue* arr = f.find("a.arr");
    EXPECT_EQ(arr->describe(), "arr[i32] of 2");
    EXPECT_EQ(arr->number_at(0), -1.0);
    EXPECT_EQ(arr->number_at(1), 7.0);
    EXPECT_EQ(arr->number_at(2), std::nullopt);
    EXPECT_EQ(f.find("a.empty")->count, 0u);
    EXPECT_THAT(f.find("a.empty")->strings(), IsEmpty());
    for (const auto& [key, v] : f.metadata) EXPECT_FALSE(v.describe().empty()) << key;
  }
}

TEST(GgufValues, NestedArrays) {
  GgufWriter w;
  w.kv("n.strings", W::array(8, {W::str("a"), W::str(""), W::str("ccc")}))
      .kv("n.nested", W::array(9, {W::array(0, {W::u8(1), W::u8(2)}), W::array(8, {W::str("x")}),
                                   W::array(9, {W::array(12, {W::f64(2.5)})})}));
  const GgufFile f = parse_gguf(w.bytes(), "t.gguf");
  EXPECT_THAT(f.find("n.strings")->strings(), ElementsAre("a", "", "ccc"));
  const std::vector<GgufValue> outer = f.find("n.nested")->arrays();
  ASSERT_EQ(outer.size(), 3u);
  EXPECT_EQ(outer[0].describe(), "arr[u8] of 2");
  EXPECT_EQ(outer[0].number_at(1), 2.0);
  EXPECT_THAT(outer[1].strings(), ElementsAre("x"));
  const std::vector<GgufValue> inner = outer[2].arrays();
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(inner[0].number_at(0), 2.5);
}

TEST(GgufValues, NestingDeeperThanTheLimitIsRefused) {
  W::Value v = W::array(0, {});
  for (int i = 1; i < kGgufMaxArrayDepth; ++i) v = W::array(9, {v});
  EXPECT_NO_THROW(parse_gguf(GgufWriter().kv("deep", v).bytes())) << "depth " << kGgufMaxArrayDepth;
  v = W::array(9, {v});
  EXPECT_THAT(error_of(GgufWriter().kv("deep", v).bytes()),
              AllOf(HasSubstr("metadata key #0 (\"deep\")"), HasSubstr("nested deeper than 8")));
}

TEST(GgufValues, AlignmentKey) {
  GgufWriter w = tiny_llama();
  w.kv("general.alignment", W::u32(64)).alignment(64).tensor_f32("x.weight", {1, 2, 3});
  const GgufFile f = parse_gguf(w.bytes(), "t.gguf");
  EXPECT_EQ(f.alignment, 64u);
  EXPECT_EQ(f.data_offset % 64, 0u);
}

// ---------------------------------------------------------------------------------------------
// Malformed files: one test each; the message names the byte, the field and the value.

TEST(GgufMalformed, BadMagic) {
  EXPECT_EQ(error_of(GgufWriter().magic("GGML").bytes()),
            "t.gguf: byte 0: magic (\"GGML\") is not \"GGUF\" (not a GGUF file)");
  EXPECT_EQ(error_of({'G', 'G'}),
            "t.gguf: byte 0: the file is 2 bytes long, too short for the magic \"GGUF\" (not a "
            "GGUF file)");
  EXPECT_THAT(error_of(GgufWriter().magic(std::string("\x00\x01GU", 4)).bytes()),
              HasSubstr("magic (\"\\x00\\x01GU\")"));
}

TEST(GgufMalformed, Version1IsUnsupported) {
  EXPECT_THAT(error_of(GgufWriter(1).bytes()),
              AllOf(HasSubstr("t.gguf: byte 4: version (1) is unsupported"),
                    HasSubstr("versions 2 and 3")));
}

TEST(GgufMalformed, Version4IsUnsupported) {
  EXPECT_EQ(error_of(GgufWriter(4).bytes()),
            "t.gguf: byte 4: version (4) is unsupported: this reader reads versions 2 and 3");
  EXPECT_THAT(error_of(GgufWriter(0x03000000).bytes()), HasSubstr("big-endian"));
}

TEST(GgufMalformed, EveryTruncationIsAnError) {
  GgufWriter w = tiny_llama();
  w.kv("a.arr", W::array(8, {W::str("x"), W::str("yz")}))
      .kv("a.nested", W::array(9, {W::array(4, {W::u32(1)})}))
      .kv("a.f64", W::f64(1.5))
      .tensor_f32("rope_freqs.weight", {1, 1, 2, 2});
  const std::vector<std::uint8_t> full = w.bytes();
  ASSERT_EQ(error_of(full), "(no error)");
  // The file must hold every byte up to the end of the last tensor's data; the padding after
  // it is optional.
  const GgufFile f = parse_gguf(full);
  const std::uint64_t needed = f.data_offset + f.tensors.back().offset + f.tensors.back().n_bytes;
  ASSERT_LT(needed, full.size());
  EXPECT_EQ(error_of(std::vector<std::uint8_t>(full.begin(),
                                               full.begin() + static_cast<std::ptrdiff_t>(needed))),
            "(no error)");
  for (std::size_t n = 0; n < needed; ++n) {
    const std::vector<std::uint8_t> prefix(full.begin(),
                                           full.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string e = error_of(prefix);
    EXPECT_THAT(e, HasSubstr("t.gguf: byte ")) << "prefix of " << n << " bytes: " << e;
  }
}

TEST(GgufMalformed, CountsPastTheEnd) {
  // 2^60 strings in a small file: refused before anything is allocated.
  GgufWriter w;
  w.kv("general.architecture", W::str("llama"))
      .kv("a.huge", W::array(8, {}, std::uint64_t{1} << 60));
  const std::vector<std::uint8_t> bytes = w.bytes();
  ASSERT_LT(bytes.size(), 1024u);
  EXPECT_THAT(error_of(bytes),
              AllOf(HasSubstr("metadata key #1 (\"a.huge\"): value count (1152921504606846976) str "
                              "elements of at least 8 bytes each cannot fit in the 0 bytes left"),
                    HasSubstr("byte 91:")));
  EXPECT_THAT(
      error_of(GgufWriter().kv_count(std::uint64_t{1} << 60).bytes()),
      HasSubstr(
          "byte 16: metadata_kv_count (1152921504606846976) key-value pairs of at least 14 bytes"));
  EXPECT_THAT(error_of(GgufWriter().tensor_count(~std::uint64_t{0}).bytes()),
              HasSubstr("byte 8: tensor_count (18446744073709551615) tensor infos"));
  EXPECT_THAT(
      error_of(GgufWriter().kv("a", W::array(6, {W::f32(1)}, 2)).bytes()),
      HasSubstr(
          "value count (2) f32 elements of at least 4 bytes each cannot fit in the 4 bytes left"));
  EXPECT_THAT(error_of(GgufWriter().kv("a", W::array(9, {}, std::uint64_t{1} << 62)).bytes()),
              HasSubstr("arr elements of at least 12 bytes"));
}

TEST(GgufMalformed, StringLengthPastTheEnd) {
  std::vector<std::uint8_t> value;
  GgufWriter::put(value, 1000, 8);
  value.push_back('x');
  EXPECT_EQ(
      error_of(GgufWriter().raw_kv("k", 8, value).bytes()),
      "t.gguf: byte 37: metadata key #0 (\"k\"): value length (1000) runs past the end of the file "
      "(1 bytes left)");
  std::vector<std::uint8_t> key;
  GgufWriter::put(key, ~std::uint64_t{0}, 8);
  std::vector<std::uint8_t> bytes = GgufWriter().kv_count(1).bytes();
  bytes.insert(bytes.end(), key.begin(), key.end());
  bytes.resize(bytes.size() + 16);  // enough for the count check: the length is what fails
  EXPECT_THAT(error_of(bytes),
              HasSubstr("byte 24: metadata key #0 length (18446744073709551615) runs past"));
  EXPECT_THAT(error_of(GgufWriter().kv("", W::u64(1)).bytes()),
              HasSubstr("metadata key #0: the key is empty"));
}

TEST(GgufMalformed, UnknownValueType) {
  EXPECT_EQ(error_of(GgufWriter().raw_kv("k", 13, {1, 2, 3, 4}).bytes()),
            "t.gguf: byte 33: metadata key #0 (\"k\"): value type (13) is not a GGUF type (0..12)");
  EXPECT_THAT(error_of(GgufWriter().kv("k", W::array(99, {})).bytes()),
              HasSubstr("value element type (99) is not a GGUF type"));
  EXPECT_THAT(error_of(GgufWriter().kv("k", W::boolean(true)).raw_kv("b", 7, {2}).bytes()),
              HasSubstr("metadata key #1 (\"b\"): value (bool 2) must be 0 or 1"));
  EXPECT_THAT(
      error_of(GgufWriter().raw_kv("b", 9, {7, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 5}).bytes()),
      HasSubstr("(\"b\"): value[1] (bool 5) must be 0 or 1"));
}

TEST(GgufMalformed, UnknownGgmlType) {
  EXPECT_THAT(
      error_of(tiny_llama().tensor("t", {4}, 4, std::vector<std::uint8_t>(16)).bytes()),
      HasSubstr("tensor info #0 (\"t\"): ggml_type (4) is not a ggml type this reader knows"));
  EXPECT_THAT(error_of(tiny_llama().tensor("t", {4}, 1000, std::vector<std::uint8_t>(16)).bytes()),
              HasSubstr("ggml_type (1000)"));
  // q4_0 packs 32 elements per block.
  EXPECT_THAT(error_of(tiny_llama().tensor("q", {16}, 2, std::vector<std::uint8_t>(18)).bytes()),
              HasSubstr("ne[0] (16) is not a multiple of the q4_0 block size (32)"));
  EXPECT_EQ(error_of(tiny_llama().tensor("q", {64, 2}, 2, std::vector<std::uint8_t>(72)).bytes()),
            "(no error)");
}

TEST(GgufMalformed, TooManyDims) {
  EXPECT_THAT(
      error_of(tiny_llama().tensor("t", {1, 1, 1, 1, 1}, 0, std::vector<std::uint8_t>(4)).bytes()),
      HasSubstr("tensor info #0 (\"t\"): n_dims (5) is more than GGML_MAX_DIMS (4)"));
}

TEST(GgufMalformed, DimsWhoseProductOverflows) {
  const std::uint64_t big = std::uint64_t{1} << 32;
  EXPECT_THAT(error_of(tiny_llama().tensor("t", {big, big}, 0, {}).bytes()),
              HasSubstr("tensor info #0 (\"t\"): the element count of shape (4294967296, "
                        "4294967296, ...) overflows"));
  EXPECT_THAT(error_of(tiny_llama().tensor("t", {~std::uint64_t{0}}, 0, {}).bytes()),
              HasSubstr("ne[0] (18446744073709551615) is above 2^63 - 1"));
  // 2^62 f64 elements: the element count fits, the bytes do not.
  EXPECT_THAT(error_of(tiny_llama().tensor("t", {std::uint64_t{1} << 62}, 28, {}).bytes()),
              HasSubstr("the size in bytes of 4611686018427387904 f64 elements overflows 64 bits"));
}

TEST(GgufMalformed, TensorDataPastTheEnd) {
  EXPECT_THAT(error_of(tiny_llama().tensor("t", {1000}, 0, std::vector<std::uint8_t>(16)).bytes()),
              AllOf(HasSubstr("tensor \"t\": its data (offset 0, 4000 bytes) runs past the end of "
                              "the data section"),
                    HasSubstr("t.gguf: byte ")));
  EXPECT_THAT(error_of(tiny_llama().tensor("t", {4}, 0, {}, std::uint64_t{1} << 40).bytes()),
              HasSubstr("its data (offset 1099511627776, 16 bytes) runs past the end"));
  // A file that ends inside the padding before the data section.
  const std::vector<std::uint8_t> bytes = tiny_llama().tensor("t", {0}, 0, {}).bytes();
  const std::uint64_t data_offset = parse_gguf(bytes).data_offset;
  ASSERT_EQ(data_offset % 32, 0u);
  std::vector<std::string> errors;
  for (std::uint64_t n = data_offset - 31; n < data_offset; ++n) {
    errors.push_back(error_of(
        std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n))));
  }
  EXPECT_THAT(errors, Contains(HasSubstr("starts past the end of the file")));
}

TEST(GgufMalformed, MisalignedTensorOffset) {
  EXPECT_THAT(
      error_of(tiny_llama().tensor("t", {4}, 0, std::vector<std::uint8_t>(16), 8).bytes()),
      HasSubstr("tensor info #0 (\"t\"): offset (8) is not a multiple of the alignment (32)"));
  EXPECT_THAT(error_of(tiny_llama().kv("general.alignment", W::u32(48)).bytes()),
              HasSubstr("general.alignment (u32 48) must be a u32 power of two"));
  EXPECT_THAT(error_of(tiny_llama().kv("general.alignment", W::u64(32)).bytes()),
              HasSubstr("general.alignment (u64 32) must be a u32 power of two"));
}

TEST(GgufMalformed, DuplicateKey) {
  EXPECT_THAT(
      error_of(tiny_llama().kv("llama.context_length", W::u32(4096)).bytes()),
      HasSubstr(
          "metadata key #6 (\"llama.context_length\"): duplicate key \"llama.context_length\""));
}

TEST(GgufMalformed, DuplicateTensorName) {
  EXPECT_THAT(error_of(tiny_llama().tensor_f32("a", {1}).tensor_f32("a", {2}).bytes()),
              HasSubstr("tensor info #1 (\"a\"): duplicate tensor name \"a\""));
}

}  // namespace
}  // namespace posenc
