// The perplexity protocols of posenc/llama/perplexity.h.
#include "posenc/llama/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "llama/kernels.h"
#include "posenc/core/error.h"
#include "posenc/core/threads.h"
#include "util/file_bytes.h"

namespace posenc::llama {
namespace {

// A window: tokens [begin, end) of the stream, behind a BOS (bos_in_front) or with the first
// replaced by BOS; input positions first_scored .. are scored.
struct Window {
  std::int64_t begin, end, first_scored;
  bool bos_in_front;
};

std::vector<Window> windows_of(std::int64_t count, const PerplexityOptions& o) {
  std::vector<Window> w;
  if (o.stride == 0) {
    const std::int64_t n = std::min(count / o.ctx, o.max_tokens / o.ctx);
    for (std::int64_t i = 0; i < n; ++i)
      w.push_back({i * o.ctx, (i + 1) * o.ctx, o.ctx / 2, false});
    return w;
  }
  const std::int64_t total = std::min(count, o.max_tokens);
  std::int64_t previous_end = 0;
  for (std::int64_t begin = 0; begin < total; begin += o.stride) {
    const std::int64_t end = std::min(begin + o.ctx - 1, total);
    const std::int64_t targets = end - previous_end;
    w.push_back({begin, end, 1 + (end - begin) - targets, true});
    previous_end = end;
    if (end == total) break;
  }
  return w;
}

}  // namespace

std::string read_text(const std::filesystem::path& path) {
  const std::string name = path.string();
  const posenc::detail::FileBytes file(
      path, {kMaxTextBytes, true, "a text", [&name](std::span<const std::uint8_t> start) {
               const std::string looks = posenc::detail::foreign_format(start);
               if (!looks.empty() && !looks.starts_with("JSON")) {
                 throw Error("cannot read " + name + ": this is " + looks + ", not a text");
               }
             }});
  const auto bytes = file.bytes();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

PerplexityResult perplexity(const Model& model, const RopeSpec& rope,
                            std::span<const std::int32_t> tokens, const PerplexityOptions& o) {
  check_threads(o.threads, "perplexity");
  if (o.ctx < 2) throw Error("perplexity: ctx (" + std::to_string(o.ctx) + ") must be at least 2");
  if (o.ctx > max_capacity(model.config())) {
    throw Error("perplexity: ctx (" + std::to_string(o.ctx) + ") must be at most " +
                std::to_string(max_capacity(model.config())) +
                ", the KV cache's limit for this model (kMaxKvCacheBytes)");
  }
  if (o.max_tokens < 0)
    throw Error("perplexity: max_tokens (" + std::to_string(o.max_tokens) +
                ") must not be negative");
  if (o.stride < 0 || o.stride > o.ctx - 1) {
    throw Error("perplexity: stride (" + std::to_string(o.stride) +
                ") must be in [0, ctx - 1] (ctx " + std::to_string(o.ctx) +
                "; 0 means non-overlapping windows)");
  }
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t vocab = model.config().vocab_size;
  const std::vector<Window> windows = windows_of(static_cast<std::int64_t>(tokens.size()), o);
  PerplexityResult r;
  r.windows = static_cast<std::int64_t>(windows.size());
  if (windows.empty()) {
    r.perplexity = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  Session session(model, {.rope = rope,
                          .numerics = o.numerics,
                          .capacity = o.ctx,
                          .threads = o.threads,
                          .step = o.step});
  std::vector<std::int32_t> input;
  std::vector<float> logits;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const Window& w = windows[i];
    input.clear();
    if (w.bos_in_front) input.push_back(model.tokenizer().bos_id());
    input.insert(input.end(), tokens.begin() + w.begin, tokens.begin() + w.end);
    input[0] = model.tokenizer().bos_id();
    const auto len = static_cast<std::int64_t>(input.size());
    // Logits of positions first_scored - 1 .. len - 2 predict first_scored .. len - 1 (the
    // last position's logits come along and are not used).
    const std::int64_t first_logit = w.first_scored - 1;
    logits.resize(static_cast<std::size_t>((len - first_logit) * vocab));
    session.reset();
    session.forward(input, logits, first_logit);
    r.rerotations += session.rerotations();
    for (std::int64_t p = w.first_scored; p < len; ++p) {
      const float* row = logits.data() + (p - 1 - first_logit) * vocab;
      r.nll_sum += detail::log_sum_exp(row, vocab) -
                   static_cast<double>(row[input[static_cast<std::size_t>(p)]]);
    }
    r.tokens_scored += len - w.first_scored;
    r.tokens_run += len;
    if (o.progress) o.progress(static_cast<std::int64_t>(i) + 1, r.windows);
  }
  r.perplexity = std::exp(r.nll_sum / static_cast<double>(r.tokens_scored));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace posenc::llama
