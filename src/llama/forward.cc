// The Llama 2 forward pass over a KV cache (llama2.c `forward`, batched over the tokens of a step).
//
// Tokens run in batches of up to max(step, 256). Per batch and per layer: the q/k/v projections
// by token (one parallel region), then for each sub-step of the batch the re-rotation of the
// cached keys (dynamic methods) by positions, RoPE and the append to the cache by tokens, and
// attention by (head, tile of query tokens), then the output projection and the feed-forward
// block by token (a dynamic batch that re-rotates, on several threads: RoPE, append,
// re-rotation and attention of all its sub-steps in one region per layer, by groups of kv heads:
// layer_by_groups). A static method's batch is one sub-step. A dynamic method's sub-steps are its
// steps (`step` tokens, each with the frequencies of the length at its end; consecutive ones with
// the same frequencies merged): only RoPE, the re-rotation of the cached keys and attention depend
// on a token's frequencies, so the projections and the feed-forward block run over the whole
// batch as for static methods, and every token's operations are those of a forward pass in steps
// (the same bits: tests/llama/llama_test.cc, DynamicBatchesGiveTheBitsOfOneCallPerStep).
//
// KV cache layout: keys and values [layer, position, kv_head, head_dim], so that one head-layer's
// keys are KV floats apart (128 bytes for stories260K: two cache lines a key, streamed by the
// prefetcher) instead of layers * KV, and a layer's keys are one contiguous block for the
// re-rotation (detail::Rerotation: its rows made once per sub-step for all layers).
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <utility>

#include "llama/kept_rows.h"
#include "llama/kernels.h"
#include "posenc/core/error.h"
#include "posenc/core/threads.h"
#include "posenc/llama/llama.h"
#include "posenc/rope/apply.h"
#include "util/aligned_allocator.h"
#include "util/thread_pool.h"

namespace posenc::llama {
namespace {

using detail::MatMulArgs;

std::size_t z(std::int64_t v) { return static_cast<std::size_t>(v); }

// Tokens per step of methods whose frequencies do not depend on the length: the step does not
// change their results, and longer steps mean fewer thread wake-ups (16 per step).
constexpr std::int64_t kStaticStep = 256;

// Re-rotations of fewer keys run on the calling thread. A pool run costs about a microsecond
// while the workers spin between runs (util/thread_pool.h), tens when they have to be woken;
// re-rotating 256 keys of one layer of stories260K (8K floats) takes a few microseconds. On the
// calling thread alone (below 2048 keys, before) it was a third of the dynamic methods' extra
// time at ctx 2048 on two threads (docs/eval.md, "Two threads").
constexpr std::int64_t kMinParallelKeyFloats = std::int64_t{1} << 13;
// Rows made on the calling thread below this (a CosSinStepper row is ~15 ns).
constexpr std::int64_t kMinParallelRows = 256;
// Tokens per task of RoPE and the append to the cache (a step of 256 tokens: 16 tasks).
constexpr std::int64_t kRopeTaskTokens = 16;
// Positions per task of copying keys into attention's key blocks for decoding (a multiple of
// detail::kKeyBlock).
constexpr std::int64_t kBlockKeysChunk = 512;
static_assert(kBlockKeysChunk % detail::kKeyBlock == 0);
// Positions per task of the re-rotation's parallel regions.
constexpr std::int64_t kRerotateChunk = 128;
// The rows of a batch's re-rotations (one [positions, head_dim] pair of tables per re-rotating
// sub-step, kept from the first layer to the last) take at most this much; a batch stops
// before a sub-step that would pass it (stories260K at ctx 8192: 512 KiB a sub-step).
constexpr std::int64_t kMaxRerotationRowBytes = std::int64_t{64} << 20;

// x / sqrt(mean(x^2) + eps) * w, summed in float in order (llama2.c `rmsnorm`).
void rmsnorm(float* out, const float* x, const float* w, std::int64_t n) {
  float ss = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) ss = ss + x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + kRmsNormEps);
  for (std::int64_t i = 0; i < n; ++i) out[i] = w[i] * (scale * x[i]);
}

