// posenc/llama/perplexity.h: perplexity of a Llama model over a text, at a given context, with a
// given RoPE (the protocol of `posenc eval`, docs/design.md §8).
//
// Default protocol (stride 0), exactly:
//   1. the whole text tokenized once (Tokenizer::encode), no BOS;
//   2. consecutive non-overlapping windows of ctx tokens, the remainder dropped, at most
//      floor(max_tokens / ctx) windows;
//   3. in each window the first token replaced by BOS, positions 0 .. ctx-1 run from an empty
//      cache;
//   4. the tokens at positions ctx/2 .. ctx-1 scored (from the logits at ctx/2-1 .. ctx-2):
//      perplexity = exp(sum NLL / tokens scored). ctx/2 rounds down: an odd ctx scores
//      ctx - floor(ctx/2) tokens per window.
//
// Sliding window (stride S > 0): YaRN's eval/perplexity.py (`compute_perplexity`, truncate=False,
// add_start_token=True), the Hugging Face perplexity guide's loop with a BOS in front, over the
// first T = min(tokens, max_tokens) tokens taken as one document:
//   for b = 0, S, 2S, ...: end = min(b + ctx - 1, T); the input is BOS followed by tokens
//   [b, end) (at most ctx positions, from an empty cache); the last end - previous_end tokens
//   are scored (the first window: all of them, the first from BOS alone); stop once end = T.
// Every token is scored exactly once, with at least ctx - 1 - S tokens of context once past the
// first window. One deliberate difference: perplexity = exp(sum NLL / tokens scored) pools the
// tokens, where the script takes exp of the mean of the windows' mean NLLs (the same when every
// window scores S tokens; here the first scores ctx - 1 and the last what is left).
// 1 <= S <= ctx - 1.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

#include "posenc/llama/llama.h"

namespace posenc::llama {

struct PerplexityOptions {
  std::int64_t ctx = 512;
  std::int64_t max_tokens = 131072;
  std::int64_t stride = 0;  // 0: non-overlapping windows (§8); S > 0: sliding window, stride S
  int threads = 1;          // [1, kMaxThreads] (threads.h)
  std::int64_t step = 64;   // Session step: frequency update interval of dynamic methods
  Numerics numerics = Numerics::kPrecise;
  // Called after each window with (windows done, windows in all).
  std::function<void(std::int64_t, std::int64_t)> progress;
};

struct PerplexityResult {
  std::int64_t windows = 0;
  std::int64_t tokens_run = 0;  // tokens through the forward pass
  std::int64_t tokens_scored = 0;
  double nll_sum = 0.0;          // natural log
  double perplexity = 0.0;       // exp(nll_sum / tokens_scored); NaN when nothing was scored
  double seconds = 0.0;          // wall time of the forward passes and scoring
  std::int64_t rerotations = 0;  // cache re-rotations of dynamic methods, all windows together
};

// The largest text read_text reads. eval tokenizes the whole text: about 64 bytes of memory and
// 0.5 s per MB (measured, Release: 15 MB, 22 copies of Pride and Prejudice, 7.4 s and 0.96 GB
// peak), so 64 MiB (98 copies) peaks near 4 GiB and 35 s; eval scores --max-tokens of it.
inline constexpr std::uint64_t kMaxTextBytes = std::uint64_t{64} << 20;

// A text file's bytes, as they are. Throws Error "cannot read PATH: REASON" for a directory, a
// missing or unreadable file, more than kMaxTextBytes, or a model, GGUF or .npy file (checked on
// the first bytes).
std::string read_text(const std::filesystem::path& path);

// Throws Error for ctx < 2, max_tokens < 0, a stride outside [0, ctx - 1], or a spec that does
// not fit the model.
PerplexityResult perplexity(const Model& model, const RopeSpec& rope,
                            std::span<const std::int32_t> tokens, const PerplexityOptions& options);

}  // namespace posenc::llama
