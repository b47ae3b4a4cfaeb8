// RowRuns (src/rope/rope_rows.h): the rows computed ahead, a run of tokens at a time, that
// apply_rope's blocks and the fused append read on the fly. Each token's row must be the one its
// RowBlockFn made for it, whatever run holds it; runs must start where the caller's blocks do and
// hold a whole number of them; a second RowRuns alive on the same thread must not write into the
// first one's rows.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "rope/rope_rows.h"

namespace {

using posenc::detail::kRowRunBytes;
using posenc::detail::RowBlockFn;
using posenc::detail::RowRuns;

// Entry i of token t's cos row, and of its sin row: values no two (token, pair) share.
float CosOf(std::int64_t t, std::int64_t i) { return static_cast<float>(t * 1000 + i); }
float SinOf(std::int64_t t, std::int64_t i) { return -static_cast<float>(t * 1000 + i) - 0.5f; }

// A RowBlockFn that writes those values and records each call's (t0, count).
struct Recorder {
  std::int64_t n;
  std::vector<std::pair<std::int64_t, std::int64_t>> calls;
  RowBlockFn fn() {
    return [this](std::int64_t t0, std::int64_t count, float* c, float* s, std::int64_t stride) {
      calls.emplace_back(t0, count);
      for (std::int64_t k = 0; k < count; ++k) {
        for (std::int64_t i = 0; i < n; ++i) {
          c[k * stride + i] = CosOf(t0 + k, i);
          s[k * stride + i] = SinOf(t0 + k, i);
        }
      }
    };
  }
};

// Every row of [begin, end) read in order, in the caller's groups: all pointers of a group taken
// first, then checked (apply_rope takes a block's 16 rows before it rotates them).
void ExpectRowsOfEveryToken(RowRuns& runs, std::int64_t n, std::int64_t begin, std::int64_t end,
                            std::int64_t group) {
  for (std::int64_t t0 = begin; t0 < end; t0 += group) {
    std::vector<std::pair<float*, float*>> rows;
    for (std::int64_t t = t0; t < std::min(end, t0 + group); ++t) rows.push_back(runs.row(t));
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::int64_t t = t0 + static_cast<std::int64_t>(k);
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(rows[k].first[i], CosOf(t, i)) << "token " << t << " pair " << i;
        ASSERT_EQ(rows[k].second[i], SinOf(t, i)) << "token " << t << " pair " << i;
      }
    }
  }
}

TEST(RowRuns, EveryTokenGetsItsRowAcrossRunsInWholeGroups) {
  // 64 pairs: 256 rows of 512 bytes fill kRowRunBytes; 48 pairs (Phi-3's head_dim 96): 341 would,
  // 336 are whole blocks of 16; 8 pairs: 4096 would, the thread's tokens are fewer; 4096 pairs:
  // one block of 16 rows is more than kRowRunBytes and still one run.
  struct Expect {
    std::int64_t n, begin, end, run;
  };
  for (const Expect& e : {Expect{64, 0, 1100, 256}, Expect{48, 7, 1100, 336},
                          Expect{8, 3, 1003, 1000}, Expect{4096, 0, 40, 16}}) {
    SCOPED_TRACE(e.n);
    ASSERT_EQ(kRowRunBytes, 128 << 10);
    Recorder rec{e.n, {}};
    const RowBlockFn fn = rec.fn();
    RowRuns runs(fn, e.n, e.begin, e.end, 16);
    EXPECT_EQ(runs.run_tokens(), e.run);
    ExpectRowsOfEveryToken(runs, e.n, e.begin, e.end, 16);
    // One call per run, starting at begin, begin + run, ...; the last one up to end.
    std::vector<std::pair<std::int64_t, std::int64_t>> expected;
    for (std::int64_t t = e.begin; t < e.end; t += e.run)
      expected.emplace_back(t, std::min(e.run, e.end - t));
    EXPECT_EQ(rec.calls, expected);
  }
}

