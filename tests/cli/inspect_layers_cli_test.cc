// `posenc inspect --layer N` and the per-layer summary (Gemma 3, Llama 4), `--dca-position`
// (Qwen2.5-1M), and the new doctor findings and compare notes of issue 12 item 6, run through
// the tool on the presets.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cli_expect.h"
#include "support/cli_runner.h"

namespace {

using posenc_cli::CliRun;
using posenc_cli::expect_refused;
using ::testing::HasSubstr;
using ::testing::Not;

CliRun posenc(const std::string& args) {
  return posenc_cli::run(POSENC_CLI, args, "inspect_layers_cli_test");
}

TEST(InspectLayers, PlainInspectSummarisesTheLayers) {
  const CliRun r = posenc("inspect --preset llama-4-scout");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("layers                    48"));
  EXPECT_THAT(r.out, HasSubstr("36 layers, RoPE llama3 theta 500000 factor 16: 0-2, 4-6"));
  EXPECT_THAT(r.out, HasSubstr("12 layers, no RoPE (NoPE): 3, 7, 11"));
  EXPECT_THAT(r.out, HasSubstr("chunked attention         8192 tokens"));
  EXPECT_THAT(r.out, HasSubstr("log1p(floor((pos + 1) / 8192)) * 0.1 + 1"));
  const CliRun g = posenc("inspect --preset gemma-3-27b");
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_THAT(g.out, HasSubstr("52 layers, RoPE default theta 10000: 0-4, 6-10"));
  EXPECT_THAT(g.out, HasSubstr("10 layers, RoPE linear theta 1000000 factor 8: 5, 11, 17"));
}

TEST(InspectLayers, LayerNShowsThatLayersRope) {
  const CliRun local = posenc("inspect --preset gemma-3-27b --layer 0");
  ASSERT_EQ(local.status, 0) << local.err;
  EXPECT_THAT(local.out, HasSubstr("layer 0 sliding_attention"));
  EXPECT_THAT(local.out, HasSubstr("rope_type default  head_dim 128  rotary_dim 128"));
  EXPECT_THAT(local.out, HasSubstr("rope_theta 10000  factor 1"));
  const CliRun global = posenc("inspect --preset gemma-3-27b --layer 5");
  ASSERT_EQ(global.status, 0) << global.err;
  EXPECT_THAT(global.out, HasSubstr("rope_type linear"));
  EXPECT_THAT(global.out, HasSubstr("rope_theta 1000000  factor 8"));
}

TEST(InspectLayers, NopeLayerSaysSo) {
  const CliRun r = posenc("inspect --preset llama-4-scout --layer 3");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("layer 3 has no RoPE (NoPE)"));
  EXPECT_THAT(r.out, Not(HasSubstr("inv_freq")));
  const CliRun j = posenc("inspect --preset llama-4-scout --layer 3 --json");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto o = nlohmann::json::parse(j.out);
  EXPECT_EQ(o.at("layer"), 3);
  EXPECT_EQ(o.at("rope"), false);
  EXPECT_EQ(o.at("layer_type"), "full_attention");
  EXPECT_FALSE(o.contains("inv_freq"));
}

TEST(InspectLayers, JsonHasTheLayerGroupsAndTheChosenLayer) {
  const CliRun r = posenc("inspect --preset llama-4-scout --layer 0 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto o = nlohmann::json::parse(r.out);
  EXPECT_EQ(o.at("rope"), true);
  EXPECT_EQ(o.at("rope_type"), "llama3");
  EXPECT_EQ(o.at("layout"), "interleaved");
  EXPECT_EQ(o.at("num_layers"), 48);
  ASSERT_EQ(o.at("layers").size(), 2u);
  EXPECT_EQ(o.at("layers")[1].at("rope"), false);
  EXPECT_EQ(o.at("layers")[1].at("layers")[0], 3);
  EXPECT_EQ(o.at("attention").at("attention_chunk_size"), 8192);
}

TEST(InspectLayers, LayerOutOfRangeAndConflictsAreRefused) {
  const std::string a = "inspect --preset llama-4-scout --layer 48";
  expect_refused(posenc(a), {"--layer", "layer (48)", "48 layers, 0 .. 47"}, a);
  const std::string b = "inspect --preset gemma-3-27b --layer 1 --layer-type full_attention";
  expect_refused(posenc(b), {"--layer (1)", "--layer-type", "give one"}, b);
  const std::string c = "inspect --preset llama-4-scout --layer 3 --scaling linear --factor 2";
  expect_refused(posenc(c), {"--layer (3)", "NoPE"}, c);
}

TEST(InspectLayers, LayerTypeStillWorks) {
  const CliRun r = posenc("inspect --preset gemma-3-27b --layer-type sliding_attention");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rope_theta 10000  factor 1"));
}

TEST(InspectLayers, DualChunkPositions) {
  const CliRun r = posenc("inspect --preset qwen2.5-7b-instruct-1m --dca-position 300000");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("chunk_size 262144, local_size 8192, chunk_len 253952"));
  // 300000 mod 253952 = 46048.
  EXPECT_THAT(r.out, HasSubstr("key 46048; query intra 46048, successive 262144, inter 262144, "
                               "succ_critical 300000, inter_critical 308192"));
  const CliRun j = posenc("inspect --preset qwen2.5-7b-instruct-1m --dca-position 5 --json");
  ASSERT_EQ(j.status, 0) << j.err;
  const auto o = nlohmann::json::parse(j.out);
  EXPECT_EQ(o.at("dual_chunk").at("positions").at("successive"), 253957);
  const std::string bad = "inspect --preset llama-2-7b --dca-position 5";
  expect_refused(posenc(bad), {"--dca-position (5)", "dual_chunk_attention_config"}, bad);
}

TEST(DoctorVariants, FindingsWithTheModelsNumbers) {
  const CliRun scout = posenc("doctor --preset llama-4-scout");
  EXPECT_THAT(scout.out, HasSubstr("llama4-pair-layout"));
  EXPECT_THAT(scout.out, HasSubstr("i + 64"));
  EXPECT_THAT(scout.out, HasSubstr("llama3-equal-freq-factors"));
  const CliRun gemma = posenc("doctor --preset gemma-3-27b");
  EXPECT_THAT(gemma.out, HasSubstr("gemma3-sliding-layers"));
  EXPECT_THAT(gemma.out, HasSubstr("at position 131071"));
  EXPECT_THAT(gemma.out, HasSubstr("52 sliding-window layers"));
  const CliRun llama = posenc("doctor --preset llama-3.1-8b");
  EXPECT_THAT(llama.out, Not(HasSubstr("llama3-equal-freq-factors")));
  EXPECT_THAT(llama.out, Not(HasSubstr("llama4-pair-layout")));
}

TEST(CompareVariants, Llama4NotesThePermutation) {
  const CliRun r = posenc("compare --preset llama-4-scout");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("permute_qk_weight_for_rotary"));
  EXPECT_THAT(r.out, HasSubstr("guards the 0/0"));
}

}  // namespace
