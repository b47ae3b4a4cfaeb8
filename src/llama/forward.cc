// The Llama 2 forward pass over a KV cache (llama2.c `forward`, batched over the tokens of a step).
//
// Per step of m tokens and per layer, three parallel regions on the shared thread pool: the
// q/k/v projections by token, attention by (head, tile of query tokens), then the output
// projection and the feed-forward block by token. RoPE runs between the first two, on the
// calling thread (a step rotates m x 12 heads x 4 pairs: microseconds).
//
// KV cache layout: keys and values [layer, position, kv_head, head_dim], so that one head-layer's
// keys are KV floats apart (128 bytes for stories260K: two cache lines a key, streamed by the
// prefetcher) instead of layers * KV; a re-rotation gathers all layers' keys into one
// rerotate_keys call, kRerotateChunk positions at a time.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <optional>
#include <string>

#include "llama/kernels.h"
#include "posenc/core/error.h"
#include "posenc/core/threads.h"
#include "posenc/llama/llama.h"
#include "posenc/rope/apply.h"
#include "util/thread_pool.h"

namespace posenc::llama {
namespace {

using detail::MatMulArgs;

std::size_t z(std::int64_t v) { return static_cast<std::size_t>(v); }

// Tokens per step of methods whose frequencies do not depend on the length: the step does not
// change their results, and longer steps mean fewer thread wake-ups (16 per step).
constexpr std::int64_t kStaticStep = 256;

// Positions re-rotated per call of rerotate_keys: 1024 x 5 layers x 32 floats (640 KB of scratch
// for stories260K), above rerotate_keys' threshold for using threads.
constexpr std::int64_t kRerotateChunk = 1024;

// x / sqrt(mean(x^2) + eps) * w, summed in float in order (llama2.c `rmsnorm`).
void rmsnorm(float* out, const float* x, const float* w, std::int64_t n) {
  float ss = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) ss = ss + x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + kRmsNormEps);
  for (std::int64_t i = 0; i < n; ++i) out[i] = w[i] * (scale * x[i]);
}

// POSENC_PROFILE=1: each Session prints on stderr, when it is destroyed, the wall and CPU time
// (all threads) of each part of the forward pass (docs/eval.md, "Where the time goes").
enum Part { kQkv, kRope, kAttention, kFfn, kLogits, kRerotate, kParts };
constexpr const char* kPartNames[kParts] = {"qkv", "rope",   "attention",
                                            "ffn", "logits", "rerotate"};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Profile {
  bool on = std::getenv("POSENC_PROFILE") != nullptr && *std::getenv("POSENC_PROFILE") != '\0' &&
            std::string(std::getenv("POSENC_PROFILE")) != "0";
  double wall[kParts] = {}, cpu[kParts] = {};
  std::chrono::steady_clock::time_point t;
  double c = 0;
  void start() {
    if (!on) return;
    t = std::chrono::steady_clock::now();
    c = process_cpu_seconds();
  }
  void stop(Part p) {
    if (!on) return;
    wall[p] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    cpu[p] += process_cpu_seconds() - c;
  }
};

bool same_angles(const Frequencies& a, const Frequencies& b) {
  return a.inv_freq == b.inv_freq && a.attention_factor == b.attention_factor;
}

}  // namespace

struct Session::State {
  const Model* model = nullptr;
  SessionOptions opt;
  Frequencies initial;
  Frequencies freqs;
  std::int64_t size = 0;
  std::int64_t rerotations = 0;
  std::vector<float> k_cache, v_cache;
  // Decoding (steps of at most kPerQueryMaxTokens tokens): the keys again in attention's blocks,
  // [layer, kv_head, position / kKeyBlock, head_dim, kKeyBlock], allocated on the first such step;
  // blocked[l]: positions of layer l copied (0 after a re-rotation).
  std::vector<float> k_blocks;
  std::vector<std::int64_t> blocked;
  std::vector<std::int32_t> group_positions;  // decoding by kv head: the token's position, per head
  std::vector<float> rerotate_scratch;        // [position, layer, kv_dim], kRerotateChunk positions
  std::vector<std::int32_t> all_positions;    // 0, 1, ..., capacity - 1
  // Scratch, [step, ...] row-major.
  std::vector<float> x, xb, q, k, v, att, hb, hb2;
  Profile profile;
  std::int64_t tokens_run = 0;

