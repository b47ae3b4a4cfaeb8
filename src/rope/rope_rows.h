// src/rope/rope_rows.h: what apply_rope and rope_append_kv_cache share (internal): argument checks
// of views, positions and tables (defined in rope/apply.cc), the per-token cos/sin rows
// (rope/rope_rows.cc), and the row the kernels take.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"
#include "posenc/rope/table.h"
#include "posenc/rope/tensor.h"
#include "rope/kernels/rotate.h"

namespace posenc::detail {

// The cos/sin row of token t (n = pair_count values each): pointers to a table's rows where the
// token's row is one (no copy: at head_dim 128 and 8 heads a row copy per token was a tenth of
// the kernel's time), else c and s after filling them.
using Row = std::pair<const float*, const float*>;
using RowFn = std::function<Row(std::int64_t token, float* c, float* s)>;

// Whether a and b are one view of the same memory (rotation in place).
inline bool same_memory(const TensorView& a, const TensorView& b) {
  return a.data == b.data && a.token_stride == b.token_stride && a.head_stride == b.head_stride;
}

// Heads [h0, h1) of token t of `in`, rotated into `out` (the same view for in place; the rest of
// each head is copied where they differ), as the kernels take them (rotate.h), with rows c and s,
// and the software prefetch where `prefetch` (software_prefetch.h decides). Every field is given
// and the result initializes its TokenHeads or TokenBlock in place (a prvalue: no copy). Two other
// forms cost a one-token call a fifth of its time or more: assigning a returned struct to
// TokenBlock::heads (GCC built it with 8-byte stores and copied it with 16-byte loads, each waiting
// on the two stores it spanned: no store-to-load forwarding), and filling a default-initialized one
// field by field (GCC zeroed it with a `rep stosq`, whose start-up took half of apply_rope's block
// loop).
inline TokenHeads token_heads(const TensorView& in, const TensorView& out, const RopeSpec& spec,
                              std::int64_t n, std::int64_t t, std::int64_t h0, std::int64_t h1,
                              const float* c, const float* s, bool prefetch) {
  const auto es = static_cast<std::int64_t>(dtype_size(in.dtype));
  return TokenHeads{
      .in = static_cast<const char*>(in.data) + (t * in.token_stride + h0 * in.head_stride) * es,
      .out = static_cast<char*>(out.data) + (t * out.token_stride + h0 * out.head_stride) * es,
      .dtype = in.dtype,
      .heads = h1 - h0,
      .head_stride = in.head_stride,
      .head_dim = in.head_dim,
      .offset = spec.rotary_offset,
      .pairs = n,
      .layout = spec.layout,
      .copy_rest = !same_memory(in, out),
      .prefetch = prefetch,
      .c = c,
      .s = s,
  };
}

// `who: name: ...` errors when v does not fit `tokens` and the spec, or its strides overlap.
void check_rope_view(const TensorView& v, std::string_view name, std::int64_t tokens,
                     const RopeSpec& spec, std::string_view who);

// Tokens of a call: one position per token for one axis; [axes, tokens] for a multi-axis spec,
// whose token count comes from the tensor (`view_tokens`, the view named `view`).
std::int64_t rope_token_count(const RopeSpec& spec, const Positions& positions,
                              std::int64_t view_tokens, std::string_view who,
                              std::string_view view);

// Throws when `table` (if any) was built from other frequencies.
void check_rope_table(const Frequencies& freqs, const CosSinTable* table, std::string_view who);

// The most axes a spec's axis map may read (M-RoPE: 3; rope_token_count refuses more).
inline constexpr std::int64_t kMaxAxes = 4;

// The axis positions of token t, positions[a * tokens + t] for a < axes, into out.
void axis_positions(const Positions& positions, std::int64_t axes, std::int64_t tokens,
                    std::int64_t t, std::int64_t* out);

// The rows of a call's tokens: from the table where every position of the token is inside it,
// else computed on the fly (the multi-axis gather of apply.h). Keeps references to freqs and
// table, copies the rest. Lives in the caller's frame and is handed over as
// RowFn(std::cref(rows)): a std::function over a reference wrapper allocates nothing, where one
// over a closure of this size allocated on every call. Allocates nothing itself either: its runs
// were two std::vectors, and their allocations took about a quarter of an M-RoPE decode step's
// apply_rope (32 heads of 128, f32, Zen 4).
class CosSinRows {
 public:
  CosSinRows(const Frequencies& freqs, const Positions& positions, std::int64_t tokens,
             const CosSinTable* table);
  CosSinRows(const CosSinRows&) = delete;
  CosSinRows& operator=(const CosSinRows&) = delete;

  // Token t's row; c and s (n values each) are filled where the row is not a table's.
  Row operator()(std::int64_t t, float* c, float* s) const;

