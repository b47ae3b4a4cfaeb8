// rope_append_kv_cache: argument checks and cache addressing (vLLM slots, FlashInfer pages),
// then per token: its cos/sin row, q rotated in place (rotate.cc), k rotated and v converted
// straight into the cache (kv_cache_kernel.cc). Every check runs before the first write.
#include "posenc/rope/kv_cache.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <memory_resource>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <hwy/cache_control.h>

#include "posenc/core/error.h"
#include "posenc/core/threads.h"
#include "rope/kernels/kv_cache_kernel.h"
#include "rope/kernels/rotate.h"
#include "rope/kv_cache_streaming.h"
#include "rope/rope_rows.h"
#include "rope/software_prefetch.h"
#include "util/thread_pool.h"

namespace posenc {
namespace {

constexpr const char* kWho = "rope_append_kv_cache";

// As apply.cc: below this many elements a worker's wake-up costs more than the work.
constexpr std::int64_t kMinParallelElements = std::int64_t{1} << 16;

std::atomic<std::int64_t>& stream_cache_threshold() {
  static std::atomic<std::int64_t> bytes{detail::kDefaultStreamCacheBytes};
  return bytes;
}

std::string str(std::int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const std::string& what) { throw Error(std::string(kWho) + ": " + what); }

void check_cache(const KvCache& c, const RopeSpec& spec) {
  if (c.pages < 0) fail("cache pages (" + str(c.pages) + ") must not be negative");
  if (c.page_size <= 0) fail("cache page_size (" + str(c.page_size) + ") must be positive");
  if (c.heads <= 0) fail("cache heads (" + str(c.heads) + ") must be positive");
  if (c.head_dim != spec.head_dim) {
    fail("cache head_dim (" + str(c.head_dim) + ") must equal the spec's head_dim (" +
         str(spec.head_dim) + ")");
  }
  if (c.pages > 0 && (c.key == nullptr || c.value == nullptr))
    fail(std::string("cache ") + (c.key == nullptr ? "key" : "value") + " is null");
  // No two (page, entry, head) cells may share memory: sorted by stride, each stride must step
  // over everything the smaller ones span.
  std::array<std::pair<std::int64_t, std::int64_t>, 3> dims = {
      {{c.head_stride, c.heads}, {c.entry_stride, c.page_size}, {c.page_stride, c.pages}}};
  std::sort(dims.begin(), dims.end());
  std::int64_t span = c.head_dim;
  for (const auto& [stride, extent] : dims) {
    if (extent <= 1) continue;
    if (stride < span) {
      fail("cache strides (page_stride " + str(c.page_stride) + ", entry_stride " +
           str(c.entry_stride) + ", head_stride " + str(c.head_stride) + ") overlap: a stride of " +
           str(stride) + " must step over the " + str(span) + " elements the smaller strides span");
    }
    span = stride * (extent - 1) + span;
  }
  auto check_scale = [&](float scale, const char* name) {
    if (c.dtype == CacheDType::kFp8E4M3) {
      if (!(scale > 0) || !std::isfinite(scale)) {
        fail(std::string("cache ") + name + " (" + std::to_string(scale) +
             ") must be positive and finite");
      }
    } else if (scale != 1.0f) {
      fail(std::string("cache ") + name + " (" + std::to_string(scale) + ") applies to fp8_e4m3 " +
           "only and must be 1 for a " + std::string(cache_dtype_name(c.dtype)) + " cache");
    }
  };
  check_scale(c.k_scale, "k_scale");
  check_scale(c.v_scale, "v_scale");
}

struct Cell {
  std::int64_t page, entry;
};

// Each token's (page, entry), from vLLM's slot_mapping or FlashInfer's paged index; the vectors
// from `mem`.
std::pmr::vector<Cell> resolve_cells(const KvCache& c, const KvAppendArgs& a, std::int64_t tokens,
                                     std::pmr::memory_resource* mem) {
  std::pmr::vector<Cell> cells(static_cast<std::size_t>(tokens), mem);
  const std::int64_t slots = c.pages * c.page_size;
  if (c.layout == KvCacheLayout::kVllm) {
    if (a.paged) fail("paged is set, but a vllm cache is addressed by slot_mapping");
    if (static_cast<std::int64_t>(a.slot_mapping.size()) != tokens) {
      fail("slot_mapping has " + str(static_cast<std::int64_t>(a.slot_mapping.size())) +
           " entries; expected one per token (" + str(tokens) + ")");
    }
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t s = a.slot_mapping[static_cast<std::size_t>(t)];
      if (s < 0 || s >= slots) {
        fail("slot_mapping[" + str(t) + "] (" + str(s) + ") must be in [0, " + str(slots) +
             ") (num_blocks " + str(c.pages) + " x block_size " + str(c.page_size) + ")");
      }
      cells[static_cast<std::size_t>(t)] = {s / c.page_size, s % c.page_size};
    }
    return cells;
  }
  const std::string layout(kv_cache_layout_name(c.layout));
  if (!a.paged) {
    fail("a " + layout + " cache is addressed by paged (kv_indptr, kv_indices, kv_last_page_len, " +
         "batch_indices, positions); it is not set");
  }
  if (!a.slot_mapping.empty()) fail("slot_mapping is set, but a " + layout + " cache uses paged");
  const PagedKvIndex& p = *a.paged;
  auto size = [](auto s) { return static_cast<std::int64_t>(s.size()); };
  if (p.kv_indptr.empty()) fail("paged.kv_indptr is empty; expected [batch + 1] entries");
  const std::int64_t batch = size(p.kv_indptr) - 1;
  if (p.kv_indptr[0] != 0) fail("paged.kv_indptr[0] (" + str(p.kv_indptr[0]) + ") must be 0");
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto i = static_cast<std::size_t>(b);
    if (p.kv_indptr[i + 1] < p.kv_indptr[i]) {
      fail("paged.kv_indptr[" + str(b + 1) + "] (" + str(p.kv_indptr[i + 1]) +
           ") must not be below kv_indptr[" + str(b) + "] (" + str(p.kv_indptr[i]) + ")");
    }
  }
  if (p.kv_indptr.back() > size(p.kv_indices)) {
    fail("paged.kv_indptr[" + str(batch) + "] (" + str(p.kv_indptr.back()) +
         ") must not exceed the " + str(size(p.kv_indices)) + " entries of kv_indices");
  }
  for (std::int64_t i = 0; i < p.kv_indptr.back(); ++i) {
    const std::int64_t page = p.kv_indices[static_cast<std::size_t>(i)];
    if (page < 0 || page >= c.pages) {
      fail("paged.kv_indices[" + str(i) + "] (" + str(page) + ") must be a page in [0, " +
           str(c.pages) + ")");
    }
  }
  if (size(p.kv_last_page_len) != batch) {
    fail("paged.kv_last_page_len has " + str(size(p.kv_last_page_len)) + " entries; expected " +
         "one per request (" + str(batch) + ", from kv_indptr)");
  }
  std::pmr::vector<std::int64_t> seq_len(static_cast<std::size_t>(batch), mem);
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto i = static_cast<std::size_t>(b);
    const std::int64_t pages = p.kv_indptr[i + 1] - p.kv_indptr[i];
    const std::int64_t last = p.kv_last_page_len[i];
    const std::int64_t lo = pages > 0 ? 1 : 0, hi = pages > 0 ? c.page_size : 0;
    if (last < lo || last > hi) {
      fail("paged.kv_last_page_len[" + str(b) + "] (" + str(last) + ") must be in [" + str(lo) +
           ", " + str(hi) + "] for a request of " + str(pages) + " pages");
    }
    seq_len[i] = pages > 0 ? (pages - 1) * c.page_size + last : 0;
  }
  if (size(p.batch_indices) != tokens || size(p.positions) != tokens) {
    fail("paged.batch_indices and paged.positions have " + str(size(p.batch_indices)) + " and " +
         str(size(p.positions)) + " entries; expected one per token (" + str(tokens) + ")");
  }
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t b = p.batch_indices[static_cast<std::size_t>(t)];
    const std::int64_t pos = p.positions[static_cast<std::size_t>(t)];
    if (b < 0 || b >= batch) {
      fail("paged.batch_indices[" + str(t) + "] (" + str(b) + ") must be a request in [0, " +
           str(batch) + ")");
    }
    const std::int64_t len = seq_len[static_cast<std::size_t>(b)];
    if (pos < 0 || pos >= len) {
      fail("paged.positions[" + str(t) + "] (" + str(pos) + ") must be in [0, " + str(len) +
           "), the KV length of request " + str(b) + " (kv_indptr, kv_last_page_len)");
    }
    const std::int64_t page = p.kv_indices[static_cast<std::size_t>(
        p.kv_indptr[static_cast<std::size_t>(b)] + pos / c.page_size)];
    cells[static_cast<std::size_t>(t)] = {page, pos % c.page_size};
  }
  return cells;
}