  ~State() {
    if (!profile.on || tokens_run == 0) return;
    std::string line = "profile: " + std::string(method_name(opt.rope.method)) + ", capacity " +
                       std::to_string(opt.capacity) + ", " + std::to_string(tokens_run) +
                       " tokens, " + std::to_string(opt.threads) +
                       " threads; part: wall s / cpu s:";
    double wall = 0, cpu = 0;
    for (int p = 0; p < kParts; ++p) {
      char part[96];
      std::snprintf(part, sizeof part, " %s %.3f/%.3f", kPartNames[p], profile.wall[p],
                    profile.cpu[p]);
      line += part;
      wall += profile.wall[p];
      cpu += profile.cpu[p];
    }
    char total[96];
    std::snprintf(total, sizeof total, "; total %.3f/%.3f\n", wall, cpu);
    std::fputs((line + total).c_str(), stderr);
  }

  // Rows of the step buffers: static methods run in steps of max(step, 256) tokens; dynamic ones
  // in steps of `step` tokens, consecutive steps with the same frequencies merged up to as many.
  std::int64_t step_rows() const { return std::max(opt.step, kStaticStep); }

  void parallel(std::int64_t tasks, const std::function<void(std::int64_t, std::int64_t)>& body) {
    if (opt.threads <= 1 || tasks <= 1) {
      body(0, tasks);
    } else {
      posenc::detail::ThreadPool::shared(opt.threads).run(opt.threads, tasks, body);
    }
  }

  // Matmul over rows [0, rows), split by blocks of 4 rows (the kernel's row block) across threads.
  void matmul_rows(MatMulArgs a, std::int64_t rows) {
    const std::int64_t blocks = (rows + 3) / 4;
    parallel(blocks, [&](std::int64_t b0, std::int64_t b1) {
      MatMulArgs part = a;
      part.x = a.x + 4 * b0 * a.x_stride;
      part.out = a.out + 4 * b0 * a.out_stride;
      part.rows = std::min(rows, 4 * b1) - 4 * b0;
      detail::matmul(part);
    });
  }

  void update_frequencies(Frequencies next) {
    if (same_angles(next, freqs)) return;
    if (size > 0) {
      profile.start();
      // rerotate_keys makes each position's rotation once per call,
      // so all layers go through one call: chunks of positions are gathered into
      // [position, layer, kv_dim], re-rotated and scattered back (5 calls, one per layer, made
      // re-rotation 42% of dynamic's time at ctx 2048).
      const Config& c = model->config();
      const std::int64_t KV = c.kv_dim(), row = c.layers * KV;
      rerotate_scratch.resize(z(std::min(size, kRerotateChunk) * row));
      for (std::int64_t p0 = 0; p0 < size; p0 += kRerotateChunk) {
        const std::int64_t n = std::min(kRerotateChunk, size - p0);
        float* scratch = rerotate_scratch.data();
        for (std::int64_t l = 0; l < c.layers; ++l) {
          for (std::int64_t p = 0; p < n; ++p)
            std::copy_n(k_cache.data() + (l * opt.capacity + p0 + p) * KV, KV,
                        scratch + p * row + l * KV);
        }
        const TensorView keys{scratch,      DType::kF32, n,           c.layers * c.kv_heads,
                              c.head_dim(), row,         c.head_dim()};
        rerotate_keys(freqs, next, keys,
                      std::span<const std::int32_t>(all_positions.data() + p0, z(n)), opt.threads);
        for (std::int64_t l = 0; l < c.layers; ++l) {
          for (std::int64_t p = 0; p < n; ++p)
            std::copy_n(scratch + p * row + l * KV, KV,
                        k_cache.data() + (l * opt.capacity + p0 + p) * KV);
        }
      }
      std::fill(blocked.begin(), blocked.end(), 0);
      ++rerotations;
      profile.stop(kRerotate);
    }
    freqs = std::move(next);
  }

  void step(std::span<const std::int32_t> tokens, float* logits, std::int64_t first_logit);

