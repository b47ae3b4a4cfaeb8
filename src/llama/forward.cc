// The Llama 2 forward pass over a KV cache: llama::Session, and the layer loop of a batch
// (session_state.h has the plan of the whole pass and the files it is spread over).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <utility>

#include "llama/session_state.h"
#include "posenc/core/error.h"
#include "posenc/core/threads.h"

namespace posenc::llama {
namespace {

using detail::kMaxRerotationRowBytes;
using detail::kPartNames;
using detail::kRopeTaskTokens;
using detail::MatMulArgs;
using enum detail::Part;
using detail::SubStep;
using detail::z;

// x / sqrt(mean(x^2) + eps) * w, summed in float in order (llama2.c `rmsnorm`).
void rmsnorm(float* out, const float* x, const float* w, std::int64_t n) {
  float ss = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) ss = ss + x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + kRmsNormEps);
  for (std::int64_t i = 0; i < n; ++i) out[i] = w[i] * (scale * x[i]);
}

}  // namespace

Session::State::~State() {
  if (!profile.on || tokens_run == 0) return;
  std::string line = "profile: " + std::string(method_name(opt.rope.method)) + ", capacity " +
                     std::to_string(opt.capacity) + ", " + std::to_string(tokens_run) +
                     " tokens, " + std::to_string(opt.threads) + " threads; part: wall s / cpu s:";
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

void Session::State::run_step(std::span<const std::int32_t> tokens, std::span<float> logits,
                              std::int64_t first_logit, std::int64_t s0, std::int64_t s1,
                              std::span<SubStep> batch) {
  const std::int64_t vocab = model->config().vocab_size;
  const std::int64_t first = std::max(first_logit, s0);
  float* out = first < s1 ? logits.data() + (first - first_logit) * vocab : nullptr;
  step(tokens.subspan(z(s0), z(s1 - s0)), out, first - s0, batch);
}

void Session::State::step(std::span<const std::int32_t> tokens, float* logits,
                          std::int64_t first_logit, std::span<SubStep> subs) {
  const Config& c = model->config();
  const Weights& w = model->weights();
  const std::int64_t m = static_cast<std::int64_t>(tokens.size());
  const std::int64_t H = c.dim, I = c.hidden_dim, KV = c.kv_dim(), V = c.vocab_size;
  const std::int64_t group = c.heads / c.kv_heads;
  const std::int64_t tile = detail::attention_tile_tokens();
  const std::int64_t p0 = size;

  for (std::int64_t t = 0; t < m; ++t) {
    const float* e = w.embedding.data() + tokens[z(t)] * H;
    std::copy(e, e + H, x.data() + t * H);
  }
  tokens_run += m;
  // The rows of each re-rotation, shared by all layers.
  kept_rows.compact();
  const Frequencies* from = &freqs;
  for (SubStep& sub : subs) {
    if (sub.rerotate) {
      profile.start();
      rerotation_rows(sub, *from, p0 + sub.begin);
      profile.stop(kRerotate);
    }
    from = &sub.freqs;
  }
  for (std::int64_t l = 0; l < c.layers; ++l) {
    // q, k, v of the batch's tokens.
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

    const std::int64_t groups = layer_groups(subs);
    if (groups > 0) {
      profile.start();
      layer_by_groups(l, subs, groups);
      profile.stop(kAttention);
    } else {
      // Sub-steps in order: layer l's cached keys are re-rotated to the sub-step's frequencies
      // (from those of the sub-step before, as a forward pass in steps re-rotates them between
      // steps), its tokens' q and k rotated with them and appended, and its tokens attend.
      const Frequencies* cached = &freqs;  // the frequencies layer l's cached keys have now
      for (SubStep& sub : subs) {
        const std::int64_t ms = sub.end - sub.begin, ps = p0 + sub.begin;
        if (sub.rerotate) {
          profile.start();
          rerotate_layer(l, *cached, sub, ps);
          profile.stop(kRerotate);
        }
        cached = &sub.freqs;
        profile.start();
        // By tokens (a token's rotation does not depend on the others rotated with it).
        const std::int64_t rope_tasks = (ms + kRopeTaskTokens - 1) / kRopeTaskTokens;
        parallel_if(rope_tasks > 1, rope_tasks, [&](std::int64_t r0, std::int64_t r1) {
          rope_append(l, sub, sub.begin + r0 * kRopeTaskTokens,
                      std::min(sub.end, sub.begin + r1 * kRopeTaskTokens), 0, c.kv_heads);
        });
        if (ms <= detail::kPerQueryMaxTokens) block_keys(l, ps + ms);
        profile.stop(kRope);
        profile.start();
        // Attention: tasks are (head, tile of query tokens); decoding one token, (kv head): the
        // group's query heads share the keys and values, and their sums interleave.
        const bool by_group = ms == 1 && group <= detail::kPerQueryMaxTokens;
        const std::int64_t tasks = by_group ? c.kv_heads : c.heads * ((ms + tile - 1) / tile);
        parallel(tasks, [&](std::int64_t k0, std::int64_t k1) { attend(l, sub, k0, k1); });
        profile.stop(kAttention);
      }
    }

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
  for (SubStep& sub : subs) {
    if (sub.rerotate) ++rerotations;
  }
  freqs = subs.back().freqs;

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
  const std::int64_t rows = s.step_rows();
  if (!depends_on_length(s.opt.rope)) {
    s.sub_steps.resize(1);
    s.sub_steps[0].freqs = s.freqs;
    s.sub_steps[0].rerotate = false;
    for (std::int64_t s0 = 0; s0 < n; s0 += rows) {
      const std::int64_t s1 = std::min(n, s0 + rows);
      s.sub_steps[0].begin = 0;
      s.sub_steps[0].end = s1 - s0;
      s.run_step(tokens, logits, first_logit, s0, s1, s.sub_steps);
    }
    return;
  }
  // Dynamic methods: steps of opt.step tokens from the call's first, each with the frequencies
  // of the length at its end (the length before the call plus the step's end). Batches of up to
  // `rows` tokens hold whole steps, as sub-steps: consecutive steps with the same frequencies
  // (every step up to L) are one sub-step, and a sub-step with new frequencies re-rotates the
  // cached keys (unless there are none yet).
  const std::int64_t step = s.opt.step, before = s.size;
  std::int64_t used = 0;  // sub-steps of s.sub_steps in use
  std::int64_t k0 = 0;    // the next step's first token
  for (std::int64_t b0 = 0; b0 < n; b0 = k0) {
    used = 0;
    std::int64_t row_bytes = 0;
    while (k0 < n) {
      const std::int64_t k1 = std::min(n, k0 + step);
      if (k1 - b0 > rows) break;
      Frequencies f = compute_frequencies(s.opt.rope, s.opt.numerics, before + k1);
      const Frequencies& last = used == 0 ? s.freqs : s.sub_steps[z(used - 1)].freqs;
      const bool same = detail::same_angles(f, last);
      if (used > 0 && same) {
        s.sub_steps[z(used - 1)].end = k1 - b0;
      } else {
        // Frequencies with the same angles are not taken (a step keeps the Session's: their
        // other fields, seq_len, are not used).
        const bool rerotate = before + k0 > 0 && !same;
        const std::int64_t bytes = rerotate ? 2 * (before + k0) * c.head_dim() * 4 : 0;
        if (used > 0 && row_bytes + bytes > kMaxRerotationRowBytes) break;
        row_bytes += bytes;
        if (static_cast<std::int64_t>(s.sub_steps.size()) == used) s.sub_steps.emplace_back();
        SubStep& sub = s.sub_steps[z(used++)];
        sub.begin = k0 - b0;
        sub.end = k1 - b0;
        sub.freqs = same ? s.freqs : std::move(f);
        sub.rerotate = rerotate;
      }
      k0 = k1;
    }
    s.run_step(tokens, logits, first_logit, b0, k0,
               std::span<SubStep>(s.sub_steps.data(), z(used)));
  }
}

}  // namespace posenc::llama
