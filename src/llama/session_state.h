// src/llama/session_state.h: a llama::Session's state and the parts of its forward pass (internal).
//
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
//
// The pass lives in three files, one concept each:
//   forward.cc             llama::Session (its checks, and a call's tokens cut into batches and
//                          sub-steps) and the layer loop: embeddings, q/k/v projections, output
//                          projection, feed-forward block, logits
//   session_attention.cc   a sub-step's RoPE and append to the cache, attention, the key blocks of
//                          decoding, and a layer run by groups of kv heads
//   session_rerotation.cc  the re-rotation of the cached keys (dynamic methods) and its rows
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "llama/kept_rows.h"
#include "llama/kernels.h"
#include "posenc/core/frequencies.h"
#include "posenc/llama/llama.h"
#include "util/aligned_allocator.h"
#include "util/thread_pool.h"

namespace posenc::llama {
namespace detail {

inline std::size_t z(std::int64_t v) { return static_cast<std::size_t>(v); }

// Tokens per step of methods whose frequencies do not depend on the length: the step does not
// change their results, and longer steps mean fewer thread wake-ups (16 per step).
inline constexpr std::int64_t kStaticStep = 256;

// Re-rotations of fewer keys run on the calling thread. A pool run costs about a microsecond
// while the workers spin between runs (util/thread_pool.h), tens when they have to be woken;
// re-rotating 256 keys of one layer of stories260K (8K floats) takes a few microseconds. On the
// calling thread alone (below 2048 keys, before) it was a third of the dynamic methods' extra
// time at ctx 2048 on two threads (docs/eval.md, "Two threads").
inline constexpr std::int64_t kMinParallelKeyFloats = std::int64_t{1} << 13;
// Rows made on the calling thread below this (a CosSinStepper row is ~15 ns).
inline constexpr std::int64_t kMinParallelRows = 256;
// Tokens per task of RoPE and the append to the cache (a step of 256 tokens: 16 tasks).
inline constexpr std::int64_t kRopeTaskTokens = 16;
// Positions per task of copying keys into attention's key blocks for decoding (a multiple of
// detail::kKeyBlock).
inline constexpr std::int64_t kBlockKeysChunk = 512;
static_assert(kBlockKeysChunk % detail::kKeyBlock == 0);
// Positions per task of the re-rotation's parallel regions.
inline constexpr std::int64_t kRerotateChunk = 128;
// The rows of a batch's re-rotations (one [positions, head_dim] pair of tables per re-rotating
// sub-step, kept from the first layer to the last) take at most this much; a batch stops
// before a sub-step that would pass it (stories260K at ctx 8192: 512 KiB a sub-step).
inline constexpr std::int64_t kMaxRerotationRowBytes = std::int64_t{64} << 20;

// POSENC_PROFILE=1: each Session prints on stderr, when it is destroyed, the wall and CPU time
// (all threads) of each part of the forward pass (docs/eval.md, "Where the time goes"). A layer
// run by groups (layer_by_groups) counts as attention, its RoPE and re-rotation included;
// `rerotate` then holds the making of the re-rotation's rows.
enum Part { kQkv, kRope, kAttention, kFfn, kLogits, kRerotate, kParts };
inline constexpr const char* kPartNames[kParts] = {"qkv", "rope",   "attention",
                                                   "ffn", "logits", "rerotate"};

inline double process_cpu_seconds() {
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

}  // namespace detail

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
  std::vector<detail::SubStep> sub_steps;   // the batch's (kept: their rows' buffers are reused)
  detail::KeptRows kept_rows;               // re-rotation rows kept across batches and reset()
  // Scratch, [step, ...] row-major.
  // 64-byte aligned, so that groups of heads (layer_by_groups) write whole cache lines of q, k.
  using Scratch = std::vector<float, posenc::detail::CacheLineAllocator<float>>;
  Scratch x, xb, q, k, v, att, hb, hb2;
  detail::Profile profile;
  std::int64_t tokens_run = 0;

  ~State();