  // Layer l's keys [blocked[l], end) into k_blocks.
  void block_keys(std::int64_t l, std::int64_t end) {
    const Config& c = model->config();
    const std::int64_t hd = c.head_dim(), KV = c.kv_dim();
    const std::int64_t blocks = (opt.capacity + detail::kKeyBlock - 1) / detail::kKeyBlock;
    if (k_blocks.empty()) {
      k_blocks.assign(z(c.layers * c.kv_heads * blocks * hd * detail::kKeyBlock), 0.0f);
      blocked.assign(z(c.layers), 0);
    }
    for (std::int64_t p = blocked[z(l)]; p < end; ++p) {
      const float* src = k_cache.data() + (l * opt.capacity + p) * KV;
      for (std::int64_t g = 0; g < c.kv_heads; ++g) {
        float* dst =
            k_blocks.data() +
            ((l * c.kv_heads + g) * blocks + p / detail::kKeyBlock) * hd * detail::kKeyBlock +
            p % detail::kKeyBlock;
        for (std::int64_t e = 0; e < hd; ++e) dst[e * detail::kKeyBlock] = src[g * hd + e];
      }
    }
    blocked[z(l)] = end;
  }

  const float* key_blocks(std::int64_t l, std::int64_t g) const {
    const Config& c = model->config();
    const std::int64_t blocks = (opt.capacity + detail::kKeyBlock - 1) / detail::kKeyBlock;
    return k_blocks.data() + (l * c.kv_heads + g) * blocks * c.head_dim() * detail::kKeyBlock;
  }

  // Tokens [s0, s1) of a forward() call as one step.
  void run_step(std::span<const std::int32_t> tokens, std::span<float> logits,
                std::int64_t first_logit, std::int64_t s0, std::int64_t s1) {
    const std::int64_t vocab = model->config().vocab_size;
    const std::int64_t first = std::max(first_logit, s0);
    float* out = first < s1 ? logits.data() + (first - first_logit) * vocab : nullptr;
    step(tokens.subspan(z(s0), z(s1 - s0)), out, first - s0);
  }
};

