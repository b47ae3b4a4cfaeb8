// posenc/io/model.h: a model from either file type (config.json or GGUF, by name or by magic), one
// layer type's RoPE, and errors that name the file or the layer type.
#include "posenc/io/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/io/gguf.h"
#include "support/config_test_support.h"
#include "support/gguf_test_support.h"
#include "support/temp_files.h"

namespace posenc {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char* kTag = "posenc_model_test";

std::string error_of_load(const std::string& path, std::string_view layer_type = {}) {
  try {
    load_model(path, layer_type);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string bytes_text(const std::vector<std::uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

void expect_same_spec(const RopeSpec& a, const RopeSpec& b) {
  EXPECT_EQ(method_name(a), method_name(b));
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rotary_dim, b.rotary_dim);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.factor, b.factor);
  EXPECT_EQ(a.original_max_position_embeddings, b.original_max_position_embeddings);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.freq_factors, b.freq_factors);
}

TEST(LoadModel, ConfigJsonAsLoadHfConfig) {
  const std::string path = testing::config_path("llama-3.1-8b.json");
  EXPECT_FALSE(is_gguf_file(path));
  const ModelConfig m = load_model(path);
  const ModelConfig ref = load_hf_config(path);
  EXPECT_EQ(m.source, ref.source);
  EXPECT_EQ(m.model_type, "llama");
  EXPECT_EQ(m.spec.method, Method::kLlama3);
  expect_same_spec(m.spec, ref.spec);
  EXPECT_EQ(m.warnings, ref.warnings);
}

TEST(LoadModel, GgufByExtensionAsLoadGgufModel) {
  const std::string path = testing::gguf_path("stories260K.gguf");
  EXPECT_TRUE(is_gguf_file(path));
  const ModelConfig m = load_model(path);
  const ModelConfig ref = load_gguf_model(path).config;
  EXPECT_EQ(m.source, ref.source);
  EXPECT_EQ(m.model_type, "llama");
  expect_same_spec(m.spec, ref.spec);
}

TEST(LoadModel, GgufByMagicWhateverTheName) {
  const std::string path =
      posenc_test::write_temp_file(kTag, "weights.bin", bytes_text(testing::tiny_llama().bytes()));
  EXPECT_TRUE(is_gguf_file(path));
  const ModelConfig m = load_model(path);
  EXPECT_EQ(m.model_type, "llama");
  EXPECT_EQ(m.spec.head_dim, 8);
  EXPECT_EQ(m.spec.max_position_embeddings, 512);
  // Upper-case extension: GGUF by name even when the bytes are not (the GGUF reader's error).
  const std::string upper = posenc_test::write_temp_file(kTag, "MODEL.GGUF", "{}");
  EXPECT_TRUE(is_gguf_file(upper));
  EXPECT_THAT(error_of_load(upper), HasSubstr(upper));
}

TEST(LoadModel, BadFilesAreRefusedNamingTheFile) {
  const std::string json = posenc_test::write_temp_file(kTag, "broken.json", "{\"head_dim\": 64,");
  EXPECT_THAT(error_of_load(json), HasSubstr("broken.json"));
  const std::string text = posenc_test::write_temp_file(kTag, "notes.txt", "hello");
  EXPECT_FALSE(is_gguf_file(text));
  EXPECT_THAT(error_of_load(text), HasSubstr("notes.txt"));
  std::vector<std::uint8_t> truncated = testing::tiny_llama().bytes();
  truncated.resize(truncated.size() / 2);
  const std::string gguf =
      posenc_test::write_temp_file(kTag, "truncated.gguf", bytes_text(truncated));
  EXPECT_THAT(error_of_load(gguf), HasSubstr("truncated.gguf"));
  EXPECT_THAT(error_of_load("/nonexistent/dir/config.json"),
              HasSubstr("/nonexistent/dir/config.json"));
}

TEST(LoadModel, LayerType) {
  const std::string path = posenc_test::write_temp_file(kTag, "per-layer.json", R"({
    "head_dim": 64, "max_position_embeddings": 8192,
    "rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  const ModelConfig all = load_model(path);
  ASSERT_EQ(all.layer_specs.size(), 2u);
  const ModelConfig sliding = load_model(path, "sliding_attention");
  EXPECT_EQ(sliding.spec.method, Method::kNone);
  EXPECT_EQ(sliding.spec.rope_theta, 10000.0);
  expect_same_spec(sliding.spec, all.layer_specs.at("sliding_attention"));
  EXPECT_EQ(load_model(path, "full_attention").spec.method, Method::kLinear);
  EXPECT_EQ(error_of_load(path, "global"), "layer_type (\"global\") is not a layer type of " +
                                               all.source +
                                               " (it has: full_attention, sliding_attention)");
  EXPECT_EQ(error_of_load(testing::config_path("llama-2-7b.json"), "full_attention"),
            "layer_type (\"full_attention\") is not a layer type of " +
                load_hf_config(testing::config_path("llama-2-7b.json")).source +
                " (it has a single RoPE setup)");
}

TEST(LoadModel, SelectLayerTypeNamesTheField) {
  ModelConfig c = load_hf_config(testing::config_path("llama-2-7b.json"));
  const RopeSpec before = c.spec;
  select_layer_type(c, "");
  expect_same_spec(c.spec, before);
  try {
    select_layer_type(c, "x", "--layer-type");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()),
                AllOf(HasSubstr("--layer-type (\"x\")"), HasSubstr(c.source)));
  }
}

}  // namespace
}  // namespace posenc
