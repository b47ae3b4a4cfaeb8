// A sub-step of a Session's forward pass, layer by layer: q and k rotated and appended to the KV
// cache, attention over the cache, the key blocks of decoding, and a layer's sub-steps run by
// groups of kv heads on several threads (session_state.h).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "llama/session_state.h"
#include "posenc/rope/apply.h"

namespace posenc::llama {

using detail::kBlockKeysChunk;
using detail::SubStep;
using detail::z;

std::int64_t Session::State::layer_groups(std::span<const SubStep> subs) const {
  const Config& c = model->config();
  if (opt.threads <= 1) return 0;
  bool rerotates = false;
  for (const SubStep& sub : subs) {
    if (sub.end - sub.begin <= detail::kPerQueryMaxTokens || (sub.rerotate && !sub.rows)) return 0;
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

void Session::State::rope_append(std::int64_t l, const SubStep& sub, std::int64_t a, std::int64_t b,
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

void Session::State::attend(std::int64_t l, const SubStep& sub, std::int64_t k0, std::int64_t k1) {
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

void Session::State::layer_by_groups(std::int64_t l, std::span<const SubStep> subs,
                                     std::int64_t groups) {
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

void Session::State::block_keys(std::int64_t l, std::int64_t end) {
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

}  // namespace posenc::llama
