// The on-the-fly rows of multi-axis (M-RoPE) specs in blocks (CosSinStepper::rows_by_axis, which
// apply_rope and rope_append_kv_cache use for blocks of tokens): the same bits as row() one row
// at a time and as the exact path, over text runs, image grids, repeats, jumps and positions past
// 2^31, on every SIMD target; and the rotations on the fly against the table path's.

#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/cos_sin.h"
#include "posenc/core/frequencies.h"
#include "posenc/io/presets.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/kv_cache.h"
#include "posenc/rope/table.h"
#include "rope/cos_sin_fast.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

using posenc::DType;
using posenc::Frequencies;
using posenc::detail::CosSinStepper;
using posenc_test::ForEachTarget;

constexpr std::int64_t kTop = (std::int64_t{1} << 31) - 1;

using Token = std::array<std::int64_t, 3>;

// A Qwen2-VL-style prompt from `base`: text (every axis at one position), an image grid of
// `rows` x `cols` (t fixed, h by row, w by column: w steps along a row, a new row jumps back),
// then text again from past the grid's largest position.
void Prompt(std::int64_t base, std::int64_t rows, std::int64_t cols, std::vector<Token>& out) {
  for (std::int64_t p = base; p < base + 50; ++p) out.push_back({p, p, p});
  const std::int64_t at = base + 50;
  for (std::int64_t h = 0; h < rows; ++h) {
    for (std::int64_t w = 0; w < cols; ++w) out.push_back({at, at + h, at + w});
  }
  const std::int64_t after = at + std::max(rows, cols);
  for (std::int64_t p = after; p < after + 60; ++p) out.push_back({p, p, p});
}

// Tokens [axes, tokens], axis-major, as apply_rope takes them.
std::vector<std::int64_t> AxisMajor(const std::vector<Token>& tokens) {
  const std::size_t n = tokens.size();
  std::vector<std::int64_t> out(3 * n);
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t a = 0; a < 3; ++a) out[a * n + t] = tokens[t][a];
  }
  return out;
}

const char* const kPresets[] = {"qwen2-vl-7b", "qwen3-vl-8b"};

// Text, two grids, a repeat of one token (every layer of a decode step), a jump back, a text run
// that crosses 2^31 - 1 and a grid whose t stays past it (rows there are anchors: the bound covers
// positions below 2^31), and negative positions.
std::vector<Token> Sequence() {
  std::vector<Token> out;
  Prompt(0, 6, 40, out);
  Prompt(1 << 20, 20, 9, out);
  out.push_back(out.back());
  out.push_back(out.back());
  Prompt(300, 3, 150, out);
  for (std::int64_t p = kTop - 40; p < kTop + 30; ++p) out.push_back({p, p, p});
  Prompt(kTop - 45, 2, 12, out);  // the grid's t stays at 2^31 + 4, past the bound
  // Axes that stay past the bound while another steps, and a repeat there: anchors.
  for (std::int64_t w = 0; w < 20; ++w) out.push_back({kTop + 10, 5, 5 + w});
  out.push_back({kTop + 10, kTop + 10, kTop + 10});
  out.push_back({kTop + 10, kTop + 10, kTop + 10});
  for (std::int64_t p = -90; p < -10; ++p) out.push_back({p, p + 2, p});
  return out;
}