// POSENC_PROFILE=1: each Session prints on stderr, when it is destroyed, the wall and CPU time
// (all threads) of each part of the forward pass (docs/eval.md, "Where the time goes"). A layer
// run by groups (layer_by_groups) counts as attention, its RoPE and re-rotation included;
// `rerotate` then holds the making of the re-rotation's rows.
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

// Tokens [begin, end) of a batch with frequencies `freqs`. rerotate: the cached keys, positions
// [0, batch start + begin), are re-rotated to `freqs` from the previous sub-step's frequencies
// (the Session's for the first) before the sub-step runs, in each layer; `rows`: c2 and s2 then
// point to detail::Rerotation's rows of those positions, [positions, head_dim] (kept ones,
// detail::KeptRows', or `own`'s), else each layer calls rerotate_keys.
struct SubStep {
  std::int64_t begin = 0, end = 0;
  Frequencies freqs;
  bool rerotate = false;
  bool rows = false;
  const float* c2 = nullptr;
  const float* s2 = nullptr;
  std::vector<float> own_c2, own_s2;
};

}  // namespace

struct Session::State {
  const Model* model = nullptr;
  SessionOptions opt;
  Frequencies initial;
  Frequencies freqs;
  std::int64_t size = 0;
  std::int64_t rerotations = 0;
  // 64-byte aligned: with rows of a multiple of 64 bytes, kv-head groups own whole cache lines.
  std::vector<float, posenc::detail::CacheLineAllocator<float>> k_cache, v_cache;
  // Decoding (steps of at most kPerQueryMaxTokens tokens): the keys again in attention's blocks,
  // [layer, kv_head, position / kKeyBlock, head_dim, kKeyBlock], allocated on the first such step;
  // blocked[l]: positions of layer l copied (0 after a re-rotation).
  std::vector<float> k_blocks;
  std::vector<std::int64_t> blocked;
  std::vector<std::int32_t> all_positions;  // 0, 1, ..., capacity - 1
  std::vector<SubStep> sub_steps;           // the batch's (kept: their rows' buffers are reused)
  detail::KeptRows kept_rows;               // re-rotation rows kept across batches and reset()
  // Scratch, [step, ...] row-major.
  // 64-byte aligned, so that groups of heads (layer_by_groups) write whole cache lines of q, k.
  using Scratch = std::vector<float, posenc::detail::CacheLineAllocator<float>>;
  Scratch x, xb, q, k, v, att, hb, hb2;
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

  // parallel() when the work is worth a pool wake-up, else on the calling thread.
  void parallel_if(bool worth_it, std::int64_t tasks,
                   const std::function<void(std::int64_t, std::int64_t)>& body) {
    if (!worth_it) {
      body(0, tasks);
    } else {
      parallel(tasks, body);
    }
  }

  // Rows [p0, p1) of the re-rotation from `from` to `to` into c2, s2 (rows p0.. of them).
  void make_rows(const Frequencies& from, const Frequencies& to, std::int64_t p0, std::int64_t p1,
                 float* c2, float* s2) {
    const std::int64_t hd = model->config().head_dim();
    const detail::Rerotation r(from, to);
    const std::int64_t chunks = (p1 - p0 + kRerotateChunk - 1) / kRerotateChunk;
    parallel_if(p1 - p0 >= kMinParallelRows, chunks, [&](std::int64_t t0, std::int64_t t1) {
      const std::int64_t a = p0 + t0 * kRerotateChunk, b = std::min(p1, p0 + t1 * kRerotateChunk);
      r.rows(a, b, c2 + (a - p0) * hd, s2 + (a - p0) * hd);
    });
  }