void Session::State::step(std::span<const std::int32_t> tokens, float* logits,
                          std::int64_t first_logit) {
  const Config& c = model->config();
  const Weights& w = model->weights();
  const std::int64_t m = static_cast<std::int64_t>(tokens.size());
  const std::int64_t H = c.dim, I = c.hidden_dim, KV = c.kv_dim(), hd = c.head_dim(),
                     V = c.vocab_size;
  const std::int64_t group = c.heads / c.kv_heads;
  const std::int64_t p0 = size;
  const std::span<const std::int32_t> positions(all_positions.data() + p0, z(m));
  const float scale =
      static_cast<float>(freqs.softmax_scale_multiplier / std::sqrt(static_cast<double>(hd)));

  for (std::int64_t t = 0; t < m; ++t) {
    const float* e = w.embedding.data() + tokens[z(t)] * H;
    std::copy(e, e + H, x.data() + t * H);
  }
  tokens_run += m;
  for (std::int64_t l = 0; l < c.layers; ++l) {
    // q, k, v of the step's tokens.
    const std::int64_t blocks = (m + 3) / 4;
    profile.start();
    parallel(blocks, [&](std::int64_t b0, std::int64_t b1) {
      const std::int64_t t0 = 4 * b0, t1 = std::min(m, 4 * b1);
      for (std::int64_t t = t0; t < t1; ++t)
        rmsnorm(xb.data() + t * H, x.data() + t * H, w.attention_norm.data() + l * H, H);
      MatMulArgs a{xb.data() + t0 * H, H, t1 - t0, nullptr, H, 0, nullptr, 0, false};
      a.w = w.wq_t.data() + l * H * H, a.cols = H, a.out = q.data() + t0 * H, a.out_stride = H;
      detail::matmul(a);
      a.w = w.wk_t.data() + l * H * KV, a.cols = KV, a.out = k.data() + t0 * KV, a.out_stride = KV;
      detail::matmul(a);
      a.w = w.wv_t.data() + l * H * KV, a.out = v.data() + t0 * KV;
      detail::matmul(a);
    });
    profile.stop(kQkv);
    profile.start();
    RopeArgs rope;
    rope.q = TensorView::contiguous(q.data(), DType::kF32, m, c.heads, hd);
    rope.k = TensorView::contiguous(k.data(), DType::kF32, m, c.kv_heads, hd);
    rope.positions = positions;
    apply_rope(freqs, rope);
    for (std::int64_t t = 0; t < m; ++t) {
      std::copy_n(k.data() + t * KV, KV, k_cache.data() + (l * opt.capacity + p0 + t) * KV);
      std::copy_n(v.data() + t * KV, KV, v_cache.data() + (l * opt.capacity + p0 + t) * KV);
    }

    const bool decoding = m <= detail::kPerQueryMaxTokens;
    if (decoding) block_keys(l, p0 + m);

    profile.stop(kRope);
    profile.start();
    // Attention: tasks are (head, tile of query tokens); decoding one token, (kv head): the
    // group's query heads share the keys and values, and their sums interleave.
    const std::int64_t tile = detail::attention_tile_tokens();
    const std::int64_t tiles = (m + tile - 1) / tile;
    const bool by_group = m == 1 && group <= detail::kPerQueryMaxTokens;
    if (by_group) group_positions.assign(z(group), static_cast<std::int32_t>(p0));
    parallel(by_group ? c.kv_heads : c.heads * tiles, [&](std::int64_t t0, std::int64_t t1) {
      for (std::int64_t task = t0; task < t1; ++task) {
        const std::int64_t h = by_group ? task * group : task / tiles;
        const std::int64_t first = by_group ? 0 : (task % tiles) * tile;
        const std::int64_t g = h / group;
        detail::AttentionArgs a;
        a.q = q.data() + first * H + h * hd;
        a.q_stride = by_group ? hd : H;
        a.positions = by_group ? group_positions.data() : positions.data() + first;
        a.tokens = by_group ? group : std::min(tile, m - first);
        a.k = k_cache.data() + l * opt.capacity * KV + g * hd;
        a.k_stride = KV;
        a.v = v_cache.data() + l * opt.capacity * KV + g * hd;
        a.v_stride = KV;
        if (decoding) a.k_blocks = key_blocks(l, g);
        a.head_dim = hd;
        a.scale = scale;
        a.out = att.data() + first * H + h * hd;
        a.out_stride = by_group ? hd : H;
        detail::attend(a);
      }
    });

    profile.stop(kAttention);
    profile.start();
    // Output projection and feed-forward, by token.
    parallel(blocks, [&](std::int64_t b0, std::int64_t b1) {
      const std::int64_t t0 = 4 * b0, t1 = std::min(m, 4 * b1), rows = t1 - t0;
      detail::matmul({att.data() + t0 * H, H, rows, w.wo_t.data() + l * H * H, H, H,
                      x.data() + t0 * H, H, true});
      for (std::int64_t t = t0; t < t1; ++t)
        rmsnorm(xb.data() + t * H, x.data() + t * H, w.ffn_norm.data() + l * H, H);
      detail::matmul({xb.data() + t0 * H, H, rows, w.gate_t.data() + l * H * I, H, I,
                      hb.data() + t0 * I, I, false});
      detail::matmul({xb.data() + t0 * H, H, rows, w.up_t.data() + l * H * I, H, I,
                      hb2.data() + t0 * I, I, false});
      for (std::int64_t t = t0; t < t1; ++t)
        detail::silu_mul(hb.data() + t * I, hb2.data() + t * I, I);
      detail::matmul({hb.data() + t0 * I, I, rows, w.down_t.data() + l * I * H, I, H,
                      x.data() + t0 * H, H, true});
    });
    profile.stop(kFfn);
  }
  size += m;

  if (first_logit < m) {
    profile.start();
    const std::int64_t rows = m - first_logit;
    for (std::int64_t t = first_logit; t < m; ++t)
      rmsnorm(xb.data() + t * H, x.data() + t * H, w.final_norm.data(), H);
    matmul_rows(
        {xb.data() + first_logit * H, H, rows, w.embedding_t.data(), H, V, logits, V, false}, rows);
    profile.stop(kLogits);
  }
}

std::int64_t kv_cache_bytes_per_position(const Config& c) { return 2 * c.layers * c.kv_dim() * 4; }

std::int64_t max_capacity(const Config& c) {
  return std::min(kMaxSessionPositions,
                  static_cast<std::int64_t>(kMaxKvCacheBytes) / kv_cache_bytes_per_position(c));
}