  // Rows of the step buffers: static methods run in steps of max(step, 256) tokens; dynamic ones
  // in steps of `step` tokens, consecutive steps with the same frequencies merged up to as many.
  std::int64_t step_rows() const { return std::max(opt.step, detail::kStaticStep); }

  void parallel(std::int64_t tasks, const std::function<void(std::int64_t, std::int64_t)>& body) {
    if (opt.threads <= 1 || tasks <= 1) {
      body(0, tasks);
    } else {
      posenc::detail::ThreadPool::shared(opt.threads).run(opt.threads, tasks, body);
    }
  }

  // Matmul over rows [0, rows), split by blocks of 4 rows (the kernel's row block) across threads.
  void matmul_rows(detail::MatMulArgs a, std::int64_t rows) {
    const std::int64_t blocks = (rows + 3) / 4;
    parallel(blocks, [&](std::int64_t b0, std::int64_t b1) {
      detail::MatMulArgs part = a;
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

  // The re-rotation of the cached keys (session_rerotation.cc).

  // Rows [p0, p1) of the re-rotation from `from` to `to` into c2, s2 (rows p0.. of them).
  void make_rows(const Frequencies& from, const Frequencies& to, std::int64_t p0, std::int64_t p1,
                 float* c2, float* s2);

  // The rows of sub-step `sub`'s re-rotation of positions [0, count), from frequencies `from`:
  // kept ones (detail::KeptRows) where they are to be kept and fit, else the sub-step's own.
  void rerotation_rows(detail::SubStep& sub, const Frequencies& from, std::int64_t count);

  // Layer l's cached keys [0, count) re-rotated from `from` to sub.freqs.
  void rerotate_layer(std::int64_t l, const Frequencies& from, const detail::SubStep& sub,
                      std::int64_t count);

  // A sub-step's RoPE, append and attention (session_attention.cc).

  // Groups of kv heads by which a batch's sub-steps run, or 0 to run them one region each: a
  // dynamic batch that re-rotates (with detail::Rerotation's rows), on several threads, no
  // sub-step decoding, and at least two groups whose slices of a key row are whole cache lines
  // (the cache is 64-byte aligned and its rows a multiple of 64 bytes: no two threads write
  // one line).
  std::int64_t layer_groups(std::span<const detail::SubStep> subs) const;

  // Tokens [a, b) of the batch, in sub-step `sub` of layer l: the query heads of kv heads
  // [g0, g1) and those kv heads rotated, and their keys and values appended to the cache. (A
  // head's rotation does not depend on the other heads or tokens rotated with it.)
  void rope_append(std::int64_t l, const detail::SubStep& sub, std::int64_t a, std::int64_t b,
                   std::int64_t g0, std::int64_t g1);

  // Attention tasks [k0, k1) of sub-step `sub` of layer l: (head, tile of query tokens), task
  // h tiles + i; decoding one token, (kv head): the group's query heads share the keys and
  // values, and their sums interleave.
  void attend(std::int64_t l, const detail::SubStep& sub, std::int64_t k0, std::int64_t k1);

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
  void layer_by_groups(std::int64_t l, std::span<const detail::SubStep> subs, std::int64_t groups);

  // Layer l's keys [blocked[l], end) into k_blocks.
  void block_keys(std::int64_t l, std::int64_t end);

  // Layer l's key blocks of kv head g.
  const float* key_blocks(std::int64_t l, std::int64_t g) const {
    const Config& c = model->config();
    const std::int64_t blocks = (opt.capacity + detail::kKeyBlock - 1) / detail::kKeyBlock;
    return k_blocks.data() + (l * c.kv_heads + g) * blocks * c.head_dim() * detail::kKeyBlock;
  }

  // The layer loop (forward.cc).
  void step(std::span<const std::int32_t> tokens, float* logits, std::int64_t first_logit,
            std::span<detail::SubStep> subs);

  // Tokens [s0, s1) of a forward() call as one batch.
  void run_step(std::span<const std::int32_t> tokens, std::span<float> logits,
                std::int64_t first_logit, std::int64_t s0, std::int64_t s1,
                std::span<detail::SubStep> batch);
};

}  // namespace posenc::llama
