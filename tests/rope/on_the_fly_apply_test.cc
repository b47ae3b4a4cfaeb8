// apply_rope on the fly (no table) against the table path, bit for bit, on every SIMD target:
// real specs over 1100 tokens and near 2^31, q and k in one call across the runs of rows made
// ahead (RowRuns) in both directions and on two threads, and a thread's steppers kept from one
// call to the next. The rows themselves against the exact path are cos_sin_fast_test.cc's.
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/frequencies.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "support/real_specs.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

using posenc::DType;
using posenc::Frequencies;
using posenc_test::ForEachTarget;
using posenc_test::kTop;
using posenc_test::Named;
using posenc_test::RealSpecs;

// apply_rope of `x` (in place, a copy) with these positions, table and threads.
posenc::testing::Buffer Rotated(const Frequencies& f, const posenc::testing::Buffer& x,
                                std::int64_t tokens, std::int64_t heads,
                                const std::vector<std::int64_t>& positions,
                                const posenc::CosSinTable* table, int threads) {
  posenc::testing::Buffer y = x;
  posenc::RopeArgs args;
  args.q = posenc::TensorView::contiguous(y.bytes.data(), y.dtype, tokens, heads, f.spec.head_dim);
  args.positions = std::span<const std::int64_t>(positions);
  args.table = table;
  args.threads = threads;
  posenc::apply_rope(f, args);
  return y;
}

TEST(CosSinFast, OnTheFlyRotationIsTheTablePathsOnEveryTarget) {
  const std::int64_t tokens = 1100, heads = 3;
  std::vector<Named> specs;
  for (Named& s : RealSpecs()) {
    if (posenc::axis_count(s.freqs.spec) == 1) specs.push_back(std::move(s));
  }
  ForEachTarget([&](const std::string&) {
    for (const Named& spec : specs) {
      SCOPED_TRACE(spec.name);
      const Frequencies& f = spec.freqs;
      const posenc::CosSinTable table(f, tokens);
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
        SCOPED_TRACE(std::string(posenc::dtype_name(dtype)));
        const auto count = static_cast<std::size_t>(tokens * heads * f.spec.head_dim);
        posenc::testing::Buffer x(dtype, count);
        std::mt19937 rng(3);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (std::size_t i = 0; i < count; ++i) x.set(i, u(rng));
        // From 0: against the table.
        std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens));
        for (std::int64_t t = 0; t < tokens; ++t) pos[static_cast<std::size_t>(t)] = t;
        const auto with_table = Rotated(f, x, tokens, heads, pos, &table, 1);
        EXPECT_EQ(Rotated(f, x, tokens, heads, pos, nullptr, 1).bytes, with_table.bytes);
        EXPECT_EQ(Rotated(f, x, tokens, heads, pos, nullptr, 2).bytes, with_table.bytes);
        // Near 2^31 - 1, where no table reaches: against every token's row as an anchor (the
        // positions reversed, so that no row is stepped from another, and the output reversed).
        for (std::int64_t t = 0; t < tokens; ++t)
          pos[static_cast<std::size_t>(t)] = kTop - tokens + 1 + t;
        const auto stepped = Rotated(f, x, tokens, heads, pos, nullptr, 1);
        std::vector<std::int64_t> rev(pos.rbegin(), pos.rend());
        posenc::testing::Buffer xr = x;
        const std::size_t row =
            static_cast<std::size_t>(heads * f.spec.head_dim) * posenc::dtype_size(dtype);
        for (std::int64_t t = 0; t < tokens; ++t) {
          std::memcpy(&xr.bytes[static_cast<std::size_t>(t) * row],
                      &x.bytes[static_cast<std::size_t>(tokens - 1 - t) * row], row);
        }
        const auto exact_rev = Rotated(f, xr, tokens, heads, rev, nullptr, 1);
        std::int64_t differing = 0;
        for (std::int64_t t = 0; t < tokens; ++t) {
          differing += std::memcmp(&stepped.bytes[static_cast<std::size_t>(t) * row],
                                   &exact_rev.bytes[static_cast<std::size_t>(tokens - 1 - t) * row],
                                   row) != 0;
        }
        EXPECT_EQ(differing, 0);
      }
    }
  });
}