TEST(CosSinFastMultiAxis, BlocksOfRowsAreRowByRowsBitsOnEveryTarget) {
  const std::vector<Token> tokens = Sequence();
  for (const char* preset : kPresets) {
    const Frequencies f = posenc::compute_frequencies(posenc::load_preset(preset).spec);
    ASSERT_EQ(posenc::axis_count(f.spec), 3);
    const auto n = static_cast<std::int64_t>(f.pair_count());
    const std::int64_t stride = n + 5;
    ForEachTarget([&](const std::string& target) {
      for (double bound_scale : {1.0, 1e5}) {
        const std::string what = target + " " + preset + " bound x" + std::to_string(bound_scale);
        CosSinStepper one(f, bound_scale), block(f, bound_scale);
        std::vector<float> c1(static_cast<std::size_t>(n)), s1(c1.size()), want_c(c1.size()),
            want_s(c1.size());
        // Blocks of 37 rows (not a divisor of the runs), positions [3, 37] axis-major.
        constexpr std::size_t kBlock = 37;
        std::vector<float> cb(kBlock * static_cast<std::size_t>(stride)), sb(cb.size());
        std::int64_t differing = 0, inexact = 0;
        for (std::size_t k0 = 0; k0 < tokens.size(); k0 += kBlock) {
          const std::size_t count = std::min(kBlock, tokens.size() - k0);
          std::vector<std::int64_t> p(3 * count);
          for (std::size_t k = 0; k < count; ++k) {
            for (std::size_t a = 0; a < 3; ++a) p[a * count + k] = tokens[k0 + k][a];
          }
          block.rows_by_axis(p.data(), static_cast<std::int64_t>(count), cb.data(), sb.data(),
                             stride);
          for (std::size_t k = 0; k < count; ++k) {
            one.row(tokens[k0 + k], c1.data(), s1.data());
            posenc::cos_sin_row_f32(f, tokens[k0 + k], want_c, want_s);
            const auto bytes = static_cast<std::size_t>(n) * sizeof(float);
            const float* bc = cb.data() + static_cast<std::int64_t>(k) * stride;
            const float* bs = sb.data() + static_cast<std::int64_t>(k) * stride;
            differing +=
                std::memcmp(c1.data(), bc, bytes) != 0 || std::memcmp(s1.data(), bs, bytes);
            inexact += std::memcmp(want_c.data(), bc, bytes) != 0 ||
                       std::memcmp(want_s.data(), bs, bytes) != 0;
          }
        }
        EXPECT_EQ(differing, 0) << what;
        EXPECT_EQ(inexact, 0) << what;
        EXPECT_EQ(block.stats().anchors, one.stats().anchors) << what;
        EXPECT_EQ(block.stats().steps, one.stats().steps) << what;
        EXPECT_EQ(block.stats().repeats, one.stats().repeats) << what;
        EXPECT_EQ(block.stats().exact_pairs, one.stats().exact_pairs) << what;
        // Most rows are stepped (an anchor per text run, image row, jump and row past 2^31).
        EXPECT_GT(block.stats().steps, static_cast<std::int64_t>(tokens.size()) - 200) << what;
        if (bound_scale > 1.0) {
          EXPECT_GT(block.stats().exact_pairs, 1000) << what;
        }
      }
    });
  }
}

posenc::testing::Buffer RandomBuffer(DType dtype, std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  return posenc::testing::Random(dtype, count, rng);
}

// apply_rope on the fly (blocks of rows stepped per axis) against the table path, bit for bit:
// every dtype, both directions, one and two threads (two threads split the prompt mid-run).
TEST(CosSinFastMultiAxis, OnTheFlyRotationIsTheTablePathsOnEveryTarget) {
  std::vector<Token> tokens;
  Prompt(0, 12, 30, tokens);
  Prompt(700, 5, 64, tokens);
  const std::vector<std::int64_t> pos = AxisMajor(tokens);
  const auto count = static_cast<std::int64_t>(tokens.size());
  const std::int64_t heads = 3;
  for (const char* preset : kPresets) {
    const Frequencies f = posenc::compute_frequencies(posenc::load_preset(preset).spec);
    const posenc::CosSinTable table(f, 2048);
    ForEachTarget([&](const std::string& target) {
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
        const auto x =
            RandomBuffer(dtype, static_cast<std::size_t>(count * heads * f.spec.head_dim), 5);
        for (posenc::Direction dir : {posenc::Direction::kForward, posenc::Direction::kInverse}) {
          auto rotated = [&](const posenc::CosSinTable* t, int threads) {
            posenc::testing::Buffer y = x;
            posenc::RopeArgs args;
            args.q = posenc::TensorView::contiguous(y.bytes.data(), dtype, count, heads,
                                                    f.spec.head_dim);
            args.positions = std::span<const std::int64_t>(pos);
            args.table = t;
            args.threads = threads;
            args.direction = dir;
            posenc::apply_rope(f, args);
            return y.bytes;
          };
          const std::string what = target + " " + preset + " " +
                                   std::string(posenc::dtype_name(dtype)) +
                                   (dir == posenc::Direction::kInverse ? " inverse" : "");
          const auto want = rotated(&table, 1);
          EXPECT_NE(want, x.bytes) << what;
          EXPECT_EQ(rotated(nullptr, 1), want) << what;
          EXPECT_EQ(rotated(nullptr, 2), want) << what << " 2 threads";
        }
      }
    });
  }
}

