// rope_append_kv_cache's refusals: every bad argument (slots negative, past the cache or repeated,
// shapes, strides, dtypes, scales, paged indices) is refused with an error naming the argument and
// value, before anything is written (q, k, v and both caches stay as they were); FlashInfer's
// append positions; the enums' names.
#include "posenc/rope/kv_cache.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/core/frequencies.h"
#include "posenc/core/threads.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "reference/fp8_reference.h"
#include "reference/half_reference.h"
#include "support/error_of.h"
#include "support/kv_cache_case.h"
#include "support/rope_test_support.h"
#include "support/simd_targets.h"

namespace {

// The harness, with its using-declarations (CacheDType, DType, error_of, Names, HasSubstr, ...).
using namespace posenc_test::kv_cache;  // NOLINT(google-build-using-namespace)

// Every refusal names the argument and value, and leaves q, k, v and both caches untouched.
TEST(KvCache, RefusalsNameTheArgumentAndWriteNothing) {
  std::mt19937 rng(23);
  struct Bad {
    const char* what;
    KvCacheLayout layout;
    std::function<void(Inputs&, posenc::KvAppendArgs&)> edit;
    std::vector<std::string> says;
  };
  const std::vector<Bad> bad = {
      {"negative slot",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) {
         static std::vector<std::int64_t> s;
         s.assign(a.slot_mapping.begin(), a.slot_mapping.end());
         s[4] = -1;
         a.slot_mapping = s;
       },
       {"slot_mapping[4] (-1) must be in [0, "}},
      {"slot past the cache",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto& a) {
         static std::vector<std::int64_t> s;
         s.assign(a.slot_mapping.begin(), a.slot_mapping.end());
         s[2] = st.cache.pages * st.cache.page_size;
         a.slot_mapping = s;
       },
       {"slot_mapping[2] (20) must be in [0, 20)", "num_blocks 5 x block_size 4"}},
      {"duplicated slot",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) {
         static std::vector<std::int64_t> s;
         s.assign(a.slot_mapping.begin(), a.slot_mapping.end());
         s[3] = s[1];
         a.slot_mapping = s;
       },
       {"slot_mapping[3]", "is also the slot of token 1"}},
      {"slot count",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.slot_mapping = a.slot_mapping.subspan(1); },
       {"slot_mapping has 4 entries; expected one per token (5)"}},
      {"paged on a vllm cache",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto& a) {
         a.paged = posenc::PagedKvIndex{st.indptr, st.indices, st.last_len, st.batch_indices,
                                        st.positions};
       },
       {"paged is set, but a vllm cache"}},
      {"page index out of range",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.indices[0] = 99;
         a.paged->kv_indices = st.indices;
       },
       {"paged.kv_indices[0] (99) must be a page in [0, 5)"}},
      {"negative page index",
       KvCacheLayout::kHnd,
       [](Inputs& st, auto& a) {
         st.indices[1] = -2;
         a.paged->kv_indices = st.indices;
       },
       {"paged.kv_indices[1] (-2)"}},
      {"position past the request",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.positions[0] = 40;
         a.paged->positions = st.positions;
       },
       {"paged.positions[0] (40) must be in [0, 5)", "request 0"}},
      {"batch index",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.batch_indices[1] = 2;
         a.paged->batch_indices = st.batch_indices;
       },
       {"paged.batch_indices[1] (2) must be a request in [0, 2)"}},
      {"two tokens on one cell",
       KvCacheLayout::kHnd,
       [](Inputs& st, auto& a) {
         st.positions[1] = st.positions[0];
         a.paged->positions = st.positions;
       },
       {"token 1", "as token 0 does", "each token needs its own cell"}},
      {"last page len",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.last_len[0] = 9;
         a.paged->kv_last_page_len = st.last_len;
       },
       {"paged.kv_last_page_len[0] (9) must be in [1, 4]"}},
      {"indptr decreasing",
       KvCacheLayout::kNhd,
       [](Inputs& st, auto& a) {
         st.indptr[2] = 1;
         st.indptr[1] = 2;
         a.paged->kv_indptr = st.indptr;
       },
       {"paged.kv_indptr[2] (1) must not be below kv_indptr[1] (2)"}},
      {"no paged index",
       KvCacheLayout::kNhd,
       [](Inputs&, auto& a) { a.paged.reset(); },
       {"a nhd cache is addressed by paged"}},
      {"cache heads",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.heads = 1; },
       {"k: heads (2) must equal the cache's heads (1)"}},
      {"cache head_dim",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.head_dim = 8; },
       {"cache head_dim (8) must equal the spec's head_dim (16)"}},
      {"cache strides overlap",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.entry_stride = 20; },
       {"cache strides", "entry_stride 20", "overlap"}},
      {"scale on an f16 cache",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.k_scale = 2.0f; },
       {"cache k_scale (2.0", "fp8_e4m3 only", "f16 cache"}},
      {"null value cache",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto&) { st.cache.value = nullptr; },
       {"cache value is null"}},
      {"v tokens",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.v.tokens = 4; },
       {"v: tokens (4) must equal the number of positions (5)"}},
      {"v heads",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.v.heads = 1; },
       {"v: heads (1) must equal the cache's heads (2)"}},
      {"q head_dim",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.q->head_dim = 8; },
       {"q: head_dim (8)"}},
      {"positions count",
       KvCacheLayout::kVllm,
       [](Inputs& st, auto& a) {
         a.positions = std::span<const std::int64_t>(st.pos64).subspan(1);
       },
       {"k: tokens (5) must equal the number of positions (4)"}},
      {"threads",
       KvCacheLayout::kVllm,
       [](Inputs&, auto& a) { a.threads = 0; },
       {"threads (0) must be in [1, "}},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.what);
    Case c;
    c.spec = posenc::testing::Spec(16, 16, 0, Layout::kHalfSplit);
    c.layout = b.layout;
    c.cache_dtype = CacheDType::kF16;
    Inputs s = Make(c, rng);
    posenc::KvAppendArgs a = s.args(c);
    b.edit(s, a);
    const auto qkv = s.qkv, vbuf = s.vbuf, kc = s.key_cache, vc = s.value_cache;
    const std::string err = error_of([&] { posenc::rope_append_kv_cache(s.freqs, s.cache, a); });
    EXPECT_THAT(err, HasSubstr("rope_append_kv_cache: "));
    for (const std::string& part : b.says) EXPECT_THAT(err, HasSubstr(part));
    EXPECT_TRUE(s.qkv == qkv && s.vbuf == vbuf) << "inputs written before the refusal";
    EXPECT_TRUE(s.key_cache == kc && s.value_cache == vc) << "cache written before the refusal";
  }
  // fp8 scales must be positive and finite.
  Case c;
  c.spec = posenc::testing::Spec(16, 16, 0, Layout::kHalfSplit);
  c.cache_dtype = CacheDType::kFp8E4M3;
  for (float scale : {0.0f, -1.0f, std::numeric_limits<float>::infinity()}) {
    Inputs s = Make(c, rng);
    s.cache.v_scale = scale;
    EXPECT_THAT(error_of([&] { posenc::rope_append_kv_cache(s.freqs, s.cache, s.args(c)); }),
                Names("cache v_scale", "must be positive and finite"));
  }
}