// Two tokens of one call may not write one cell: which one wins would depend on the threads.
void check_distinct(std::span<const Cell> cells, const KvCache& c, const KvAppendArgs& a,
                    std::pmr::memory_resource* mem) {
  if (cells.size() < 2) return;
  std::pmr::vector<std::pair<std::int64_t, std::int64_t>> slots(mem);  // (slot, token)
  slots.reserve(cells.size());
  for (std::size_t t = 0; t < cells.size(); ++t)
    slots.push_back({cells[t].page * c.page_size + cells[t].entry, static_cast<std::int64_t>(t)});
  std::sort(slots.begin(), slots.end());
  for (std::size_t i = 1; i < slots.size(); ++i) {
    if (slots[i].first != slots[i - 1].first) continue;
    const std::int64_t first = slots[i - 1].second, second = slots[i].second;
    const Cell& cell = cells[static_cast<std::size_t>(second)];
    if (c.layout == KvCacheLayout::kVllm) {
      fail("slot_mapping[" + str(second) + "] (" + str(slots[i].first) +
           ") is also the slot of token " + str(first) + ": each token needs its own slot");
    }
    const PagedKvIndex& p = *a.paged;
    fail("token " + str(second) + " (batch_indices " +
         str(p.batch_indices[static_cast<std::size_t>(second)]) + ", positions " +
         str(p.positions[static_cast<std::size_t>(second)]) + ") lands on page " + str(cell.page) +
         " entry " + str(cell.entry) + ", as token " + str(first) + " does (batch_indices " +
         str(p.batch_indices[static_cast<std::size_t>(first)]) + ", positions " +
         str(p.positions[static_cast<std::size_t>(first)]) + "): each token needs its own cell");
  }
}