  // The rows of tokens [t0, t0 + count) where each is read in place from the table (one axis,
  // every position inside the table): their cos and sin rows' pointers in c[0 .. count) and
  // s[0 .. count), and true; otherwise false (some entries may have been written; the caller asks
  // operator() for each token). The same pointers as operator() gives those tokens.
  bool table_rows(std::int64_t t0, std::int64_t count, const float** c, const float** s) const;
  // Whether table_rows can apply: a table and one axis (a block may still hold a position
  // outside the table).
  bool reads_table_rows() const { return axes_ == 1 && table_ != nullptr; }

  // Bit a set where the gather prefetches the table rows of axis a (gather_prefetches_rows): for
  // tests.
  std::uint32_t prefetched_axes() const;

 private:
  struct Run {  // slots [begin, end) read from one axis' row
    std::size_t begin, end, axis;
  };
  // A map of up to kMaxRuns runs (Qwen2-VL's sections: 3) is gathered run by run, one of more
  // (Qwen3-VL's interleaved map: a run per slot or two) slot by slot.
  static constexpr std::size_t kMaxRuns = 8;
  void compute(std::span<const std::int64_t> axis_positions, float* c, float* s) const;
  void prefetch_table_rows(std::int64_t u, std::size_t axis, std::int64_t begin,
                           std::int64_t end) const;
  // Each axis' lowest and highest position over the tokens the gather serves (not text, inside a
  // table of table_rows rows) in lo and hi; false where there is none.
  bool gathered_positions(std::int64_t table_rows, std::int64_t* lo, std::int64_t* hi) const;

  const Frequencies& freqs_;
  Positions positions_;
  std::int64_t tokens_;
  const CosSinTable* table_;
  std::int64_t axes_;
  std::size_t n_;
  bool step_;          // precise numerics: rows from each thread's CosSinStepper
  bool gather_table_;  // multi-axis rows may be gathered from the table's rows
  // Multi-axis with a table and a token that is not text only (else nothing reads them): the map
  // as runs of consecutive slots on one axis (run_count_ of them; 0: slot by slot, or not built),
  // and the slots each axis reads, first to last.
  std::array<Run, kMaxRuns> runs_;
  std::size_t run_count_ = 0;
  std::array<Run, kMaxAxes> spans_;
  std::size_t span_count_ = 0;
};

// Whether CosSinRows' multi-axis gather prefetches the table rows of an axis (prefetch_table_rows)
// whose positions over the gathered tokens of a call (image tokens; not text, which reads its row
// in place) lie in [lo, hi]: where they span more than kCachedRowBytes of rows (cos and sin of
// `pairs` pairs each). False for an empty span (lo > hi). An image's tokens keep t (Qwen2-VL:
// one position per image), h along a row of patches and w within the grid's width: a few dozen
// rows each, read again and again, which stay in L2 once read, where prefetching them to L1
// for every token cost the gather its instructions and miss buffers. An axis that moves on with
// the tokens (text positions, a benchmark's t = token index) reads a new row per token: its rows
// are prefetched. Measured on Zen 4, apply_rope's M-RoPE time over the one-axis time in the same
// process (32 heads of 128, 4096 tokens, four rounds): a Qwen2-VL image prompt (32 text tokens,
// a 64 x 63 grid, 32 text tokens) f16 1.145 -> 1.112, bf16 1.128 -> 1.088, f32 1.057 -> 1.042;
// [t, t / 64, t % 64] f16 1.249 -> 1.223, bf16 1.258 -> 1.253, f32 1.125 -> 1.112.
inline constexpr std::int64_t kCachedRowBytes = std::int64_t{256} << 10;
bool gather_prefetches_rows(std::int64_t lo, std::int64_t hi, std::int64_t pairs);

// The rows of tokens [t0, t0 + count), row k's n values at c + k * stride and s + k * stride.
using RowBlockFn = std::function<void(std::int64_t t0, std::int64_t count, float* c, float* s,
                                      std::int64_t stride)>;

// CosSinRows' rows a block of tokens at a time, where that is cheaper: no table, `precise`
// numerics, any axis map (CosSinStepper::rows_by_axis steps a prefill's block, or a multi-axis
// block's runs, in one kernel call each). Keeps a reference to freqs. Held in the caller's frame and handed over by fn(): a std::function over
// its closure (32 bytes) allocated on every call without a table, as CosSinRows' did.
class CosSinRowBlocks {
 public:
  CosSinRowBlocks(const Frequencies& freqs, const Positions& positions, std::int64_t tokens,
                  const CosSinTable* table);
  CosSinRowBlocks(const CosSinRowBlocks&) = delete;
  CosSinRowBlocks& operator=(const CosSinRowBlocks&) = delete;
  void operator()(std::int64_t t0, std::int64_t count, float* c, float* s,
                  std::int64_t stride) const;
  // RowBlockFn(std::cref(*this)) where block rows apply (no table, `precise`; any axis map:
  // CosSinStepper::rows_by_axis), else an empty one.
  RowBlockFn fn() const { return applies_ ? RowBlockFn(std::cref(*this)) : RowBlockFn(); }