TEST(RowRuns, ABlocksRowsInOneCallAreThoseOfItsTokens) {
  // rows(t0, count): apply_rope's blocks (64 tokens on the fly) take their pointers in one call;
  // each must be the row row() gives that token, across runs, up to a last short block. Groups of
  // 64 and of 16.
  struct Case {
    std::int64_t n, begin, end;
  };
  constexpr std::int64_t kMaxGroup = 64;
  for (const std::int64_t group : {std::int64_t{16}, kMaxGroup}) {
    for (const Case& e :
         {Case{64, 0, 1100}, Case{48, 7, 1100}, Case{8, 3, 1003}, Case{4096, 0, 40}}) {
      SCOPED_TRACE(::testing::Message() << "group " << group << ", n " << e.n);
      Recorder rec{e.n, {}};
      const RowBlockFn fn = rec.fn();
      RowRuns runs(fn, e.n, e.begin, e.end, group);
      for (std::int64_t t0 = e.begin; t0 < e.end; t0 += group) {
        const std::int64_t count = std::min(group, e.end - t0);
        const float* c[kMaxGroup] = {};
        const float* s[kMaxGroup] = {};
        runs.rows(t0, count, c, s);
        for (std::int64_t k = 0; k < count; ++k) {
          const std::int64_t t = t0 + k;
          const auto [rc, rs] = runs.row(t);  // within the run just made: no new call
          ASSERT_EQ(c[k], rc) << "token " << t;
          ASSERT_EQ(s[k], rs) << "token " << t;
          for (std::int64_t i = 0; i < e.n; ++i) {
            ASSERT_EQ(c[k][i], CosOf(t, i)) << "token " << t << " pair " << i;
            ASSERT_EQ(s[k][i], SinOf(t, i)) << "token " << t << " pair " << i;
          }
        }
        for (std::int64_t k = count; k < kMaxGroup; ++k) EXPECT_EQ(c[k], nullptr) << "slot " << k;
      }
      // As many row calls as runs: the block calls made no extra ones.
      const std::int64_t run = runs.run_tokens();
      EXPECT_TRUE(run % group == 0 || run == e.end - e.begin) << "run " << run;
      EXPECT_EQ(static_cast<std::int64_t>(rec.calls.size()), (e.end - e.begin + run - 1) / run);
    }
  }
}

TEST(RowRuns, RowsStayUntilTheNextRunAndMayBeWritten) {
  // kernel_row negates a row's sines in place for the inverse rotation: the rows are the caller's
  // until it asks for a token past the run.
  Recorder rec{64, {}};
  const RowBlockFn fn = rec.fn();
  RowRuns runs(fn, 64, 0, 600, 16);
  const auto [c0, s0] = runs.row(0);
  s0[5] = 42.0f;
  const auto [c255, s255] = runs.row(255);
  EXPECT_EQ(runs.row(0).second[5], 42.0f);  // the same run: not made again
  EXPECT_EQ(c255[0], CosOf(255, 0));
  EXPECT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(runs.row(256).first[0], CosOf(256, 0));
  EXPECT_EQ(rec.calls.size(), 2u);
}

TEST(RowRuns, ASecondOneOnTheSameThreadKeepsItsOwnRows) {
  // The thread's buffer serves one RowRuns at a time; a second one alive beside it (none does in
  // the library today) takes its own, so neither writes the other's rows.
  Recorder a{64, {}}, b{64, {}};
  const RowBlockFn fa = a.fn();
  const RowBlockFn fb = [&](std::int64_t t0, std::int64_t count, float* c, float* s,
                            std::int64_t stride) { b.fn()(t0 + 5000, count, c, s, stride); };
  RowRuns first(fa, 64, 0, 300, 16);
  EXPECT_TRUE(first.holds_thread_buffer());
  const float* first_row = first.row(10).first;
  {
    RowRuns second(fb, 64, 0, 300, 16);
    EXPECT_FALSE(second.holds_thread_buffer());
    const float* second_row = second.row(10).first;
    EXPECT_NE(first_row, second_row);
    EXPECT_EQ(second_row[3], CosOf(5010, 3));
    EXPECT_EQ(first_row[3], CosOf(10, 3));
  }
  // The first one's runs go on as before.
  ExpectRowsOfEveryToken(first, 64, 16, 300, 16);
}

TEST(RowRuns, AThrowingRowBlockGivesTheThreadsBufferBack) {
  // A row function that throws (a stepper's error) unwinds the RowRuns that called it; the next
  // one on this thread takes the thread's buffer again (the same rows' address) instead of
  // allocating its own on every call from then on.
  Recorder rec{64, {}};
  const RowBlockFn fn = rec.fn();
  const float* thread_rows = nullptr;
  {
    RowRuns first(fn, 64, 0, 100, 16);
    ASSERT_TRUE(first.holds_thread_buffer());
    thread_rows = first.row(0).first;
  }
  const RowBlockFn throws = [](std::int64_t, std::int64_t, float*, float*, std::int64_t) {
    throw std::runtime_error("row");
  };
  try {
    RowRuns failing(throws, 64, 0, 100, 16);
    failing.row(0);
    FAIL() << "the row function's exception was lost";
  } catch (const std::runtime_error&) {
  }
  RowRuns after(fn, 64, 0, 100, 16);
  EXPECT_TRUE(after.holds_thread_buffer());
  EXPECT_EQ(after.row(0).first, thread_rows);
  EXPECT_EQ(after.row(99).first[2], CosOf(99, 2));
}

}  // namespace