// This thread's Map of `scale` (kv_cache_kernel.h's Bf16Fp8Map or F16Fp8Map, made by `make`) for
// k (role 0) or v (role 1), or null where the scale has none. A table takes about 0.27 us to make
// for bf16 and 0.7 us for f16 (Zen 4 at 2.95 GHz-equivalent), a quarter of a one-token append or
// more, and engines call with the same few scales (one per layer for k and for v) step after
// step: each thread keeps 256 per role and map type, made on first use, in 64 sets of 4 picked
// by the scale's bits, the oldest in a full set replaced (264 KiB for bf16's, 328 KiB for f16's,
// allocated on the thread's first fp8 append from that dtype). Direct-mapped slots (64 before
// session 27) would put some of 32 layers' scales on one slot, each then remade on every call. A
// pointer stays valid for the call: k's and v's slots are apart, and the thread's slots change
// only in its own later calls.
template <class Map>
const Map* fp8_map(int role, float scale, bool (*make)(float, Map&)) {
  struct Slot {
    Map map;
    std::uint32_t bits = 0;
    bool made = false;
    bool valid = false;
  };
  constexpr int kSetBits = 6;
  constexpr std::size_t kWays = 4;
  struct Set {
    std::array<Slot, kWays> ways;
    std::size_t next = 0;  // the way a miss replaces: the oldest
  };
  using Sets = std::array<std::array<Set, std::size_t{1} << kSetBits>, 2>;
  thread_local std::unique_ptr<Sets> sets;
  if (!sets) sets = std::make_unique<Sets>();
  const auto bits = std::bit_cast<std::uint32_t>(scale);
  Set& set = (*sets)[static_cast<std::size_t>(role)][(bits * 0x9E3779B1u) >> (32 - kSetBits)];
  for (Slot& slot : set.ways) {
    if (slot.made && slot.bits == bits) return slot.valid ? &slot.map : nullptr;
  }
  Slot& slot = set.ways[set.next];
  set.next = (set.next + 1) % kWays;
  slot.bits = bits;
  slot.made = true;
  slot.valid = make(scale, slot.map);
  return slot.valid ? &slot.map : nullptr;
}

}  // namespace

