// The re-rotation of a Session's cached keys (dynamic methods): its rows, made once per sub-step
// for all layers (detail::Rerotation, kept across windows by detail::KeptRows), and a layer's keys
// re-rotated with them (session_state.h).
#include <algorithm>
#include <cstdint>

#include "llama/session_state.h"
#include "posenc/rope/apply.h"

namespace posenc::llama {

using detail::kMinParallelKeyFloats;
using detail::kMinParallelRows;
using detail::kRerotateChunk;
using detail::SubStep;
using detail::z;

void Session::State::make_rows(const Frequencies& from, const Frequencies& to, std::int64_t p0,
                               std::int64_t p1, float* c2, float* s2) {
  const std::int64_t hd = model->config().head_dim();
  const detail::Rerotation r(from, to);
  const std::int64_t chunks = (p1 - p0 + kRerotateChunk - 1) / kRerotateChunk;
  parallel_if(p1 - p0 >= kMinParallelRows, chunks, [&](std::int64_t t0, std::int64_t t1) {
    const std::int64_t a = p0 + t0 * kRerotateChunk, b = std::min(p1, p0 + t1 * kRerotateChunk);
    r.rows(a, b, c2 + (a - p0) * hd, s2 + (a - p0) * hd);
  });
}

void Session::State::rerotation_rows(SubStep& sub, const Frequencies& from, std::int64_t count) {
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

void Session::State::rerotate_layer(std::int64_t l, const Frequencies& from, const SubStep& sub,
                                    std::int64_t count) {
  const Config& c = model->config();
  const std::int64_t KV = c.kv_dim(), hd = c.head_dim();
  float* keys = k_cache.data() + l * opt.capacity * KV;
  if (!sub.rows) {
    rerotate_keys(from, sub.freqs, TensorView::contiguous(keys, DType::kF32, count, c.kv_heads, hd),
                  std::span<const std::int32_t>(all_positions.data(), z(count)), opt.threads);
  } else {
    const std::int64_t chunks = (count + kRerotateChunk - 1) / kRerotateChunk;
    parallel_if(count * KV >= kMinParallelKeyFloats, chunks, [&](std::int64_t t0, std::int64_t t1) {
      const std::int64_t p0 = t0 * kRerotateChunk, p1 = std::min(count, t1 * kRerotateChunk);
      detail::rerotate_rows(
          {keys + p0 * KV, KV, p1 - p0, c.kv_heads, hd, sub.c2 + p0 * hd, sub.s2 + p0 * hd});
    });
  }
  if (!blocked.empty()) blocked[z(l)] = 0;
}

}  // namespace posenc::llama
