// CosSinTable: every entry against the exact value (precise) and the float32 references (hf,
// ggml).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/frequencies.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/kv_cache.h"
#include "posenc/rope/table.h"
#include "posenc/rope/targets.h"
#include "reference/ggml_reference.h"
#include "reference/hf_float32_reference.h"
#include "reference/rope_reference.h"
#include "support/error_of.h"
#include "support/rope_test_support.h"

namespace {

using posenc::Layout;
using posenc::testing::YarnSpec;

TEST(CosSinTable, PreciseEntriesAreTheExactValuesRoundedOnce) {
  const posenc::Frequencies f = posenc::compute_frequencies(YarnSpec(128, Layout::kHalfSplit));
  const posenc::CosSinTable table(f, 4096);
  int off = 0;
  for (std::int64_t p : {0, 1, 2, 100, 4095}) {
    for (std::int64_t i = 0; i < 64; ++i) {
      long double s, c;
      posenc_ref::ExactSinCosL(p, f.inv_freq[static_cast<std::size_t>(i)], s, c);
      const float want_c = static_cast<float>(c * f.attention_factor);
      const float want_s = static_cast<float>(s * f.attention_factor);
      // Equal, or (a tie-breaking double rounding) one float32 ulp away; count those.
      const float got_c = table.cos_row(p)[static_cast<std::size_t>(i)];
      const float got_s = table.sin_row(p)[static_cast<std::size_t>(i)];
      off += (got_c != want_c) + (got_s != want_s);
      EXPECT_LE(std::abs(got_c - want_c),
                std::nextafter(std::abs(want_c), INFINITY) - std::abs(want_c));
      EXPECT_LE(std::abs(got_s - want_s),
                std::nextafter(std::abs(want_s), INFINITY) - std::abs(want_s));
    }
  }
  EXPECT_LE(off, 2) << "entries not exactly rounded";
}

TEST(CosSinTable, HfAndGgmlTablesFollowTheirReferences) {
  posenc::RopeSpec spec = YarnSpec(128, Layout::kHalfSplit);
  const posenc::Frequencies hf = posenc::compute_frequencies(spec, posenc::Numerics::kHf);
  const posenc::CosSinTable hf_table(hf, 140000);
  std::vector<float> inv(hf.inv_freq.begin(), hf.inv_freq.end()), c, s;
  for (std::int64_t p : {0, 1, 4095, 131071, 139999}) {
    posenc_hf::CosSinAt(inv, hf.attention_factor, p, c, s);
    for (std::size_t i = 0; i < inv.size(); ++i) {
      EXPECT_EQ(hf_table.cos_row(p)[i], c[i]) << p << " " << i;
      EXPECT_EQ(hf_table.sin_row(p)[i], s[i]) << p << " " << i;
    }
  }
  const posenc::Frequencies gg = posenc::compute_frequencies(spec, posenc::Numerics::kGgml);
  const posenc::CosSinTable gg_table(gg, 5000);
  posenc_ggml::Params gp;
  gp.n_dims = gg.ggml->n_dims;
  gp.n_ctx_orig = gg.ggml->n_ctx_orig;
  gp.freq_base = gg.ggml->freq_base;
  gp.freq_scale = gg.ggml->freq_scale;
  gp.ext_factor = gg.ggml->ext_factor;
  gp.attn_factor = gg.ggml->attn_factor;
  gp.beta_fast = gg.ggml->beta_fast;
  gp.beta_slow = gg.ggml->beta_slow;
  for (std::int64_t p : {0, 1, 4095, 4999}) {
    posenc_ggml::CosSinAt(gp, p, c, s);
    for (std::size_t i = 0; i < c.size(); ++i) {
      EXPECT_EQ(gg_table.cos_row(p)[i], c[i]) << p << " " << i;
      EXPECT_EQ(gg_table.sin_row(p)[i], s[i]) << p << " " << i;
    }
  }
}

// apply_rope and rope_append_kv_cache take a table only with the frequencies it was built from:
// the same bits of inv_freq (a zero's sign included: sin(p * -0.0) is -0.0), of the attention
// factor and the same numerics. Its own Frequencies and an equal copy pass; each difference is
// refused before q is touched.
TEST(CosSinTable, CallsRefuseATableOfOtherFrequencies) {
  posenc::RopeSpec spec = YarnSpec(8, Layout::kHalfSplit);
  posenc::Frequencies f = posenc::compute_frequencies(spec);
  f.inv_freq.back() = 0.0;  // a pair that never turns, to test the sign of its zero below
  const posenc::CosSinTable table(f, 16);
  std::vector<float> q(2 * 8, 0.5f), k(2 * 8, 0.25f), v(2 * 8, 0.125f);
  const std::vector<std::int64_t> positions = {3, 4};
  auto apply = [&](const posenc::Frequencies& g) {
    posenc::RopeArgs args;
    args.q = posenc::TensorView::contiguous(q.data(), posenc::DType::kF32, 2, 1, 8);
    args.positions = std::span<const std::int64_t>(positions);
    args.table = &table;
    posenc::apply_rope(g, args);
  };
  std::vector<float> key(4 * 8), value(4 * 8);
  const std::vector<std::int64_t> slots = {0, 1};
  auto append = [&](const posenc::Frequencies& g) {
    const posenc::KvCache cache =
        posenc::KvCache::contiguous(key.data(), value.data(), posenc::CacheDType::kF32,
                                    posenc::KvCacheLayout::kVllm, 2, 2, 1, 8);
    posenc::KvAppendArgs args;
    args.k = posenc::TensorView::contiguous(k.data(), posenc::DType::kF32, 2, 1, 8);
    args.v = posenc::TensorView::contiguous(v.data(), posenc::DType::kF32, 2, 1, 8);
    args.positions = std::span<const std::int64_t>(positions);
    args.table = &table;
    args.slot_mapping = slots;
    posenc::rope_append_kv_cache(g, cache, args);
  };
  EXPECT_NO_THROW(apply(table.frequencies()));
  EXPECT_NO_THROW(apply(posenc::Frequencies(f)));
  EXPECT_NO_THROW(append(posenc::Frequencies(f)));

  posenc::Frequencies base = f;
  base.inv_freq[1] = std::nextafter(base.inv_freq[1], 1.0);
  posenc::Frequencies zero = f;
  zero.inv_freq.back() = -0.0;
  posenc::Frequencies factor = f;
  factor.attention_factor = std::nextafter(factor.attention_factor, 2.0);
  posenc::Frequencies numerics = f;
  numerics.numerics = posenc::Numerics::kHf;
  for (const posenc::Frequencies* g : {&base, &zero, &factor, &numerics}) {
    const std::vector<float> before = q;
    EXPECT_THAT(posenc::testing::error_of([&] { apply(*g); }),
                ::testing::HasSubstr("apply_rope: table was built from other frequencies"));
    EXPECT_EQ(q, before);
    EXPECT_THAT(posenc::testing::error_of([&] { append(*g); }),
                ::testing::HasSubstr("table was built from other frequencies"));
  }
}

}  // namespace