// q and k in one call, on the fly against the table path, both directions, one and two threads:
// the rows made a run ahead (RowRuns: 256 tokens at 64 pairs, 336 at Phi-3's 48, 512 at GPT-J's
// 32) are shared by both tensors and negated once for the inverse, and on two threads the pool's
// chunks (2800 / 8 = 350 tokens, starting off a multiple of 16) each cross a run's end.
TEST(CosSinFast, OnTheFlyQAndKAcrossRunsAreTheTablePathsOnEveryTarget) {
  const std::int64_t tokens = 2800, q_heads = 2, k_heads = 1;
  std::vector<Named> specs;
  for (Named& s : RealSpecs()) {
    if (s.name == "plain-10000-128" || s.name == "phi-3-mini-128k@131072" || s.name == "gpt-j-6b")
      specs.push_back(std::move(s));
  }
  ASSERT_EQ(specs.size(), 3u);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) pos[static_cast<std::size_t>(t)] = t;
  ForEachTarget([&](const std::string&) {
    for (const Named& spec : specs) {
      SCOPED_TRACE(spec.name);
      const Frequencies& f = spec.freqs;
      const posenc::CosSinTable table(f, tokens);
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        SCOPED_TRACE(std::string(posenc::dtype_name(dtype)));
        const std::int64_t dim = f.spec.head_dim;
        posenc::testing::Buffer q(dtype, static_cast<std::size_t>(tokens * q_heads * dim));
        posenc::testing::Buffer k(dtype, static_cast<std::size_t>(tokens * k_heads * dim));
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (std::int64_t i = 0; i < tokens * q_heads * dim; ++i)
          q.set(static_cast<std::size_t>(i), u(rng));
        for (std::int64_t i = 0; i < tokens * k_heads * dim; ++i)
          k.set(static_cast<std::size_t>(i), u(rng));
        for (posenc::Direction direction :
             {posenc::Direction::kForward, posenc::Direction::kInverse}) {
          for (int threads : {1, 2}) {
            SCOPED_TRACE(std::to_string(threads) + " threads, direction " +
                         std::to_string(static_cast<int>(direction)));
            auto rotated = [&](const posenc::CosSinTable* with) {
              posenc::testing::Buffer yq = q, yk = k;
              posenc::RopeArgs args;
              args.q = posenc::TensorView::contiguous(yq.bytes.data(), dtype, tokens, q_heads, dim);
              args.k = posenc::TensorView::contiguous(yk.bytes.data(), dtype, tokens, k_heads, dim);
              args.positions = std::span<const std::int64_t>(pos);
              args.table = with;
              args.direction = direction;
              args.threads = threads;
              posenc::apply_rope(f, args);
              return std::make_pair(std::move(yq), std::move(yk));
            };
            const auto [tq, tk] = rotated(&table);
            const auto [fq, fk] = rotated(nullptr);
            EXPECT_EQ(fq.bytes, tq.bytes);
            EXPECT_EQ(fk.bytes, tk.bytes);
            EXPECT_NE(tq.bytes, q.bytes);  // something was rotated
          }
        }
      }
    }
  });
}

// apply_rope keeps each thread's steppers from one call to the next (src/rope/rope_rows.cc's
// thread_stepper): an engine's decode loop, each step's token rotated at one position by every
// layer, layers alternating two frequencies (Gemma 3's local and global bases) plus three more
// than the four steppers a thread keeps, and one Frequencies object changed in place between calls
// (the same address, other inv_freq bits: its stepper must not serve it). Every call on the fly
// gives the table's bits.
TEST(CosSinFast, StepperKeptAcrossCallsGivesTheTablesBits) {
  const auto spec = [](double base) {
    return posenc::compute_frequencies(
        posenc::testing::make_spec(posenc::Method::kYarn, 128, base, 8.0, 4096));
  };
  std::vector<Frequencies> freqs = {spec(10000.0), spec(1000000.0), spec(500000.0),
                                    spec(20000.0), spec(30000.0),   spec(40000.0)};
  Frequencies changing = freqs[0];
  const std::int64_t heads = 2, head_dim = 128, first = 3000, steps = 140;
  std::vector<posenc::CosSinTable> tables;
  for (const Frequencies& f : freqs) tables.emplace_back(f, first + steps);
  Frequencies changed = changing;
  for (double& w : changed.inv_freq) w *= 0.75;
  const posenc::CosSinTable changed_table(changed, first + steps);
  ForEachTarget([&](const std::string&) {
    std::int64_t differing = 0, calls = 0;
    const auto count = static_cast<std::size_t>(heads * head_dim);
    for (std::int64_t p = first; p < first + steps; ++p) {
      const std::vector<std::int64_t> pos = {p};
      // Layers: the two alternating frequencies, now and then the others (which evict).
      std::vector<std::size_t> layers = {0, 1, 0, 1, 0, 1};
      if (p % 7 == 0) layers.insert(layers.end(), {2, 3, 4, 5});
      for (std::size_t l = 0; l < layers.size() + 1; ++l) {
        const bool is_changing = l == layers.size();
        // The changing object takes other bits from step first + 70 on.
        if (is_changing && p == first + 70) changing = changed;
        const Frequencies& f = is_changing ? changing : freqs[layers[l]];
        const posenc::CosSinTable& table =
            is_changing ? (p >= first + 70 ? changed_table : tables[0]) : tables[layers[l]];
        posenc::testing::Buffer x(DType::kF32, count), y(DType::kF32, count);
        for (std::size_t i = 0; i < count; ++i) {
          x.set(i, std::sin(static_cast<float>(i + l)));
          y.set(i, std::sin(static_cast<float>(i + l)));
        }
        posenc::RopeArgs a;
        a.q = posenc::TensorView::contiguous(x.bytes.data(), DType::kF32, 1, heads, head_dim);
        a.positions = std::span<const std::int64_t>(pos);
        posenc::apply_rope(f, a);
        a.q = posenc::TensorView::contiguous(y.bytes.data(), DType::kF32, 1, heads, head_dim);
        a.table = &table;
        posenc::apply_rope(f, a);
        differing += x.bytes != y.bytes;
        ++calls;
      }
    }
    EXPECT_EQ(differing, 0) << "of " << calls << " calls";
    changing = freqs[0];
  });
}

}  // namespace