TEST(KvCache, AppendPositionsMirrorsFlashInfer) {
  // flashinfer.page.get_batch_indices_positions: 3 requests appending 2, 0 and 3 tokens, whose
  // KV lengths after the append are (2 - 1) * 4 + 3 = 7, 4 and 3.
  const std::vector<std::int32_t> append = {0, 2, 2, 5}, indptr = {0, 2, 3, 4}, last = {3, 4, 3};
  std::vector<std::int32_t> batch(5), pos(5);
  posenc::append_positions(append, indptr, last, 4, batch, pos);
  EXPECT_EQ(batch, (std::vector<std::int32_t>{0, 0, 2, 2, 2}));
  EXPECT_EQ(pos, (std::vector<std::int32_t>{5, 6, 0, 1, 2}));
  std::vector<std::int32_t> short_out(4);
  EXPECT_THAT(error_of([&] { posenc::append_positions(append, indptr, last, 4, short_out, pos); }),
              HasSubstr("append_indptr[3] (5) entries; got 4 and 5"));
  const std::vector<std::int32_t> too_many = {0, 8, 8, 11};
  std::vector<std::int32_t> b11(11), p11(11);
  EXPECT_THAT(error_of([&] { posenc::append_positions(too_many, indptr, last, 4, b11, p11); }),
              HasSubstr("request 0 appends 8 tokens but its KV length after the append is 7"));
}

TEST(KvCache, NamesParse) {
  for (CacheDType d : kCacheDTypes)
    EXPECT_EQ(posenc::parse_cache_dtype(posenc::cache_dtype_name(d)), d);
  for (KvCacheLayout l : kLayouts)
    EXPECT_EQ(posenc::parse_kv_cache_layout(posenc::kv_cache_layout_name(l)), l);
  EXPECT_THAT(error_of([] { posenc::parse_cache_dtype("fp8"); }), Names("cache dtype", "\"fp8\""));
  EXPECT_THAT(error_of([] { posenc::parse_kv_cache_layout("NHD"); }),
              Names("kv cache layout", "\"NHD\""));
}

}  // namespace