  // The rows of sub-step `sub`'s re-rotation of positions [0, count), from frequencies `from`:
  // kept ones (detail::KeptRows) where they are to be kept and fit, else the sub-step's own.
  void rerotation_rows(SubStep& sub, const Frequencies& from, std::int64_t count) {
    const std::int64_t hd = model->config().head_dim();
    sub.rows = detail::Rerotation::applies(from, sub.freqs);
    if (!sub.rows) return;
    const detail::RowPointers kept = kept_rows.find_or_make(
        from, sub.freqs, count, hd, sub.end - sub.begin > detail::kPerQueryMaxTokens,
        [&](std::int64_t p0, std::int64_t p1, float* c2, float* s2) {
          make_rows(from, sub.freqs, p0, p1, c2, s2);
        });
    if (kept.c2 != nullptr) {
      sub.c2 = kept.c2;
      sub.s2 = kept.s2;
      return;
    }
    // Grown, never shrunk nor cleared: a row is written before it is read.
    if (static_cast<std::int64_t>(sub.own_c2.size()) < count * hd) {
      sub.own_c2.resize(z(count * hd));
      sub.own_s2.resize(z(count * hd));
    }
    make_rows(from, sub.freqs, 0, count, sub.own_c2.data(), sub.own_s2.data());
    sub.c2 = sub.own_c2.data();
    sub.s2 = sub.own_s2.data();
  }

  // Layer l's cached keys [0, count) re-rotated from `from` to sub.freqs.
  void rerotate_layer(std::int64_t l, const Frequencies& from, const SubStep& sub,
                      std::int64_t count) {
    const Config& c = model->config();
    const std::int64_t KV = c.kv_dim(), hd = c.head_dim();
    float* keys = k_cache.data() + l * opt.capacity * KV;
    if (!sub.rows) {
      rerotate_keys(from, sub.freqs,
                    TensorView::contiguous(keys, DType::kF32, count, c.kv_heads, hd),
                    std::span<const std::int32_t>(all_positions.data(), z(count)), opt.threads);
    } else {
      const std::int64_t chunks = (count + kRerotateChunk - 1) / kRerotateChunk;
      parallel_if(
          count * KV >= kMinParallelKeyFloats, chunks, [&](std::int64_t t0, std::int64_t t1) {
            const std::int64_t p0 = t0 * kRerotateChunk, p1 = std::min(count, t1 * kRerotateChunk);
            detail::rerotate_rows(
                {keys + p0 * KV, KV, p1 - p0, c.kv_heads, hd, sub.c2 + p0 * hd, sub.s2 + p0 * hd});
          });
    }
    if (!blocked.empty()) blocked[z(l)] = 0;
  }

  // Groups of kv heads by which a batch's sub-steps run, or 0 to run them one region each: a
  // dynamic batch that re-rotates (with detail::Rerotation's rows), on several threads, no
  // sub-step decoding, and at least two groups whose slices of a key row are whole cache lines
  // (the cache is 64-byte aligned and its rows a multiple of 64 bytes: no two threads write
  // one line).
  std::int64_t layer_groups(std::span<const SubStep> subs) const {
    const Config& c = model->config();
    if (opt.threads <= 1) return 0;
    bool rerotates = false;
    for (const SubStep& sub : subs) {
      if (sub.end - sub.begin <= detail::kPerQueryMaxTokens || (sub.rerotate && !sub.rows))
        return 0;
      rerotates = rerotates || sub.rerotate;
    }
    if (!rerotates) return 0;
    const auto line = static_cast<std::int64_t>(posenc::detail::kCacheLine);
    const std::int64_t head_bytes = c.head_dim() * 4;
    const std::int64_t per_line = std::max<std::int64_t>(1, line / head_bytes);
    if ((per_line * head_bytes) % line != 0 || c.kv_heads % per_line != 0 ||
        c.kv_heads / per_line < 2)
      return 0;
    return c.kv_heads / per_line;
  }

