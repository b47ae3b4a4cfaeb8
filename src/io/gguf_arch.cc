// llama.cpp's architecture -> RoPE type table (gguf_arch.h).
#include "io/gguf_arch.h"

namespace posenc::gguf_detail {
namespace {

// llama_model_rope_type() in src/llama-model.cpp of llama.cpp at commit
// 00342301d01add50835550e8a916f12097d94517, each LLM_ARCH_* written as its LLM_ARCH_NAMES
// string (src/llama-arch.cpp). NORM rotates pairs (2i, 2i+1), NEOX pairs (i, i + n/2), MROPE and
// IMROPE are NEOX pairs with ggml_rope_multi's per-section positions (t, h, w, e).
constexpr ArchRope kArchRope[] = {
    // "these models do not use RoPE"
    {"clip", RopeType::kNone},
    {"gpt2", RopeType::kNone},
    {"gptj", RopeType::kNone},
    {"mpt", RopeType::kNone},
    {"refact", RopeType::kNone},
    {"bloom", RopeType::kNone},
    {"mamba", RopeType::kNone},
    {"mamba2", RopeType::kNone},
    {"jamba", RopeType::kNone},
    {"jina-bert-v2", RopeType::kNone},
    {"t5", RopeType::kNone},
    {"t5encoder", RopeType::kNone},
    {"jais", RopeType::kNone},
    {"rwkv6", RopeType::kNone},
    {"rwkv6qwen2", RopeType::kNone},
    {"rwkv7", RopeType::kNone},
    {"arwkv7", RopeType::kNone},
    {"wavtokenizer-dec", RopeType::kNone},
    {"nemotron_h", RopeType::kNone},
    // LLAMA_ROPE_TYPE_NORM: "pairs of consecutive head values"
    {"llama", RopeType::kNorm},
    {"llada", RopeType::kNorm},
    {"llama4", RopeType::kNorm},
    {"deci", RopeType::kNorm},
    {"baichuan", RopeType::kNorm},
    {"starcoder", RopeType::kNorm},
    {"internlm2", RopeType::kNorm},
    {"minicpm", RopeType::kNorm},
    {"xverse", RopeType::kNorm},
    {"command-r", RopeType::kNorm},
    {"cohere2", RopeType::kNorm},
    {"olmo", RopeType::kNorm},
    {"arctic", RopeType::kNorm},
    {"deepseek", RopeType::kNorm},
    {"deepseek2", RopeType::kNorm},
    {"plm", RopeType::kNorm},
    {"chatglm", RopeType::kNorm},
    {"glm4", RopeType::kNorm},
    {"granite", RopeType::kNorm},
    {"granitemoe", RopeType::kNorm},
    {"granitehybrid", RopeType::kNorm},
    {"chameleon", RopeType::kNorm},
    {"bailingmoe", RopeType::kNorm},
    {"neo-bert", RopeType::kNorm},
    {"smollm3", RopeType::kNorm},
    {"arcee", RopeType::kNorm},
    {"ernie4_5", RopeType::kNorm},
    {"ernie4_5-moe", RopeType::kNorm},
    // LLAMA_ROPE_TYPE_NEOX: "the pairs of head values are offset by n_rot/2"
    {"falcon", RopeType::kNeox},
    {"falcon-h1", RopeType::kNeox},
    {"grok", RopeType::kNeox},
    {"dbrx", RopeType::kNeox},
    {"bert", RopeType::kNeox},
    {"jina-bert-v3", RopeType::kNeox},
    {"nomic-bert", RopeType::kNeox},
    {"nomic-bert-moe", RopeType::kNeox},
    {"stablelm", RopeType::kNeox},
    {"bitnet", RopeType::kNeox},
    {"qwen", RopeType::kNeox},
    {"qwen2", RopeType::kNeox},
    {"dream", RopeType::kNeox},
    {"qwen2moe", RopeType::kNeox},
    {"qwen3", RopeType::kNeox},
    {"qwen3moe", RopeType::kNeox},
    {"qwen3next", RopeType::kNeox},
    {"llada-moe", RopeType::kNeox},
    {"olmo2", RopeType::kNeox},
    {"olmoe", RopeType::kNeox},
    {"phi2", RopeType::kNeox},
    {"phi3", RopeType::kNeox},
    {"phimoe", RopeType::kNeox},
    {"plamo", RopeType::kNeox},
    {"plamo2", RopeType::kNeox},
    {"gemma", RopeType::kNeox},
    {"gemma2", RopeType::kNeox},
    {"gemma3", RopeType::kNeox},
    {"gemma3n", RopeType::kNeox},
    {"gemma-embedding", RopeType::kNeox},
    {"starcoder2", RopeType::kNeox},
    {"openelm", RopeType::kNeox},
    {"gptneox", RopeType::kNeox},
    {"codeshell", RopeType::kNeox},
    {"orion", RopeType::kNeox},
    {"nemotron", RopeType::kNeox},
    {"exaone", RopeType::kNeox},
    {"exaone4", RopeType::kNeox},
    {"minicpm3", RopeType::kNeox},
    {"bailingmoe2", RopeType::kNeox},
    {"dots1", RopeType::kNeox},
    {"hunyuan-moe", RopeType::kNeox},
    {"gpt-oss", RopeType::kNeox},
    {"hunyuan-dense", RopeType::kNeox},
    {"lfm2", RopeType::kNeox},
    {"lfm2moe", RopeType::kNeox},
    {"smallthinker", RopeType::kNeox},
    {"glm4moe", RopeType::kNeox},
    {"seed_oss", RopeType::kNeox},
    {"grovemoe", RopeType::kNeox},
    {"apertus", RopeType::kNeox},
    // LLAMA_ROPE_TYPE_MROPE
    {"qwen2vl", RopeType::kMrope},
    // LLAMA_ROPE_TYPE_IMROPE: LLM_ARCH_QWEN3VL and LLM_ARCH_QWEN3VLMOE, added after the commit
    // above (llama-model.cpp @0049e3cb, with ggml's IMROPE mode)
    {"qwen3vl", RopeType::kImrope},
    {"qwen3vlmoe", RopeType::kImrope},
};

}  // namespace

const ArchRope* find_arch(std::string_view arch) {
  for (const ArchRope& a : kArchRope) {
    if (a.arch == arch) return &a;
  }
  return nullptr;
}

}  // namespace posenc::gguf_detail