std::string_view cache_dtype_name(CacheDType dtype) {
  switch (dtype) {
    case CacheDType::kF32:
      return "f32";
    case CacheDType::kF16:
      return "f16";
    case CacheDType::kBF16:
      return "bf16";
    case CacheDType::kFp8E4M3:
      return "fp8_e4m3";
  }
  return "?";
}

CacheDType parse_cache_dtype(std::string_view name) {
  for (CacheDType d :
       {CacheDType::kF32, CacheDType::kF16, CacheDType::kBF16, CacheDType::kFp8E4M3}) {
    if (cache_dtype_name(d) == name) return d;
  }
  throw Error("cache dtype (\"" + std::string(name) +
              "\") must be one of f32, f16, bf16, fp8_e4m3");
}

std::size_t cache_dtype_size(CacheDType dtype) {
  switch (dtype) {
    case CacheDType::kF32:
      return 4;
    case CacheDType::kF16:
    case CacheDType::kBF16:
      return 2;
    case CacheDType::kFp8E4M3:
      return 1;
  }
  return 0;
}

std::string_view kv_cache_layout_name(KvCacheLayout layout) {
  switch (layout) {
    case KvCacheLayout::kVllm:
      return "vllm";
    case KvCacheLayout::kNhd:
      return "nhd";
    case KvCacheLayout::kHnd:
      return "hnd";
  }
  return "?";
}

KvCacheLayout parse_kv_cache_layout(std::string_view name) {
  for (KvCacheLayout l : {KvCacheLayout::kVllm, KvCacheLayout::kNhd, KvCacheLayout::kHnd}) {
    if (kv_cache_layout_name(l) == name) return l;
  }
  throw Error("kv cache layout (\"" + std::string(name) + "\") must be one of vllm, nhd, hnd");
}

KvCache KvCache::contiguous(void* key, void* value, CacheDType dtype, KvCacheLayout layout,
                            std::int64_t pages, std::int64_t page_size, std::int64_t heads,
                            std::int64_t head_dim) {
  KvCache c;
  c.key = key;
  c.value = value;
  c.dtype = dtype;
  c.layout = layout;
  c.pages = pages;
  c.page_size = page_size;
  c.heads = heads;
  c.head_dim = head_dim;
  c.page_stride = page_size * heads * head_dim;
  if (layout == KvCacheLayout::kHnd) {
    c.head_stride = page_size * head_dim;
    c.entry_stride = head_dim;
  } else {
    c.entry_stride = heads * head_dim;
    c.head_stride = head_dim;
  }
  return c;
}