  // Tokens [a, b) of the batch, in sub-step `sub` of layer l: the query heads of kv heads
  // [g0, g1) and those kv heads rotated, and their keys and values appended to the cache. (A
  // head's rotation does not depend on the other heads or tokens rotated with it.)
  void rope_append(std::int64_t l, const SubStep& sub, std::int64_t a, std::int64_t b,
                   std::int64_t g0, std::int64_t g1) {
    const Config& c = model->config();
    const std::int64_t H = c.dim, KV = c.kv_dim(), hd = c.head_dim(), group = c.heads / c.kv_heads;
    RopeArgs rope;
    rope.q = {q.data() + a * H + g0 * group * hd, DType::kF32, b - a, (g1 - g0) * group, hd, H, hd};
    rope.k = {k.data() + a * KV + g0 * hd, DType::kF32, b - a, g1 - g0, hd, KV, hd};
    rope.positions = std::span<const std::int32_t>(all_positions.data() + size + a, z(b - a));
    apply_rope(sub.freqs, rope);
    for (std::int64_t t = a; t < b; ++t) {
      const std::int64_t row = (l * opt.capacity + size + t) * KV + g0 * hd;
      std::copy_n(k.data() + t * KV + g0 * hd, (g1 - g0) * hd, k_cache.data() + row);
      std::copy_n(v.data() + t * KV + g0 * hd, (g1 - g0) * hd, v_cache.data() + row);
    }
  }

  // Attention tasks [k0, k1) of sub-step `sub` of layer l: (head, tile of query tokens), task
  // h tiles + i; decoding one token, (kv head): the group's query heads share the keys and
  // values, and their sums interleave.
  void attend(std::int64_t l, const SubStep& sub, std::int64_t k0, std::int64_t k1) {
    const Config& c = model->config();
    const std::int64_t H = c.dim, KV = c.kv_dim(), hd = c.head_dim(), group = c.heads / c.kv_heads;
    const std::int64_t ms = sub.end - sub.begin, ps = size + sub.begin;
    const std::int64_t tile = detail::attention_tile_tokens();
    const std::int64_t tiles = (ms + tile - 1) / tile;
    const bool by_group = ms == 1 && group <= detail::kPerQueryMaxTokens;
    const float scale =
        static_cast<float>(sub.freqs.softmax_scale_multiplier / std::sqrt(static_cast<double>(hd)));
    const std::int32_t* group_positions = all_positions.data() + ps;  // by_group: one position
    std::int32_t repeated[detail::kPerQueryMaxTokens];
    if (by_group) {
      std::fill_n(repeated, group, static_cast<std::int32_t>(ps));
      group_positions = repeated;
    }
    for (std::int64_t task = k0; task < k1; ++task) {
      const std::int64_t h = by_group ? task * group : task / tiles;
      const std::int64_t first = sub.begin + (by_group ? 0 : (task % tiles) * tile);
      const std::int64_t g = h / group;
      detail::AttentionArgs a;
      a.q = q.data() + first * H + h * hd;
      a.q_stride = by_group ? hd : H;
      a.positions = by_group ? group_positions : all_positions.data() + size + first;
      a.tokens = by_group ? group : std::min(tile, sub.end - first);
      a.k = k_cache.data() + l * opt.capacity * KV + g * hd;
      a.k_stride = KV;
      a.v = v_cache.data() + l * opt.capacity * KV + g * hd;
      a.v_stride = KV;
      if (ms <= detail::kPerQueryMaxTokens) a.k_blocks = key_blocks(l, g);
      a.head_dim = hd;
      a.scale = scale;
      a.out = att.data() + first * H + h * hd;
      a.out_stride = by_group ? hd : H;
      detail::attend(a);
    }
  }