Session::Session(const Model& model, SessionOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  const Config& c = model.config();
  s.model = &model;
  s.opt = std::move(options);
  if (s.opt.capacity < 1)
    throw Error("session: capacity (" + std::to_string(s.opt.capacity) + ") must be at least 1");
  if (s.opt.capacity > max_capacity(c)) {
    throw Error("session: capacity (" + std::to_string(s.opt.capacity) + ") must be at most " +
                std::to_string(max_capacity(c)) + " positions: the KV cache takes " +
                std::to_string(kv_cache_bytes_per_position(c)) +
                " bytes a position and is limited to " + std::to_string(kMaxKvCacheBytes >> 30) +
                " GiB (kMaxKvCacheBytes)");
  }
  check_threads(s.opt.threads, "session");
  if (s.opt.step < 1)
    throw Error("session: step (" + std::to_string(s.opt.step) + ") must be at least 1");
  if (s.opt.rope.head_dim != c.head_dim()) {
    throw Error("session: the RoPE spec's head_dim (" + std::to_string(s.opt.rope.head_dim) +
                ") must equal the model's (" + std::to_string(c.head_dim()) + ")");
  }
  s.initial = compute_frequencies(s.opt.rope, s.opt.numerics, 0);
  s.freqs = s.initial;
  s.k_cache.assign(z(s.opt.capacity * c.layers * c.kv_dim()), 0.0f);
  s.v_cache.assign(s.k_cache.size(), 0.0f);
  s.all_positions.resize(z(s.opt.capacity));
  std::iota(s.all_positions.begin(), s.all_positions.end(), 0);
  const std::int64_t rows = std::min(s.step_rows(), s.opt.capacity);
  for (auto* buf : {&s.x, &s.xb, &s.q, &s.att}) buf->assign(z(rows * c.dim), 0.0f);
  for (auto* buf : {&s.k, &s.v}) buf->assign(z(rows * c.kv_dim()), 0.0f);
  for (auto* buf : {&s.hb, &s.hb2}) buf->assign(z(rows * c.hidden_dim), 0.0f);
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::int64_t Session::size() const { return state_->size; }
const Frequencies& Session::frequencies() const { return state_->freqs; }
std::int64_t Session::rerotations() const { return state_->rerotations; }

void Session::reset() {
  state_->size = 0;
  state_->rerotations = 0;
  std::fill(state_->blocked.begin(), state_->blocked.end(), 0);
  state_->freqs = state_->initial;
}

void Session::forward(std::span<const std::int32_t> tokens, std::span<float> logits,
                      std::int64_t first_logit) {
  State& s = *state_;
  const Config& c = s.model->config();
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (s.size + n > s.opt.capacity) {
    throw Error("session: " + std::to_string(n) + " more tokens after " + std::to_string(s.size) +
                " would overflow the KV cache's capacity (" + std::to_string(s.opt.capacity) + ")");
  }
  if (first_logit < 0 || first_logit > n) {
    throw Error("session: first_logit (" + std::to_string(first_logit) + ") must be in [0, " +
                std::to_string(n) + "]");
  }
  const std::int64_t need = (n - first_logit) * c.vocab_size;
  if (static_cast<std::int64_t>(logits.size()) < need) {
    throw Error("session: logits holds " + std::to_string(logits.size()) + " floats; " +
                std::to_string(need) + " needed");
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (tokens[z(i)] < 0 || tokens[z(i)] >= c.vocab_size) {
      throw Error("session: token " + std::to_string(i) + " (" + std::to_string(tokens[z(i)]) +
                  ") is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    }
  }
  if (!depends_on_length(s.opt.rope)) {
    for (std::int64_t s0 = 0; s0 < n; s0 += s.step_rows())
      s.run_step(tokens, logits, first_logit, s0, std::min(n, s0 + s.step_rows()));
    return;
  }
  // Dynamic methods: steps of opt.step tokens, each with the frequencies of the length at its end.
  // Consecutive steps whose frequencies are the same (every step up to the trained context) run
  // as one: the same bits (a step's split does not change the forward pass), fewer parallel
  // regions.
  // `ahead`: the frequencies of the next step, computed by the merge check that stopped at it.
  const std::int64_t step = s.opt.step;
  std::optional<Frequencies> ahead;
  for (std::int64_t s0 = 0; s0 < n;) {
    std::int64_t s1 = std::min(n, s0 + step);
    Frequencies f = ahead ? std::move(*ahead)
                          : compute_frequencies(s.opt.rope, s.opt.numerics, s.size + (s1 - s0));
    ahead.reset();
    while (s1 < n && std::min(n, s1 + step) - s0 <= s.step_rows()) {
      const std::int64_t next = std::min(n, s1 + step);
      Frequencies g = compute_frequencies(s.opt.rope, s.opt.numerics, s.size + (next - s0));
      if (!same_angles(g, f)) {
        ahead = std::move(g);  // the next step's: s.size + (next - s0) after this step
        break;
      }
      s1 = next;
    }
    s.update_frequencies(std::move(f));
    s.run_step(tokens, logits, first_logit, s0, s1);
    s0 = s1;
  }
}

}  // namespace posenc::llama