// The fused append on the fly against the table path: q rotated in place and the rotated k in the
// cache, bit for bit.
TEST(CosSinFastMultiAxis, FusedAppendOnTheFlyIsTheTablePathsOnEveryTarget) {
  std::vector<Token> tokens;
  Prompt(10, 7, 25, tokens);
  const std::vector<std::int64_t> pos = AxisMajor(tokens);
  const auto count = static_cast<std::int64_t>(tokens.size());
  const std::int64_t q_heads = 4, kv_heads = 2;
  const Frequencies f = posenc::compute_frequencies(posenc::load_preset("qwen2-vl-7b").spec);
  const std::int64_t d = f.spec.head_dim;
  const posenc::CosSinTable table(f, 1024);
  ForEachTarget([&](const std::string& target) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const auto q = RandomBuffer(dtype, static_cast<std::size_t>(count * q_heads * d), 1);
      const auto k = RandomBuffer(dtype, static_cast<std::size_t>(count * kv_heads * d), 2);
      const auto v = RandomBuffer(dtype, static_cast<std::size_t>(count * kv_heads * d), 3);
      std::vector<std::int64_t> slots(static_cast<std::size_t>(count));
      std::iota(slots.begin(), slots.end(), 3);  // slots 3 .. count + 2 of count + 8
      const auto cache_dtype =
          dtype == DType::kF32 ? posenc::CacheDType::kF32 : posenc::CacheDType::kBF16;
      struct Out {
        std::vector<std::uint8_t> q, kc;
      };
      auto append = [&](const posenc::CosSinTable* t) {
        posenc::testing::Buffer qo = q;
        const std::size_t cache_bytes = static_cast<std::size_t>((count + 8) * kv_heads * d) *
                                        posenc::cache_dtype_size(cache_dtype);
        std::vector<std::uint8_t> kc(cache_bytes), vc(cache_bytes);
        const posenc::KvCache cache =
            posenc::KvCache::contiguous(kc.data(), vc.data(), cache_dtype,
                                        posenc::KvCacheLayout::kVllm, count + 8, 1, kv_heads, d);
        posenc::KvAppendArgs a;
        a.q = posenc::TensorView::contiguous(qo.bytes.data(), dtype, count, q_heads, d);
        a.k = posenc::TensorView::contiguous(const_cast<std::uint8_t*>(k.bytes.data()), dtype,
                                             count, kv_heads, d);
        a.v = posenc::TensorView::contiguous(const_cast<std::uint8_t*>(v.bytes.data()), dtype,
                                             count, kv_heads, d);
        a.positions = std::span<const std::int64_t>(pos);
        a.table = t;
        a.slot_mapping = slots;
        posenc::rope_append_kv_cache(f, cache, a);
        return Out{qo.bytes, kc};
      };
      const std::string what = target + " " + std::string(posenc::dtype_name(dtype));
      const Out want = append(&table), got = append(nullptr);
      EXPECT_NE(want.q, q.bytes) << what;
      EXPECT_EQ(got.q, want.q) << what << " q";
      EXPECT_EQ(got.kc, want.kc) << what << " key cache";
    }
  });
}