  // Layer l's sub-steps by groups of kv heads (layer_groups): group G's kv heads
  // [G kvg, (G + 1) kvg) and their query heads. The region's tasks are the groups; the thread that
  // takes group G (its owner) runs G's sub-steps in order: it re-rotates G's cached keys, rotates
  // and appends G's tokens (the preparation), publishes the sub-step, and takes its attention
  // tasks one at a time. So a thread re-rotates, appends and attends to keys in its own core's
  // cache, and the sub-steps need no region each. A thread with no group left helps the owners
  // of started groups with their published tasks (claimed from the same counter, tagged with
  // the sub-step so that a claim never lands in another sub-step), and an owner prepares the
  // next sub-step, which rewrites the keys in place, only once every task of the previous one is
  // done, its helpers' included. No thread waits on a group nobody has started (the pool may
  // hand it to that very thread next). Each output is computed by the same operations wherever
  // it runs: the bits of the sub-steps run one region each.
  // Nothing inside the region may use the pool (apply_rope runs with its default 1 thread):
  // ThreadPool::run is not reentrant.
  void layer_by_groups(std::int64_t l, std::span<const SubStep> subs, std::int64_t groups) {
    const Config& c = model->config();
    const std::int64_t KV = c.kv_dim(), hd = c.head_dim(), group = c.heads / c.kv_heads;
    const std::int64_t kvg = c.kv_heads / groups;
    const std::int64_t tile = detail::attention_tile_tokens();
    const auto n_subs = static_cast<std::int64_t>(subs.size());
    const auto tasks_of = [&](std::int64_t s) {  // attention tasks of a group in sub-step s
      return kvg * group * ((subs[z(s)].end - subs[z(s)].begin + tile - 1) / tile);
    };
    // sync[G].claim: (sub-step << 32) | next task; a sub-step is published once prepared.
    constexpr std::int64_t kNone = -1;
    const auto tag = [](std::int64_t word) { return word >> 32; };
    const auto index = [](std::int64_t word) { return word & 0xffffffff; };
    // One cache line a group: an owner's counters are written at every task, and the other
    // thread should not lose its line to them.
    struct alignas(posenc::detail::kCacheLine) GroupSync {
      std::atomic<std::int64_t> claim{kNone * (std::int64_t{1} << 32)};
      std::atomic<bool> started{false}, finished{false};
    };
    struct alignas(posenc::detail::kCacheLine) Done {
      std::atomic<std::int64_t> n{0};
    };
    std::vector<GroupSync> sync(z(groups));
    std::vector<Done> done(z(groups * n_subs));  // tasks done, by (group, sub-step)
    // Counted done, and a group finished, even when what ran threw (the pool rethrows it after
    // the region): no thread then waits forever for it.
    struct Count {
      std::atomic<std::int64_t>& n;
      ~Count() { n.fetch_add(1, std::memory_order_release); }
    };
    struct Finish {
      std::atomic<bool>& f;
      ~Finish() { f.store(true, std::memory_order_release); }
    };
    const auto run_task = [&](std::int64_t G, std::int64_t s, std::int64_t i) {
      const Count count{done[z(G * n_subs + s)].n};
      attend(l, subs[z(s)], G * tasks_of(s) + i, G * tasks_of(s) + i + 1);
    };
    const auto all_started = [&] {
      return std::all_of(sync.begin(), sync.end(), [](const GroupSync& g) {
        return g.started.load(std::memory_order_acquire);
      });
    };
    parallel(groups, [&](std::int64_t G0, std::int64_t G1) {
      for (std::int64_t G = G0; G < G1; ++G) {
        sync[z(G)].started.store(true, std::memory_order_release);
        const Finish finish{sync[z(G)].finished};
        for (std::int64_t s = 0; s < n_subs; ++s) {
          const SubStep& sub = subs[z(s)];
          for (posenc::detail::Backoff wait;
               s > 0 &&
               done[z(G * n_subs + s - 1)].n.load(std::memory_order_acquire) < tasks_of(s - 1);)
            wait.pause();
          if (sub.rerotate) {
            detail::rerotate_rows({k_cache.data() + l * opt.capacity * KV + G * kvg * hd, KV,
                                   size + sub.begin, kvg, hd, sub.c2, sub.s2});
          }
          rope_append(l, sub, sub.begin, sub.end, G * kvg, (G + 1) * kvg);
          sync[z(G)].claim.store(s << 32, std::memory_order_release);
          for (std::int64_t i;
               (i = index(sync[z(G)].claim.fetch_add(1, std::memory_order_acq_rel))) < tasks_of(s);)
            run_task(G, s, i);
        }
      }
      // Help the owners of the other groups: take their published tasks; with none to take,
      // wait for their next sub-step only once every group is started (else return to the
      // pool, which may have a group for this thread).
      for (std::int64_t G = 0; G < groups; ++G) {
        if (!sync[z(G)].started.load(std::memory_order_acquire)) continue;
        for (posenc::detail::Backoff wait; !sync[z(G)].finished.load(std::memory_order_acquire);) {
          std::int64_t word = sync[z(G)].claim.load(std::memory_order_acquire);
          const std::int64_t s = tag(word);
          if (s == kNone || index(word) >= tasks_of(s)) {
            if (s == n_subs - 1 || !all_started()) break;  // the last tasks are all taken
            wait.pause();
            continue;
          }
          if (sync[z(G)].claim.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel))
            run_task(G, s, index(word));
        }
      }
    });
    if (!blocked.empty()) blocked[z(l)] = 0;
  }

  void step(std::span<const std::int32_t> tokens, float* logits, std::int64_t first_logit,
            std::span<SubStep> subs);

  // Layer l's keys [blocked[l], end) into k_blocks.
  void block_keys(std::int64_t l, std::int64_t end) {
    const Config& c = model->config();
    const std::int64_t hd = c.head_dim(), KV = c.kv_dim();
    const std::int64_t blocks = (opt.capacity + detail::kKeyBlock - 1) / detail::kKeyBlock;
    if (k_blocks.empty()) {
      k_blocks.assign(z(c.layers * c.kv_heads * blocks * hd * detail::kKeyBlock), 0.0f);
      blocked.assign(z(c.layers), 0);
    }
    // By chunks of kBlockKeysChunk positions (whole blocks: no two tasks write one block); after
    // a re-rotation a decoded token copies the whole layer again.
    const std::int64_t from = blocked[z(l)], c0 = from / kBlockKeysChunk,
                       chunks = (end + kBlockKeysChunk - 1) / kBlockKeysChunk - c0;
    parallel_if(chunks > 1, chunks, [&](std::int64_t t0, std::int64_t t1) {
      const std::int64_t p0 = std::max(from, (c0 + t0) * kBlockKeysChunk),
                         p1 = std::min(end, (c0 + t1) * kBlockKeysChunk);
      for (std::int64_t p = p0; p < p1; ++p) {
        const float* src = k_cache.data() + (l * opt.capacity + p) * KV;
        for (std::int64_t g = 0; g < c.kv_heads; ++g) {
          float* dst =
              k_blocks.data() +
              ((l * c.kv_heads + g) * blocks + p / detail::kKeyBlock) * hd * detail::kKeyBlock +
              p % detail::kKeyBlock;
          for (std::int64_t e = 0; e < hd; ++e) dst[e * detail::kKeyBlock] = src[g * hd + e];
        }
      }
    });
    blocked[z(l)] = end;
  }

  const float* key_blocks(std::int64_t l, std::int64_t g) const {
    const Config& c = model->config();
    const std::int64_t blocks = (opt.capacity + detail::kKeyBlock - 1) / detail::kKeyBlock;
    return k_blocks.data() + (l * c.kv_heads + g) * blocks * c.head_dim() * detail::kKeyBlock;
  }

  // Tokens [s0, s1) of a forward() call as one batch.
  void run_step(std::span<const std::int32_t> tokens, std::span<float> logits,
                std::int64_t first_logit, std::int64_t s0, std::int64_t s1,
                std::span<SubStep> batch) {
    const std::int64_t vocab = model->config().vocab_size;
    const std::int64_t first = std::max(first_logit, s0);
    float* out = first < s1 ? logits.data() + (first - first_logit) * vocab : nullptr;
    step(tokens.subspan(z(s0), z(s1 - s0)), out, first - s0, batch);
  }
};

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