int rope_append_kv_cache(const Frequencies& freqs, const KvCache& cache, const KvAppendArgs& args) {
  const RopeSpec& spec = freqs.spec;
  check_threads(args.threads, kWho);
  const std::int64_t tokens =
      args.rotate ? detail::rope_token_count(spec, args.positions, args.k.tokens, kWho, "k")
                  : args.k.tokens;
  if (!args.rotate) {
    if (args.q) fail("q is set but rotate is false (q would be left unrotated)");
    if (args.k_in_place) fail("k_in_place is set but rotate is false (there is nothing to store)");
  }
  detail::check_rope_view(args.k, "k", tokens, spec, kWho);
  detail::check_rope_view(args.v, "v", tokens, spec, kWho);
  if (args.q) detail::check_rope_view(*args.q, "q", tokens, spec, kWho);
  check_cache(cache, spec);
  for (const auto& [view, name] : {std::pair{&args.k, "k"}, std::pair{&args.v, "v"}}) {
    if (view->heads != cache.heads) {
      fail(std::string(name) + ": heads (" + str(view->heads) + ") must equal the cache's heads (" +
           str(cache.heads) + ")");
    }
  }
  if (args.rotate) detail::check_rope_table(freqs, args.table, kWho);
  // A decode step's cells and slot check fit in `arena`; larger calls take the heap. With these,
  // the names as string_views and apply.cc's passes in an array, a one-token call of one head of
  // 2 dims (nothing but the call itself) took 135 ns instead of 186 (Zen 4, medians of 9 runs of
  // 200000 calls): allocations had been most of it.
  alignas(std::max_align_t) std::byte arena[4096];
  std::pmr::monotonic_buffer_resource small(arena, sizeof(arena));
  const std::pmr::vector<Cell> cells = resolve_cells(cache, args, tokens, &small);
  check_distinct(cells, cache, args, &small);

  detail::ensure_simd_target_from_env();
  const std::int64_t n = args.rotate ? freqs.pair_count() : 0;
  // Made whether or not it is used: GCC zeroed a std::optional of it with a `rep stosq` before
  // emplacing. Without rotation the positions may be absent (never checked), so it gets no table:
  // then it reads nothing but freqs.
  const detail::CosSinRows rows(freqs, args.positions, tokens, args.rotate ? args.table : nullptr);
  const detail::RowFn row = args.rotate ? detail::RowFn(std::cref(rows)) : nullptr;
  // On the fly, rows a block of tokens at a time where that applies (apply.cc does the same).
  const detail::CosSinRowBlocks blocks(freqs, args.positions, tokens, args.table);
  const detail::RowBlockFn row_block = args.rotate ? blocks.fn() : nullptr;
  const std::int64_t q_heads = args.q ? args.q->heads : 0;
  const std::int64_t elements = tokens * (q_heads + 2 * cache.heads) * spec.head_dim;
  int threads = elements < kMinParallelElements ? 1 : run_threads(args.threads);
  threads = static_cast<int>(std::clamp<std::int64_t>(tokens, 1, threads));
  const std::size_t ces = cache_dtype_size(cache.dtype);
  const auto ks = static_cast<std::int64_t>(dtype_size(args.k.dtype));
  const auto vs = static_cast<std::int64_t>(dtype_size(args.v.dtype));

  // A prefill's cache rows go out with streaming stores (TokenKv::stream_cache; why and when:
  // kv_cache_streaming.h).
  const bool stream_cache = static_cast<double>(tokens) * 2.0 * static_cast<double>(cache.heads) *
                                static_cast<double>(cache.head_dim) * static_cast<double>(ces) >=
                            static_cast<double>(detail::stream_cache_bytes());
  // Small appends (a decode step) prefetch nothing (software_prefetch.h): the elements of q, k
  // and v, at the larger of k's and v's element sizes. k and v are read whole (the cache rows
  // take every dim), one token's heads after another (the rows of a packed qkv tensor, as
  // measured); q, rotated in place, is read in part where rotary_dim < head_dim. Gaps between
  // heads were not measured without the prefetch, and keep it.
  const bool partial =
      (args.q && (spec.rotary_dim < args.q->head_dim || args.q->head_stride > args.q->head_dim)) ||
      args.k.head_stride > args.k.head_dim || args.v.head_stride > args.v.head_dim;
  const bool prefetch = detail::software_prefetch(
      elements * std::max(ks, vs),
      partial ? detail::RowAccess::kPartial : detail::RowAccess::kWhole, spec.head_dim, threads);
  const float k_inv = detail::exact_inverse(cache.k_scale);
  const float v_inv = detail::exact_inverse(cache.v_scale);
  // bf16 and f16 into fp8: each scale's table (this thread's, kept across calls).
  const bool fp8 = cache.dtype == CacheDType::kFp8E4M3;
  auto bf16_map = [&](const TensorView& x, int role, float scale) {
    return fp8 && x.dtype == DType::kBF16 ? fp8_map(role, scale, detail::make_bf16_fp8_map)
                                          : nullptr;
  };
  auto f16_map = [&](const TensorView& x, int role, float scale) {
    return fp8 && x.dtype == DType::kF16 ? fp8_map(role, scale, detail::make_f16_fp8_map) : nullptr;
  };
  const detail::Bf16Fp8Map* k_fp8 = bf16_map(args.k, 0, cache.k_scale);
  const detail::Bf16Fp8Map* v_fp8 = bf16_map(args.v, 1, cache.v_scale);
  const detail::F16Fp8Map* k_f16_fp8 = f16_map(args.k, 0, cache.k_scale);
  const detail::F16Fp8Map* v_f16_fp8 = f16_map(args.v, 1, cache.v_scale);
  auto body = [&](std::int64_t begin, std::int64_t end) {
    // c, s (n each) for rows made per token; on the fly, runs of rows made ahead (RowRuns).
    detail::RowScratch scratch(static_cast<std::size_t>(row_block ? 0 : 2 * n));
    float* const c = scratch.data();
    float* const s = c + n;
    std::optional<detail::RowRuns> runs;
    if (row_block) runs.emplace(row_block, n, begin, end);
    // With a table, the rows of up to kTableTokens tokens at a time, where all are read in place
    // (detail::CosSinRows::table_rows); else one by one from `row`.
    constexpr std::int64_t kTableTokens = 16;
    const float* table_c[kTableTokens];
    const float* table_s[kTableTokens];
    std::int64_t table_first = begin, table_end = begin;
    bool in_table = false;
    for (std::int64_t t = begin; t < end; ++t) {
      const float* rc = nullptr;
      const float* rs = nullptr;
      if (args.rotate && !runs && t == table_end) {
        table_first = t;
        table_end = std::min(end, t + kTableTokens);
        in_table = rows.table_rows(t, table_end - t, table_c, table_s);
      }
      if (in_table) {
        rc = table_c[t - table_first];
        rs = table_s[t - table_first];
      } else if (args.rotate) {
        // forward only: the kernels take the row as it is
        std::tie(rc, rs) = runs ? detail::Row(runs->row(t)) : row(t, c, s);
      }
      if (args.q) {
        const TensorView& q = *args.q;
        detail::rotate_token_heads(
            detail::token_heads(q, q, spec, n, t, 0, q.heads, rc, rs, prefetch));
      }
      const Cell& cell = cells[static_cast<std::size_t>(t)];
      const std::int64_t at = (cell.page * cache.page_stride + cell.entry * cache.entry_stride) *
                              static_cast<std::int64_t>(ces);
      const detail::TokenKv kv{
          .k = static_cast<const char*>(args.k.data) + t * args.k.token_stride * ks,
          .k_dtype = args.k.dtype,
          .k_head_stride = args.k.head_stride,
          .k_back = args.k_in_place ? static_cast<char*>(args.k.data) + t * args.k.token_stride * ks
                                    : nullptr,
          .v = static_cast<const char*>(args.v.data) + t * args.v.token_stride * vs,
          .v_dtype = args.v.dtype,
          .v_head_stride = args.v.head_stride,
          .k_cache = static_cast<char*>(cache.key) + at,
          .v_cache = static_cast<char*>(cache.value) + at,
          .cache_dtype = cache.dtype,
          .cache_head_stride = cache.head_stride,
          .heads = cache.heads,
          .head_dim = cache.head_dim,
          .offset = spec.rotary_offset,
          .pairs = n,
          .layout = spec.layout,
          .c = rc,
          .s = rs,
          .k_scale = cache.k_scale,
          .v_scale = cache.v_scale,
          .k_inv_scale = k_inv,
          .v_inv_scale = v_inv,
          .k_fp8_map = k_fp8,
          .v_fp8_map = v_fp8,
          .k_f16_fp8_map = k_f16_fp8,
          .v_f16_fp8_map = v_f16_fp8,
          .stream_cache = stream_cache,
          .prefetch = prefetch,
      };
      detail::append_token_kv(kv);
    }
    // Streaming stores are weakly ordered: fence them before this thread reports its chunk done.
    if (stream_cache) hwy::FlushStream();
  };
  if (threads == 1) {
    body(0, tokens);
  } else {
    detail::ThreadPool::shared(threads).run(threads, tokens, body);
  }
  return threads;
}

