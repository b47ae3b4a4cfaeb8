// Built-in presets (presets.h): the RoPE fields of published config.json files, read by the same
// parser as a file. Each entry says where its values come from and how they were checked; the
// JSON keeps each file's own spelling (40 stays an integer, 10000.0 a float) so that a preset
// gives exactly the warnings its file gives.
#include "posenc/io/presets.h"

#include <string>

#include "posenc/core/error.h"

namespace posenc {
namespace {

// Ordered by family, then size; `posenc presets` lists them in this order.
const std::vector<Preset>& table() {
  static const std::vector<Preset> kPresets = {
      {"llama-2-7b", "meta-llama/Llama-2-7b-hf config.json",
       "Llama 2 7B: plain RoPE, base 10000, 4096 tokens",
       R"json({
  "model_type": "llama",
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "max_position_embeddings": 4096,
  "rope_scaling": null
})json",
       "Values: the project's shared test config (testdata/hf-configs/llama-2-7b.json, copied from "
       "the published file). The published file sets no rope_theta, so the default 10000 applies. "
       "Parsing gives no warning."},
      {"codellama-7b", "codellama/CodeLlama-7b-hf config.json",
       "Code Llama 7B: Llama 2 trained further on code with base 1e6 for 16384 tokens",
       R"json({
  "model_type": "llama",
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "max_position_embeddings": 16384,
  "rope_scaling": null,
  "rope_theta": 1000000
})json",
       "max_position_embeddings 16384 and rope_theta 1000000 (an integer in the file) checked "
       "against a public dump of the transformers LlamaConfig of "
       "codellama/CodeLlama-7b-Instruct-hf, whose RoPE is the base model's (Code Llama's "
       "long-context fine-tuning raised the base to 1e6); the base repository's file itself was "
       "not read. Parsing gives no warning."},
      {"llama-3.1-8b", "meta-llama/Llama-3.1-8B config.json",
       "Llama 3.1 8B: llama3 scaling, factor 8 over 8192 tokens, 131072 in all",
       R"json({
  "model_type": "llama",
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "max_position_embeddings": 131072,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0
})json",
       "Values: the project's shared test config (testdata/hf-configs/llama-3.1-8b.json, copied "
       "from the published file). Parsing gives no warning."},
      {"llama-3.2-1b", "meta-llama/Llama-3.2-1B config.json",
       "Llama 3.2 1B: llama3 scaling, factor 32 over 8192 tokens, head_dim 64",
       R"json({
  "model_type": "llama",
  "head_dim": 64,
  "hidden_size": 2048,
  "num_attention_heads": 32,
  "max_position_embeddings": 131072,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0
})json",
       "Checked against several public copies of the published config.json (head_dim 64, "
       "hidden_size 2048, 32 heads, rope_theta 500000.0, llama3 factor 32.0, low/high_freq_factor "
       "1.0/4.0, original_max_position_embeddings 8192, max_position_embeddings 131072); the "
       "Hugging Face file itself was not read. Parsing gives no warning."},
      {"mistral-7b-v0.1", "mistralai/Mistral-7B-v0.1 config.json",
       "Mistral 7B v0.1: plain RoPE, base 10000, 32768 positions",
       R"json({
  "model_type": "mistral",
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "max_position_embeddings": 32768,
  "rope_theta": 10000.0
})json",
       "Checked against a public dump of the transformers MistralConfig of "
       "mistralai/Mistral-7B-v0.1 (hidden_size 4096, 32 heads, max_position_embeddings 32768, "
       "rope_theta 10000.0). Its sliding_window (4096) limits attention, not RoPE, and is left "
       "out. Parsing gives no warning."},
      {"qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B-Instruct config.json",
       "Qwen2.5 7B Instruct as shipped: plain RoPE, base 1e6, 32768 tokens",
       R"json({
  "model_type": "qwen2",
  "hidden_size": 3584,
  "num_attention_heads": 28,
  "max_position_embeddings": 32768,
  "rope_theta": 1000000.0,
  "rope_scaling": null
})json",
       "Values: the project's shared test config "
       "(testdata/hf-configs/qwen2.5-7b-instruct-yarn.json, copied from the published file) "
       "without the YaRN block, which the shipped file does not have "
       "(testdata/hf-configs/README.md). Parsing gives no warning."},
      {"qwen2.5-7b-instruct-yarn4",
       "Qwen/Qwen2.5-7B-Instruct config.json + the model card's YaRN block",
       "Qwen2.5 7B Instruct with the card's YaRN x4 for 131072 tokens",
       R"json({
  "model_type": "qwen2",
  "hidden_size": 3584,
  "num_attention_heads": 28,
  "max_position_embeddings": 32768,
  "rope_theta": 1000000.0,
  "rope_scaling": {
    "factor": 4.0,
    "original_max_position_embeddings": 32768,
    "type": "yarn"
  }
})json",
       "Values: the project's shared test config "
       "(testdata/hf-configs/qwen2.5-7b-instruct-yarn.json, copied from the published file): the "
       "shipped file plus the rope_scaling block the model card tells users to add past 32768 "
       "tokens. Parsing gives no warning."},
      {"qwen3-8b", "Qwen/Qwen3-8B config.json",
       "Qwen3 8B as shipped: plain RoPE, base 1e6, head_dim 128, 40960 positions",
       R"json({
  "model_type": "qwen3",
  "head_dim": 128,
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "max_position_embeddings": 40960,
  "rope_scaling": null,
  "rope_theta": 1000000
})json",
       "head_dim 128, hidden_size 4096, 32 heads, max_position_embeddings 40960, rope_theta 1e6 "
       "and rope_scaling null checked against public copies of the published config.json (they "
       "spell rope_theta 1000000 or 1000000.0; the value is the same); the Hugging Face file "
       "itself was not read. Parsing gives no warning."},
      {"qwen3-8b-yarn4", "Qwen/Qwen3-8B config.json + the model card's YaRN block",
       "Qwen3 8B with the card's YaRN x4 over 32768 tokens (131072 in all)",
       R"json({
  "model_type": "qwen3",
  "head_dim": 128,
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "max_position_embeddings": 40960,
  "rope_scaling": {
    "rope_type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 32768
  },
  "rope_theta": 1000000
})json",
       "The shipped file plus the block the Qwen3 model card documents: {\"rope_type\": \"yarn\", "
       "\"factor\": 4.0, \"original_max_position_embeddings\": 32768}; the card leaves "
       "max_position_embeddings at 40960. Parsing warns, as documented: factor 4 differs from "
       "max_position_embeddings / original_max_position_embeddings = 1.25, and the explicit factor "
       "is used (some transformers releases took the ratio instead)."},
      {"deepseek-v2-lite", "deepseek-ai/DeepSeek-V2-Lite config.json",
       "DeepSeek-V2-Lite: YaRN x40 over 4096 tokens, mscale 0.707, 64 rotary dims interleaved",
       R"json({
  "model_type": "deepseek_v2",
  "hidden_size": 2048,
  "num_attention_heads": 16,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "max_position_embeddings": 163840,
  "rope_scaling": {
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 40,
    "mscale": 0.707,
    "mscale_all_dim": 0.707,
    "original_max_position_embeddings": 4096,
    "type": "yarn"
  },
  "rope_theta": 10000
})json",
       "qk_rope_head_dim 64, hidden_size 2048, 16 heads, max_position_embeddings 163840, "
       "rope_theta 10000 and the rope_scaling block (beta_fast 32, beta_slow 1, factor 40, mscale "
       "0.707, mscale_all_dim 0.707, original_max_position_embeddings 4096, type yarn) checked "
       "against public copies of the published config.json; the Hugging Face file itself was not "
       "read. Parsing warns, as documented: factor 40, beta_fast 32 and beta_slow 1 are integers "
       "where transformers expects floats."},
      {"deepseek-v3", "deepseek-ai/DeepSeek-V3 config.json",
       "DeepSeek-V3: YaRN x40 over 4096 tokens, mscale 1, 64 rotary dims interleaved",
       R"json({
  "model_type": "deepseek_v3",
  "hidden_size": 7168,
  "num_attention_heads": 128,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "max_position_embeddings": 163840,
  "rope_scaling": {
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 40,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096,
    "type": "yarn"
  },
  "rope_theta": 10000
})json",
       "Values: the project's shared test config (testdata/hf-configs/deepseek-v3.json, copied "
       "from the published file). Parsing warns, as documented: factor 40, beta_fast 32 and "
       "beta_slow 1 are integers where transformers expects floats."},
      {"phi-3-mini-128k", "microsoft/Phi-3-mini-128k-instruct config.json",
       "Phi-3 mini 128k: LongRoPE with 48 short and 48 long factors over 4096 tokens",
       R"json({
  "model_type": "phi3",
  "hidden_size": 3072,
  "num_attention_heads": 32,
  "max_position_embeddings": 131072,
  "original_max_position_embeddings": 4096,
  "rope_theta": 10000.0,
  "rope_scaling": {
    "long_factor": [
      1.0700000524520874, 1.1200000047683716, 1.149999976158142, 1.4199999570846558,
      1.5699999332427979, 1.7999999523162842, 2.129999876022339, 2.129999876022339,
      3.009999990463257, 5.910000324249268, 6.950000286102295, 9.070000648498535,
      9.930000305175781, 10.710000038146973, 11.130000114440918, 14.609999656677246,
      15.409998893737793, 19.809999465942383, 37.279998779296875, 38.279998779296875,
      38.599998474121094, 40.12000274658203, 46.20000457763672, 50.940006256103516,
      53.66000747680664, 54.9373893737793, 56.89738845825195, 57.28738784790039,
      59.98738479614258, 60.86738586425781, 60.887386322021484, 61.71739196777344,
      62.91739273071289, 62.957393646240234, 63.41739273071289, 63.8173942565918,
      63.83739471435547, 63.897396087646484, 63.93739700317383, 64.06739807128906,
      64.11434936523438, 64.12435150146484, 64.15435028076172, 64.19435119628906,
      64.24435424804688, 64.57435607910156, 64.69000244140625, 64.76000213623047
    ],
    "short_factor": [
      1.1, 1.1, 1.1, 1.3000000000000003,
      1.3500000000000003, 1.3500000000000003, 1.4000000000000004, 1.5500000000000005,
      2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
      2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
      2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
      2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
      2.000000000000001, 2.0500000000000007, 2.0500000000000007, 2.0500000000000007,
      2.0500000000000007, 2.0500000000000007, 2.0500000000000007, 2.1000000000000005,
      2.1000000000000005, 2.1500000000000004, 2.25, 2.25,
      2.25, 2.25, 2.25, 2.3999999999999995,
      2.4499999999999993, 2.499999999999999, 2.6999999999999984, 2.6999999999999984,
      2.7499999999999982, 2.799999999999998, 2.8999999999999977, 3.049999999999997
    ],
    "type": "longrope"
  }
})json",
       "Values: the project's shared test config "
       "(testdata/hf-configs/phi-3-mini-128k-instruct.json, copied from the published file), the "
       "factor lists digit for digit. Parsing gives no warning."},
      {"phi-3.5-mini", "microsoft/Phi-3.5-mini-instruct config.json",
       "Phi-3.5 mini: LongRoPE with its own 48 short and 48 long factors over 4096 tokens",
       R"json({
  "model_type": "phi3",
  "hidden_size": 3072,
  "num_attention_heads": 32,
  "max_position_embeddings": 131072,
  "original_max_position_embeddings": 4096,
  "rope_theta": 10000.0,
  "rope_scaling": {
    "long_factor": [
      1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601,
      1.5899999141693115, 1.600000023841858, 1.6200000047683716, 2.620000123977661,
      3.2300000190734863, 3.2300000190734863, 4.789999961853027, 7.400000095367432,
      7.700000286102295, 9.09000015258789, 12.199999809265137, 17.670000076293945,
      24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
      32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992,
      50.340003967285156, 50.45000457763672, 57.55000305175781, 57.93000411987305,
      58.21000289916992, 60.1400032043457, 62.61000442504883, 62.62000274658203,
      62.71000289916992, 63.1400032043457, 63.1400032043457, 63.77000427246094,
      63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
      64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938,
      64.4800033569336, 64.51000213623047, 64.52999877929688, 64.83999633789062
    ],
    "short_factor": [
      1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705,
      1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842,
      1.0499999523162842, 1.0699999332427979, 1.0999999046325684, 1.1099998950958252,
      1.1599998474121094, 1.1599998474121094, 1.1699998378753662, 1.2899998426437378,
      1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083,
      1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903,
      1.9899996519088745, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
      2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0299997329711914,
      2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
      2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
      2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713,
      2.5899994373321533, 2.729999542236328, 2.749999523162842, 2.8399994373321533
    ],
    "type": "longrope"
  }
})json",
       "The factor lists come from two independent public copies of the published config.json (a "
       "benchmark that embeds it, and a model factory that cites its URL); they agree entry for "
       "entry, and every entry is a float32 value written out as a double, as the published file "
       "has them. The Hugging Face file itself was not read. Parsing gives no warning."},
      {"gpt-oss-20b", "openai/gpt-oss-20b config.json",
       "gpt-oss-20b: YaRN x32 over 4096 tokens, base 150000, no truncation of the ramp",
       R"json({
  "model_type": "gpt_oss",
  "head_dim": 64,
  "hidden_size": 2880,
  "num_attention_heads": 64,
  "max_position_embeddings": 131072,
  "rope_scaling": {
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "factor": 32.0,
    "original_max_position_embeddings": 4096,
    "rope_type": "yarn",
    "truncate": false
  },
  "rope_theta": 150000
})json",
       "Values: the project's shared test config (testdata/hf-configs/gpt-oss-20b.json, copied "
       "from the published file). Parsing gives no warning."},
      {"pythia-410m", "EleutherAI/pythia-410m config.json",
       "Pythia 410M (GPT-NeoX): plain RoPE on 16 of 64 dims (rotary_pct 0.25)",
       R"json({
  "model_type": "gpt_neox",
  "hidden_size": 1024,
  "num_attention_heads": 16,
  "max_position_embeddings": 2048,
  "rotary_pct": 0.25,
  "rotary_emb_base": 10000
})json",
       "Values: the project's shared test config (testdata/hf-configs/pythia-410m.json, copied "
       "from the published file). Parsing gives no warning."},
      {"gpt-j-6b", "EleutherAI/gpt-j-6b config.json",
       "GPT-J 6B: plain RoPE on the first 64 of 256 dims, pairs interleaved",
       R"json({
  "model_type": "gptj",
  "n_embd": 4096,
  "n_head": 16,
  "n_positions": 2048,
  "rotary_dim": 64
})json",
       "n_embd 4096, n_head 16, n_positions 2048 and rotary_dim 64 checked against public copies "
       "of the published config.json. The file also has \"rotary\": true, which transformers' "
       "GPTJConfig does not read; it is left out. No rope_theta: the default 10000 applies. "
       "Parsing gives no warning."},
      // Vision-language models, Gemma 3, Llama 4, Hunyuan, Phi-4-mini and Qwen2.5-1M (issue 12):
      // written from the published config.json files as known without network access here; each
      // note says what was checked and against what.
      {"qwen2-vl-7b", "Qwen/Qwen2-VL-7B-Instruct config.json",
       "Qwen2-VL 7B: M-RoPE, sections [16, 24, 24] (legacy type \"mrope\"), base 1e6",
       R"json({
  "model_type": "qwen2_vl",
  "hidden_size": 3584,
  "num_attention_heads": 28,
  "max_position_embeddings": 32768,
  "rope_theta": 1000000.0,
  "rope_scaling": {
    "type": "mrope",
    "mrope_section": [16, 24, 24]
  },
  "vision_config": {"spatial_merge_size": 2}
})json",
       "Written from the published config.json as the project's M-RoPE notes give it "
       "(../shared/docs/rope-in-engines.md section 1; the config test ConfigMrope."
       "Qwen2VlLegacyMropeType); the Hugging Face file itself was not read here. vision_config "
       "keeps only spatial_merge_size, which mrope-positions reads. Parsing gives no warning."},
      {"qwen2.5-vl-7b", "Qwen/Qwen2.5-VL-7B-Instruct config.json",
       "Qwen2.5-VL 7B: M-RoPE, sections [16, 24, 24], base 1e6, 128000 positions",
       R"json({
  "model_type": "qwen2_5_vl",
  "hidden_size": 3584,
  "num_attention_heads": 28,
  "max_position_embeddings": 128000,
  "rope_theta": 1000000.0,
  "rope_scaling": {
    "type": "mrope",
    "mrope_section": [16, 24, 24]
  },
  "vision_config": {"spatial_merge_size": 2, "tokens_per_second": 2}
})json",
       "Written from the published config.json as recalled (the same rope_scaling as Qwen2-VL, "
       "max_position_embeddings 128000, vision_config.tokens_per_second 2); the Hugging Face file "
       "itself was not read here. Parsing gives no warning."},
      {"qwen3-vl-8b", "Qwen/Qwen3-VL-8B-Instruct config.json",
       "Qwen3-VL 8B: interleaved M-RoPE, sections [24, 20, 20], base 5e6, 262144 positions",
       R"json({
  "model_type": "qwen3_vl",
  "text_config": {
    "model_type": "qwen3_vl_text",
    "head_dim": 128,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 262144,
    "rope_theta": 5000000,
    "rope_scaling": {
      "mrope_interleaved": true,
      "mrope_section": [24, 20, 20],
      "rope_type": "default"
    }
  },
  "vision_config": {"spatial_merge_size": 2}
})json",
       "Written from the published config.json (text_config as in the config test "
       "ConfigMrope.Qwen3VlNestedTextConfigInterleaved; rope_theta 5000000 is an integer there); "
       "the Hugging Face file itself was not read here. Parsing gives no warning."},
      {"qwen3-vl-8b-yarn", "Qwen/Qwen3-VL-8B-Instruct config.json + the model card's YaRN block",
       "Qwen3-VL 8B with the card's YaRN x3 over 262144 tokens, M-RoPE kept",
       R"json({
  "model_type": "qwen3_vl",
  "text_config": {
    "model_type": "qwen3_vl_text",
    "head_dim": 128,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 262144,
    "rope_theta": 5000000,
    "rope_scaling": {
      "rope_type": "yarn",
      "mrope_section": [24, 20, 20],
      "mrope_interleaved": true,
      "factor": 3.0,
      "original_max_position_embeddings": 262144
    }
  },
  "vision_config": {"spatial_merge_size": 2}
})json",
       "qwen3-vl-8b with text_config.rope_scaling replaced by the model card's YaRN block as "
       "recalled (rope_type yarn, factor 3.0, original_max_position_embeddings 262144, the "
       "sections kept; vllm#25384 discusses the same factor 3 on 256k); the card itself was not "
       "read here. max_position_embeddings stays as shipped (262144). Parsing gives no warning."},
      {"glm-4.1v-9b", "THUDM/GLM-4.1V-9B-Thinking config.json",
       "GLM-4.1V 9B: M-RoPE [8, 12, 12] on the first half of the head, adjacent pairs",
       R"json({
  "model_type": "glm4v",
  "text_config": {
    "model_type": "glm4v_text",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "partial_rotary_factor": 0.5,
    "max_position_embeddings": 65536,
    "rope_theta": 10000,
    "rope_scaling": {
      "type": "default",
      "mrope_section": [8, 12, 12]
    }
  },
  "vision_config": {"spatial_merge_size": 2}
})json",
       "Written from the published config.json (text_config as in the config test "
       "ConfigMrope's GLM-4.1V case); the Hugging Face file itself was not read here. Parsing "
       "gives no warning."},
      {"gemma-3-27b", "google/gemma-3-27b-it config.json",
       "Gemma 3 27B: global layers base 1e6 with linear x8, sliding layers base 1e4 unscaled",
       R"json({
  "model_type": "gemma3",
  "text_config": {
    "model_type": "gemma3_text",
    "head_dim": 128,
    "hidden_size": 5376,
    "num_attention_heads": 32,
    "num_hidden_layers": 62,
    "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {
      "factor": 8.0,
      "rope_type": "linear"
    },
    "sliding_window": 1024,
    "sliding_window_pattern": 6
  }
})json",
       "Written from the published config.json as recalled (transformers v4 form: "
       "rope_local_base_freq for the sliding layers, sliding_window_pattern 6 = 5 local : 1 "
       "global, 62 layers); the Hugging Face file itself was not read here. Parsing gives no "
       "warning; layers 5, 11, ..., 59 are global."},
      {"llama-4-scout", "meta-llama/Llama-4-Scout-17B-16E-Instruct config.json",
       "Llama 4 Scout: llama3 x16 with low == high freq factor, NoPE every 4th layer, adjacent "
       "pairs",
       R"json({
  "model_type": "llama4",
  "text_config": {
    "model_type": "llama4_text",
    "head_dim": 128,
    "hidden_size": 5120,
    "num_attention_heads": 40,
    "num_hidden_layers": 48,
    "max_position_embeddings": 10485760,
    "rope_theta": 500000.0,
    "rope_scaling": {
      "factor": 16.0,
      "high_freq_factor": 1.0,
      "low_freq_factor": 1.0,
      "original_max_position_embeddings": 8192,
      "rope_type": "llama3"
    },
    "attention_chunk_size": 8192,
    "attn_temperature_tuning": true,
    "floor_scale": 8192,
    "attn_scale": 0.1
  }
})json",
       "Written from the published config.json as recalled (text_config values as in "
       "../shared/docs/rope-in-engines.md section 2, 'Llama 4 iRoPE'); the Hugging Face file "
       "itself was not read here. no_rope_layers is left to Llama4TextConfig's default (layers "
       "3, 7, ..., 47 without RoPE). Parsing warns that high_freq_factor equals low_freq_factor."},
      {"hunyuan-7b", "tencent/Hunyuan-7B-Instruct config.json",
       "Hunyuan 7B: NTK-alpha 1000 (a dynamic rope_scaling with alpha: a static base change)",
       R"json({
  "model_type": "hunyuan_v1_dense",
  "head_dim": 128,
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "max_position_embeddings": 262144,
  "rope_theta": 10000.0,
  "rope_scaling": {
    "alpha": 1000.0,
    "factor": 1.0,
    "type": "dynamic"
  }
})json",
       "Written from the published config.json as recalled (rope_scaling type dynamic with "
       "alpha 1000.0 and factor 1.0, rope_theta 10000.0); the Hugging Face file itself was not "
       "read here, and its other rope_scaling keys (beta_fast, beta_slow, mscale, "
       "mscale_all_dim), which HunYuan's rotary embedding does not read, are left out. Parsing "
       "gives no warning."},
      {"phi-4-mini", "microsoft/Phi-4-mini-instruct config.json",
       "Phi-4-mini: LongRoPE on 96 of 128 dims (partial 0.75), 48 factors, 4096 -> 131072",
       R"json({
  "model_type": "phi3",
  "hidden_size": 3072,
  "num_attention_heads": 24,
  "max_position_embeddings": 131072,
  "original_max_position_embeddings": 4096,
  "partial_rotary_factor": 0.75,
  "rope_theta": 10000.0,
  "rope_scaling": {
    "long_factor": [
      1, 1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897, 1.956131817,
      2.187582649, 2.446418898, 2.735880826, 3.059592084, 3.421605075, 3.826451687,
      4.279200023, 4.785517845, 5.351743533, 5.984965424, 6.693110555, 7.485043894,
      8.370679318, 9.36110372, 10.4687158, 11.70738129, 13.09260651, 14.64173252, 16.37415215,
      18.31155283, 20.47818807, 22.90118105, 25.61086418, 28.64115884, 32.03, 32.1, 32.13,
      32.23, 32.6, 32.61, 32.64, 32.66, 32.7, 32.71, 32.93, 32.97, 33.28, 33.49, 33.5, 44.16,
      47.77
    ],
    "short_factor": [
      1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
      1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
      1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0
    ],
    "type": "longrope"
  }
})json",
       "Written from the published config.json as recalled (48-entry factor lists: the short "
       "ones all 1.0, the long ones rising from 1 to 47.77); the Hugging Face file itself was not "
       "read here, so the individual long factors may differ from the file's. Parsing gives no "
       "warning; the attention factor is sqrt(1 + ln 32 / ln 4096)."},
      {"qwen2.5-7b-instruct-1m", "Qwen/Qwen2.5-7B-Instruct-1M config.json",
       "Qwen2.5 7B Instruct 1M: base 1e7, dual chunk attention (chunk 262144, local 8192)",
       R"json({
  "model_type": "qwen2",
  "hidden_size": 3584,
  "num_attention_heads": 28,
  "max_position_embeddings": 1010000,
  "rope_theta": 10000000.0,
  "dual_chunk_attention_config": {
    "chunk_size": 262144,
    "local_size": 8192,
    "original_max_position_embeddings": 262144
  }
})json",
       "Written from the published config.json as recalled (values as in "
       "../shared/docs/rope-in-engines.md section 2, 'Dual-Chunk Attention'); the Hugging Face "
       "file itself was not read here, and its sparse_attention_* keys (which pick attention "
       "blocks, not rotations) are left out. Parsing gives no warning."},
  };
  return kPresets;
}

}  // namespace

const std::vector<Preset>& presets() { return table(); }

const Preset* find_preset(std::string_view name) {
  for (const Preset& p : table()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

ModelConfig load_preset(std::string_view name) {
  const Preset* preset = find_preset(name);
  if (!preset) {
    std::string known;
    for (const Preset& p : table()) known += (known.empty() ? "" : ", ") + p.name;
    throw Error("preset \"" + std::string(name) + "\" is not known; the presets are: " + known);
  }
  return parse_hf_config(preset->json, "preset " + preset->name);
}

}  // namespace posenc