 private:
  const Frequencies& freqs_;
  Positions positions_;
  std::int64_t tokens_;
  std::int64_t axes_;
  bool applies_;
};

// Rows computed ahead (a RowBlockFn: no table) for a chunk of tokens [begin, end) that one thread
// rotates (a whole call on one thread; the pool's chunks, about four per thread, on more), a run
// of up to kRowRunBytes of rows at a time (one group where a group's rows are more: 16 rows of
// more than 1024 pairs), made before any of the run's tokens is rotated. A run's length follows
// the rotated pairs (256 tokens at 64 pairs, 512 at 32). Each thread keeps one buffer for them,
// grown to the largest run it has held (one RowRuns at a time per thread; a second one alive on
// the same thread takes a buffer of its own). Why runs: a row stepped right after a block
// of 16 tokens was rotated took longer than one stepped after the row before, the rotation having
// streamed the tensor through the caches in between (Zen 4, 64 pairs, the stepper's call timed by
// rdtsc: 70-90 TSC cycles a row alone, 95-117 between blocks of 32 f16 heads, 100-136 with 128 KiB
// touched between blocks). Made a run at a time, the on-the-fly calls took, as a share of the time
// with rows made 16 at a time (one thread, [4096, heads, 128], medians of 7 processes of each
// binary in turn, a busy host): apply_rope at 32 heads f32 / f16 / bf16 0.97 / 0.86 / 0.83, at 8
// heads 0.96 / 0.98 / 0.99; M-RoPE (Qwen2-VL, 32 heads) 0.95-0.97 / 0.85-0.95 / 0.84-0.89; the
// fused append at Llama 3 8B's and Llama 2 7B's prefills 1.00 / 0.87-0.88 / 0.81-0.90 (medians of
// 5). The kernels then read each row from L2, as they read a table's rows from memory.
inline constexpr std::int64_t kRowRunBytes = std::int64_t{128} << 10;

class RowRuns {
 public:
  // `block` must be callable (rows on the fly); `pairs` is n. A run holds a multiple of `group`
  // tokens (apply_rope's kernel blocks, 64 tokens on the fly, take their rows' pointers before
  // the call that rotates them, so a block's rows must not straddle two runs).
  RowRuns(const RowBlockFn& block, std::int64_t pairs, std::int64_t begin, std::int64_t end,
          std::int64_t group = 1);
  ~RowRuns();
  RowRuns(const RowRuns&) = delete;
  RowRuns& operator=(const RowRuns&) = delete;
  // Token t's row, t in [begin, end) and never below the t of the call before; the run holding t
  // is made when t passes the last one (runs start at begin, begin + run_tokens(), ...). The row
  // stays valid, and may be written (kernel_row's s_neg), until the next run is made.
  std::pair<float*, float*> row(std::int64_t t);
  // The rows of tokens [t0, t0 + count), a block that lies inside one run (t0 a multiple of
  // `group` past begin, count at most `group`), as row() gives them, in c[0 .. count) and
  // s[0 .. count): one call a block instead of one a token (apply_rope's blocks of 64).
  void rows(std::int64_t t0, std::int64_t count, const float** c, const float** s);
  // How many tokens a run holds (at least one).
  std::int64_t run_tokens() const { return run_; }
  // Whether the rows live in the thread's buffer (not in one of this RowRuns' own).
  bool holds_thread_buffer() const { return holds_thread_buffer_; }

 private:
  const RowBlockFn& block_;
  std::int64_t n_, end_, run_;
  std::int64_t first_ = 0, last_ = 0;  // the run made: tokens [first_, last_)
  float* rows_ = nullptr;
  std::unique_ptr<float[]> own_;  // where this thread's buffer is taken
  bool holds_thread_buffer_ = false;
};

// The row in the kernels' form (rope/kernels/rotate.h), either layout: (c, s) as they are, or
// with s negated into s_neg for the inverse. s_neg may be row.second's own buffer. Returns the
// pointers to hand over.
inline Row kernel_row(float sign, std::int64_t n, Row row, float* s_neg) {
  const auto [c, s] = row;
  if (sign < 0) {
    for (std::int64_t i = 0; i < n; ++i) s_neg[i] = -s[i];
    return {c, s_neg};
  }
  return row;
}

// Room for a call's rows: `count` floats on the stack up to 4096 (16 KiB: 16 tokens of half-split
// rows up to head_dim 256), else on the heap; not zeroed (each row is written before it is read).
// A decode step's call rotates 16 KiB (32 f32 heads of 128); zeroing and freeing vectors of rows
// for it took as long as a third of the rotation.
class RowScratch {
 public:
  explicit RowScratch(std::size_t count)
      : heap_(count > kStackFloats ? new float[count] : nullptr),
        data_(heap_ ? heap_.get() : stack_) {}
  RowScratch(const RowScratch&) = delete;
  RowScratch& operator=(const RowScratch&) = delete;
  float* data() { return data_; }

 private:
  static constexpr std::size_t kStackFloats = 4096;
  float stack_[kStackFloats];
  std::unique_ptr<float[]> heap_;
  float* data_;
};

}  // namespace posenc::detail