// Maps built by hand (compute_frequencies makes none of these): an axis no slot reads, exactly
// kMaxRuns (8) runs, which the table path gathers run by run, and 9, which it gathers slot by
// slot. The stepper's blocks against the exact rows (an unread axis that changes between repeats
// must not end them), and apply_rope on the fly against the table path.
TEST(CosSinFastMultiAxis, HandMadeMapsStepAndGatherOnEveryTarget) {
  const Frequencies base = posenc::compute_frequencies(posenc::load_preset("qwen2-vl-7b").spec);
  const auto n = static_cast<std::size_t>(base.pair_count());
  ASSERT_EQ(n, 64u);
  const auto map_of = [&](std::vector<std::pair<std::uint8_t, std::size_t>> runs) {
    Frequencies f = base;
    f.spec.axis_map.slot_axis.clear();
    for (const auto& [axis, length] : runs)
      f.spec.axis_map.slot_axis.insert(f.spec.axis_map.slot_axis.end(), length, axis);
    EXPECT_EQ(f.spec.axis_map.slot_axis.size(), n);
    return f;
  };
  struct Named {
    const char* name;
    Frequencies f;
  };
  const Named maps[] = {
      {"axis 1 unread", map_of({{0, 32}, {2, 32}})},
      {"8 runs", map_of({{0, 8}, {1, 8}, {2, 8}, {0, 8}, {1, 8}, {2, 8}, {0, 8}, {1, 8}})},
      {"9 runs", map_of({{0, 7}, {1, 7}, {2, 7}, {0, 7}, {1, 7}, {2, 7}, {0, 7}, {1, 7}, {2, 8}})},
  };
  // Text, a grid, and repeats whose unread axis h moves.
  std::vector<Token> tokens;
  Prompt(3, 4, 20, tokens);
  for (std::int64_t h = 0; h < 5; ++h) tokens.push_back({900, 900 + h, 900});
  const std::vector<std::int64_t> pos = AxisMajor(tokens);
  const auto count = static_cast<std::int64_t>(tokens.size());
  ForEachTarget([&](const std::string& target) {
    for (const Named& m : maps) {
      const std::string what = target + " " + m.name;
      CosSinStepper st(m.f);
      std::vector<float> c(static_cast<std::size_t>(count) * n), s(c.size()), want_c(n), want_s(n);
      st.rows_by_axis(pos.data(), count, c.data(), s.data(), static_cast<std::int64_t>(n));
      std::int64_t differing = 0;
      for (std::size_t k = 0; k < tokens.size(); ++k) {
        posenc::cos_sin_row_f32(m.f, tokens[k], want_c, want_s);
        differing += std::memcmp(want_c.data(), c.data() + k * n, n * sizeof(float)) != 0 ||
                     std::memcmp(want_s.data(), s.data() + k * n, n * sizeof(float)) != 0;
      }
      EXPECT_EQ(differing, 0) << what;
      if (std::string(m.name) == "axis 1 unread") {
        EXPECT_EQ(st.stats().repeats, 4) << what;  // h is not read: the last 4 rows repeat
      }
      const posenc::CosSinTable table(m.f, 1024);
      const auto x = RandomBuffer(DType::kF32, static_cast<std::size_t>(count * 2 * 128), 9);
      auto rotated = [&](const posenc::CosSinTable* t) {
        posenc::testing::Buffer y = x;
        posenc::RopeArgs args;
        args.q = posenc::TensorView::contiguous(y.bytes.data(), DType::kF32, count, 2, 128);
        args.positions = std::span<const std::int64_t>(pos);
        args.table = t;
        posenc::apply_rope(m.f, args);
        return y.bytes;
      };
      EXPECT_EQ(rotated(nullptr), rotated(&table)) << what;
    }
  });
}

// The fused append without rotation takes no positions (kv_cache.h), with or without a table, for
// a multi-axis spec too: k and v are copied as given, and nothing reads positions.
TEST(CosSinFastMultiAxis, FusedAppendWithoutRotationReadsNoPositions) {
  const Frequencies f = posenc::compute_frequencies(posenc::load_preset("qwen2-vl-7b").spec);
  const posenc::CosSinTable table(f, 64);
  const std::int64_t tokens = 5, heads = 2, d = f.spec.head_dim;
  const auto k = RandomBuffer(DType::kF32, static_cast<std::size_t>(tokens * heads * d), 4);
  const auto v = RandomBuffer(DType::kF32, static_cast<std::size_t>(tokens * heads * d), 5);
  std::vector<std::uint8_t> kc(k.bytes.size()), vc(v.bytes.size());
  const posenc::KvCache cache =
      posenc::KvCache::contiguous(kc.data(), vc.data(), posenc::CacheDType::kF32,
                                  posenc::KvCacheLayout::kVllm, tokens, 1, heads, d);
  std::vector<std::int64_t> slots(static_cast<std::size_t>(tokens));
  std::iota(slots.begin(), slots.end(), 0);
  for (const posenc::CosSinTable* t : {static_cast<const posenc::CosSinTable*>(nullptr), &table}) {
    posenc::KvAppendArgs a;
    a.k = posenc::TensorView::contiguous(const_cast<std::uint8_t*>(k.bytes.data()), DType::kF32,
                                         tokens, heads, d);
    a.v = posenc::TensorView::contiguous(const_cast<std::uint8_t*>(v.bytes.data()), DType::kF32,
                                         tokens, heads, d);
    a.rotate = false;
    a.table = t;
    a.slot_mapping = slots;
    std::fill(kc.begin(), kc.end(), 0);
    std::fill(vc.begin(), vc.end(), 0);
    posenc::rope_append_kv_cache(f, cache, a);
    EXPECT_EQ(kc, k.bytes) << (t ? "table" : "no table");
    EXPECT_EQ(vc, v.bytes) << (t ? "table" : "no table");
  }
}

}  // namespace