void append_positions(std::span<const std::int32_t> append_indptr,
                      std::span<const std::int32_t> kv_indptr,
                      std::span<const std::int32_t> kv_last_page_len, std::int64_t page_size,
                      std::span<std::int32_t> batch_indices, std::span<std::int32_t> positions) {
  const std::string who = "append_positions";
  auto bad = [&](const std::string& what) { throw Error(who + ": " + what); };
  if (page_size <= 0) bad("page_size (" + str(page_size) + ") must be positive");
  if (append_indptr.empty()) bad("append_indptr is empty; expected [batch + 1] entries");
  const auto batch = static_cast<std::int64_t>(append_indptr.size()) - 1;
  if (static_cast<std::int64_t>(kv_indptr.size()) != batch + 1 ||
      static_cast<std::int64_t>(kv_last_page_len.size()) != batch) {
    bad("kv_indptr and kv_last_page_len have " + str(static_cast<std::int64_t>(kv_indptr.size())) +
        " and " + str(static_cast<std::int64_t>(kv_last_page_len.size())) + " entries; expected " +
        str(batch + 1) + " and " + str(batch) + " (from append_indptr)");
  }
  if (append_indptr[0] != 0) bad("append_indptr[0] (" + str(append_indptr[0]) + ") must be 0");
  const std::int64_t nnz = append_indptr.back();
  if (static_cast<std::int64_t>(batch_indices.size()) != nnz ||
      static_cast<std::int64_t>(positions.size()) != nnz) {
    bad("batch_indices and positions must have append_indptr[" + str(batch) + "] (" + str(nnz) +
        ") entries; got " + str(static_cast<std::int64_t>(batch_indices.size())) + " and " +
        str(static_cast<std::int64_t>(positions.size())));
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto i = static_cast<std::size_t>(b);
    const std::int64_t appended = append_indptr[i + 1] - append_indptr[i];
    const std::int64_t pages = kv_indptr[i + 1] - kv_indptr[i];
    if (pages < 0) {
      bad("kv_indptr[" + str(b + 1) + "] (" + str(kv_indptr[i + 1]) +
          ") must not be below kv_indptr[" + str(b) + "] (" + str(kv_indptr[i]) + ")");
    }
    if (kv_last_page_len[i] < (pages > 0 ? 1 : 0) ||
        kv_last_page_len[i] > (pages > 0 ? page_size : 0)) {
      bad("kv_last_page_len[" + str(b) + "] (" + str(kv_last_page_len[i]) + ") must be in [" +
          str(pages > 0 ? 1 : 0) + ", " + str(pages > 0 ? page_size : 0) + "] for a request of " +
          str(pages) + " pages");
    }
    if (appended < 0) {
      bad("append_indptr[" + str(b + 1) + "] (" + str(append_indptr[i + 1]) +
          ") must not be below append_indptr[" + str(b) + "] (" + str(append_indptr[i]) + ")");
    }
    const std::int64_t len = pages > 0 ? (pages - 1) * page_size + kv_last_page_len[i] : 0;
    if (appended > len) {
      bad("request " + str(b) + " appends " + str(appended) + " tokens but its KV length after " +
          "the append is " + str(len) + " (kv_indptr, kv_last_page_len)");
    }
    for (std::int64_t j = 0; j < appended; ++j) {
      const auto k = static_cast<std::size_t>(append_indptr[i] + j);
      batch_indices[k] = static_cast<std::int32_t>(b);
      positions[k] = static_cast<std::int32_t>(len - appended + j);
    }
  }
}

namespace detail {

std::int64_t stream_cache_bytes() {
  return stream_cache_threshold().load(std::memory_order_relaxed);
}

void set_stream_cache_bytes(std::int64_t bytes) {
  if (bytes < 1) {
    throw Error("set_stream_cache_bytes: the threshold (" + str(bytes) +
                " bytes) must be at least 1");
  }
  stream_cache_threshold().store(bytes, std::memory_order_relaxed);
}

}  // namespace detail

}  // namespace posenc
