// apply_rope and rerotate_keys: argument checks, blocks of tokens over threads; the per-token cos/sin
// rows are rope/rope_rows.cc, the SIMD rotation itself rope/kernels/rotate.cc.
#include "posenc/rope/apply.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/threads.h"
#include "rope/kernels/rotate.h"
#include "rope/rope_rows.h"
#include "rope/software_prefetch.h"
#include "util/thread_pool.h"

namespace posenc {
namespace {

using detail::kMaxAxes;
using detail::RowFn;

// Work below this many rotated elements runs on the calling thread: waking a worker costs a few
// microseconds, more than rotating a decode token (32 heads x 128 dims is ~1 us of memory traffic).
constexpr std::int64_t kMinParallelElements = std::int64_t{1} << 16;

std::string str(std::int64_t v) { return std::to_string(v); }

struct Pass {
  const TensorView* in;
  const TensorView* out;  // == in for in place
};

}  // namespace

namespace detail {

void check_rope_view(const TensorView& v, std::string_view name, std::int64_t tokens,
                     const RopeSpec& spec, std::string_view who) {
  auto fail = [&](const std::string& what) {
    throw Error(std::string(who) + ": " + std::string(name) + ": " + what);
  };
  if (v.tokens != tokens)
    fail("tokens (" + str(v.tokens) + ") must equal the number of positions (" + str(tokens) + ")");
  if (v.heads <= 0) fail("heads (" + str(v.heads) + ") must be positive");
  if (v.head_dim < spec.rotary_offset + spec.rotary_dim) {
    fail("head_dim (" + str(v.head_dim) + ") must hold rotary_offset + rotary_dim (" +
         str(spec.rotary_offset) + " + " + str(spec.rotary_dim) + ")");
  }
  if (v.head_dim != spec.head_dim) {
    fail("head_dim (" + str(v.head_dim) + ") must equal the spec's head_dim (" +
         str(spec.head_dim) + ")");
  }
  // No two elements may share memory: either tokens hold whole groups of heads (token-major,
  // [tokens, heads, dim] as engines keep q) or heads hold whole runs of tokens (head-major,
  // [heads, tokens, dim] as transformers' [batch, heads, seq, dim] is).
  const bool one_token = v.tokens <= 1, one_head = v.heads <= 1;
  const std::int64_t token_major_span = (v.heads - 1) * v.head_stride + v.head_dim;
  const std::int64_t head_major_span = (v.tokens - 1) * v.token_stride + v.head_dim;
  const bool token_major = (one_head || v.head_stride >= v.head_dim) &&
                           (one_token || v.token_stride >= token_major_span);
  const bool head_major =
      (one_token || v.token_stride >= v.head_dim) && (one_head || v.head_stride >= head_major_span);
  if (!token_major && !head_major) {
    fail("token_stride (" + str(v.token_stride) + ") and head_stride (" + str(v.head_stride) +
         ") overlap: expected token_stride >= (heads - 1) * head_stride + head_dim (" +
         str(token_major_span) + ") with head_stride >= head_dim, or head_stride >= (tokens - 1) " +
         "* token_stride + head_dim (" + str(head_major_span) + ") with token_stride >= head_dim");
  }
  if (v.data == nullptr && v.tokens > 0) fail("data is null");
}

}  // namespace detail

namespace {

void check_view(const TensorView& v, std::string_view name, std::int64_t tokens,
                const RopeSpec& spec) {
  detail::check_rope_view(v, name, tokens, spec, "apply_rope");
}

void check_out(const TensorView& in, const TensorView& out, const std::string& name) {
  if (out.tokens != in.tokens || out.heads != in.heads || out.head_dim != in.head_dim ||
      out.dtype != in.dtype) {
    throw Error("apply_rope: " + name + " must have the input's shape and dtype ([" +
                str(in.tokens) + ", " + str(in.heads) + ", " + str(in.head_dim) + "] " +
                std::string(dtype_name(in.dtype)) + "), got [" + str(out.tokens) + ", " +
                str(out.heads) + ", " + str(out.head_dim) + "] " +
                std::string(dtype_name(out.dtype)));
  }
}

// body(begin, end) over [0, tasks) on up to `threads` threads: the pool runs one chunk per
// participant, and never more participants than tasks. Returns the threads used.
template <class Body>
int run_chunks(std::int64_t tasks, int threads, const Body& body) {
  const int used = static_cast<int>(std::clamp<std::int64_t>(tasks, 1, threads));
  if (used == 1) {
    body(0, tasks);
  } else {
    detail::ThreadPool::shared(used).run(used, tasks, body);
  }
  return used;
}

// Rotates every pass over all tokens with rows from `row` (table_rows, where given: the same rows,
// a block of tokens at a time), on up to `threads` threads.
int run(const RopeSpec& spec, std::span<const Pass> passes, std::int64_t tokens,
        Direction direction, int threads, const RowFn& row, const detail::RowBlockFn& row_block,
        const detail::CosSinRows* table_rows, std::string_view who) {
  detail::ensure_simd_target_from_env();
  const std::int64_t n = spec.rotary_dim / 2;
  std::int64_t heads = 0;
  for (const Pass& p : passes) heads += p.in->heads;
  // Few tokens: split the heads of each token too, so a short prefill still uses every thread.
  const std::int64_t elements = tokens * heads * spec.rotary_dim;
  check_threads(threads, who);
  threads = run_threads(threads);
  if (elements < kMinParallelElements) threads = 1;
  const std::int64_t splits = tokens >= 2 * threads ? 1 : threads;
  const std::int64_t tasks = tokens * splits;
  const float sign = direction == Direction::kInverse ? -1.0f : 1.0f;
  std::int64_t bytes = 0;
  // How the passes read their rows (software_prefetch.h): whole and token-major (every line of
  // each token's heads in order, the case measured) or not; f32 or 16-bit.
  bool partial = false, half = false;
  const auto packed = [](const TensorView& v) {
    return v.head_stride == v.head_dim && v.token_stride == v.heads * v.head_dim;
  };
  for (const Pass& p : passes) {
    bytes +=
        tokens * p.in->heads * p.in->head_dim * static_cast<std::int64_t>(dtype_size(p.in->dtype));
    // In place, the dims outside the rotated range are skipped; out of place they are copied.
    partial |= !packed(*p.in) || !packed(*p.out) ||
               (detail::same_memory(*p.in, *p.out) && spec.rotary_dim < p.in->head_dim);
    half |= p.in->dtype != DType::kF32;
  }
  const bool prefetch = detail::software_prefetch(
      bytes,
      partial ? detail::RowAccess::kPartial
              : (half ? detail::RowAccess::kWholeHalf : detail::RowAccess::kWhole),
      spec.head_dim, static_cast<int>(std::min<std::int64_t>(tasks, threads)));

  // Whole tokens (no splits) of passes whose heads can go in one call: blocks of kBlockTokens
  // tokens, their rows made first, then one kernel call per pass and block (rotate.h's
  // TokenBlock). A pass out of place with another head stride goes head by head below.
  bool blocks = splits == 1;
  for (const Pass& p : passes) {
    if (!detail::same_memory(*p.in, *p.out) && p.out->head_stride != p.in->head_stride)
      blocks = false;
  }
  if (blocks) {
    auto block_body = [&](std::int64_t begin, std::int64_t end) {
      // Blocks of kPointerBlockTokens tokens where the rows are read where they lie (forward: a
      // table's rows, one axis, where all of the block's positions are inside it; on the fly,
      // runs of rows made ahead, RowRuns, where this chunk of tokens holds more than one block of
      // 16), else of kBlockTokens whose rows are made into the scratch first (16 slots of n
      // pairs, c and s; s negated in place for the inverse). A chunk of one block, a decode
      // step's call, has nothing to run ahead of. Rows made 16 at a time stay in L1 until read
      // (blocks of 32 of them gained nothing, kernel-log.md, "Session 29"); pointers take no room,
      // and a longer block saves the block's set-up and the kernel's call: [4096, 8, 128] with a
      // table, 16 -> 64 tokens, f16 0.67 -> 0.71-0.72, bf16 0.63 -> 0.65-0.66 of the stream (Zen
      // 5, kernel-log.md, "Session 35").
      constexpr std::int64_t kBlockTokens = 16;
      constexpr std::int64_t kPointerBlockTokens = 64;
      const std::int64_t slot_floats = 2 * n;
      const bool ahead = row_block && end - begin > kBlockTokens;
      const bool pointers =
          sign > 0 && (ahead || (!row_block && table_rows && table_rows->reads_table_rows()));
      const std::int64_t block_tokens = pointers ? kPointerBlockTokens : kBlockTokens;
      detail::RowScratch scratch(
          ahead ? 0 : static_cast<std::size_t>(std::min(kBlockTokens, end - begin) * slot_floats));
      std::optional<detail::RowRuns> runs;
      if (ahead) runs.emplace(row_block, n, begin, end, block_tokens);
      float* const buffer = scratch.data();
      const float* cs[kPointerBlockTokens];
      const float* ss[kPointerBlockTokens];
      // Tokens [t0, t0 + count) with the rows in cs and ss, one kernel call per pass.
      auto rotate = [&](std::int64_t t0, std::int64_t count) {
        for (const Pass& p : passes) {
          const detail::TokenBlock b{
              .heads = detail::token_heads(*p.in, *p.out, spec, n, t0, 0, p.in->heads, nullptr,
                                           nullptr, prefetch),
              .tokens = count,
              .in_token_stride = p.in->token_stride,
              .out_token_stride = p.out->token_stride,
              .c = cs,
              .s = ss,
          };
          detail::rotate_token_block(b);
        }
      };
      for (std::int64_t t0 = begin; t0 < end; t0 += block_tokens) {
        const std::int64_t count = std::min(block_tokens, end - t0);
        // The block's rows' pointers in one call, not one call through `row` per token: 7 ns a
        // token, 14% of [4096, 8, 128] f16's time with a table (Zen 5, kernel-log.md, "Session
        // 34"; runs made ahead since session 35).
        bool read = false;
        if (pointers && ahead) {
          runs->rows(t0, count, cs, ss);
          read = true;
        } else if (pointers) {
          read = table_rows->table_rows(t0, count, cs, ss);
        }
        if (read) {
          rotate(t0, count);
          continue;
        }
        // Rows made token by token (a table's block with a position outside it, multi-axis
        // gathers, other numerics, the inverse), 16 at a time.
        for (std::int64_t u0 = t0; u0 < t0 + count; u0 += kBlockTokens) {
          const std::int64_t m = std::min(kBlockTokens, t0 + count - u0);
          if (row_block && !ahead) row_block(u0, m, buffer, buffer + n, slot_floats);
          for (std::int64_t k = 0; k < m; ++k) {
            // Ahead, the scratch holds no slots: the row's pointers come from the run.
            const auto [c, s] = ahead ? runs->row(u0 + k)
                                      : std::pair<float*, float*>{buffer + k * slot_floats,
                                                                  buffer + k * slot_floats + n};
            const detail::Row made = row_block ? detail::Row{c, s} : row(u0 + k, c, s);
            const auto [rc, rs] = detail::kernel_row(sign, n, made, s);
            cs[k] = rc;
            ss[k] = rs;
          }
          rotate(u0, m);
        }
      }
    };
    return run_chunks(tokens, threads, block_body);
  }

  auto body = [&](std::int64_t begin, std::int64_t end) {
    // c, s (n each).
    detail::RowScratch scratch(static_cast<std::size_t>(2 * n));
    float* const c = scratch.data();
    float* const s = c + n;
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t t = task / splits, part = task % splits;
      const auto [rc, rs] = detail::kernel_row(sign, n, row(t, c, s), s);
      for (const Pass& p : passes) {
        const std::int64_t h0 = p.in->heads * part / splits, h1 = p.in->heads * (part + 1) / splits;
        if (h0 == h1) continue;
        const auto es = static_cast<std::int64_t>(dtype_size(p.in->dtype));
        const detail::TokenHeads th =
            detail::token_heads(*p.in, *p.out, spec, n, t, h0, h1, rc, rs, prefetch);
        if (th.copy_rest && p.out->head_stride != p.in->head_stride) {
          // Different head strides: one head at a time.
          for (std::int64_t h = 0; h < th.heads; ++h) {
            detail::TokenHeads one = th;
            one.heads = 1;
            one.in = static_cast<const char*>(th.in) + h * p.in->head_stride * es;
            one.out = static_cast<char*>(th.out) + h * p.out->head_stride * es;
            detail::rotate_token_heads(one);
          }
        } else {
          detail::rotate_token_heads(th);
        }
      }
    }
  };
  return run_chunks(tasks, threads, body);
}

}  // namespace

namespace detail {

std::int64_t rope_token_count(const RopeSpec& spec, const Positions& positions,
                              std::int64_t view_tokens, std::string_view who,
                              std::string_view view) {
  const std::int64_t axes = axis_count(spec);
  const std::int64_t count = position_count(positions);
  if (axes == 1) return count;
  if (axes < 1 || axes > kMaxAxes) {
    throw Error(std::string(who) + ": the spec's axis map reads " + str(axes) + " axes; at most " +
                str(kMaxAxes) + " are supported");
  }
  if (count != axes * view_tokens) {
    std::string got = str(count) + " positions";
    if (view_tokens > 0 && count % view_tokens == 0) {
      got += " = [" + str(count / view_tokens) + ", " + str(view_tokens) + "] (" +
             str(count / view_tokens) + " axes)";
    }
    throw Error(std::string(who) + ": positions must be [axes, tokens] = [" + str(axes) + ", " +
                str(view_tokens) + "] (" + str(axes * view_tokens) + " entries, axis-major) for " +
                "the spec's " + str(axes) + "-axis map (" +
                std::string(axis_rule_name(spec.axis_map.rule)) + ") and " + std::string(view) +
                "'s " + str(view_tokens) + " tokens; got " + got);
  }
  return view_tokens;
}

}  // namespace detail

namespace {

std::int64_t token_count(const RopeSpec& spec, const Positions& positions, std::int64_t view_tokens,
                         std::string_view who, std::string_view view) {
  return detail::rope_token_count(spec, positions, view_tokens, who, view);
}

}  // namespace

namespace detail {

void check_rope_table(const Frequencies& freqs, const CosSinTable* table, std::string_view who) {
  if (!table) return;
  const Frequencies& built = table->frequencies();
  // The same bits, not the same values: rows are bits of these, and -0.0 == 0.0 would pass an
  // inv_freq whose sines differ in sign. memcmp, not vector ==: a decode step's call spent about
  // 30 ns (a quarter of a one-head call) comparing 64 doubles one branch at a time.
  const auto same_bits = [](double a, double b) {
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
  };
  const bool same =
      &built == &freqs ||
      (table->pairs() == freqs.pair_count() && built.inv_freq.size() == freqs.inv_freq.size() &&
       std::memcmp(built.inv_freq.data(), freqs.inv_freq.data(),
                   freqs.inv_freq.size() * sizeof(double)) == 0 &&
       same_bits(built.attention_factor, freqs.attention_factor) &&
       built.numerics == freqs.numerics);
  if (!same) {
    throw Error(std::string(who) + ": table was built from other frequencies than the ones given");
  }
}

}  // namespace detail

int apply_rope(const Frequencies& freqs, const RopeArgs& args) {
  const RopeSpec& spec = freqs.spec;
  const std::int64_t tokens = token_count(spec, args.positions, args.q.tokens, "apply_rope", "q");
  check_view(args.q, "q", tokens, spec);
  // q, and k when given: no vector (a decode step's call is short enough for its allocation
  // to count).
  std::array<Pass, 2> passes;
  std::size_t pass_count = 0;
  const TensorView* q_out = &args.q;
  if (args.q_out) {
    check_out(args.q, *args.q_out, "q_out");
    check_view(*args.q_out, "q_out", tokens, spec);
    q_out = &*args.q_out;
  }
  passes[pass_count++] = {&args.q, q_out};
  if (args.k) {
    check_view(*args.k, "k", tokens, spec);
    const TensorView* k_out = &*args.k;
    if (args.k_out) {
      check_out(*args.k, *args.k_out, "k_out");
      check_view(*args.k_out, "k_out", tokens, spec);
      k_out = &*args.k_out;
    }
    passes[pass_count++] = {&*args.k, k_out};
  } else if (args.k_out) {
    throw Error("apply_rope: k_out is set but k is not");
  }
  detail::check_rope_table(freqs, args.table, "apply_rope");
  const detail::CosSinRows rows(freqs, args.positions, tokens, args.table);
  const RowFn row = std::cref(rows);
  const detail::CosSinRowBlocks blocks(freqs, args.positions, tokens, args.table);
  return run(spec, std::span<const Pass>(passes.data(), pass_count), tokens, args.direction,
             args.threads, row, blocks.fn(), &rows, "apply_rope");
}

void rerotate_keys(const Frequencies& from, const Frequencies& to, const TensorView& k,
                   const Positions& positions, int threads) {
  const RopeSpec& a = from.spec;
  const RopeSpec& b = to.spec;
  if (a.layout != b.layout || a.rotary_dim != b.rotary_dim || a.rotary_offset != b.rotary_offset ||
      a.head_dim != b.head_dim || from.pair_count() != to.pair_count() ||
      a.axis_map != b.axis_map) {
    throw Error(
        "rerotate_keys: the two frequencies must share layout, head_dim, rotary_dim and "
        "rotary_offset and the axis map (" +
        std::string(layout_name(a.layout)) + " " + str(a.head_dim) + "/" + str(a.rotary_dim) + "+" +
        str(a.rotary_offset) + " vs " + std::string(layout_name(b.layout)) + " " + str(b.head_dim) +
        "/" + str(b.rotary_dim) + "+" + str(b.rotary_offset) + ", axis maps " +
        std::string(axis_rule_name(a.axis_map.rule)) + " vs " +
        std::string(axis_rule_name(b.axis_map.rule)) + ")");
  }
  const std::int64_t tokens = token_count(a, positions, k.tokens, "rerotate_keys", "k");
  detail::check_rope_view(k, "k", tokens, a, "rerotate_keys");
  const std::int64_t axes = axis_count(a);
  const auto n = static_cast<std::size_t>(from.pair_count());
  RowFn row;
  detail::RowBlockFn row_block;
  Frequencies delta;  // outlives `row` and `row_block`, which read it
  std::optional<detail::CosSinRows> delta_rows;
  std::optional<detail::CosSinRowBlocks> delta_blocks;
  if (from.numerics == Numerics::kPrecise && to.numerics == Numerics::kPrecise) {
    // kPrecise rows are af cos(p w) and af sin(p w) with the angle exact, so the composite is
    // (af_to / af_from) times the rotation by p (w_to - w_from): the rows of frequencies
    // w_to - w_from with attention factor af_to / af_from, made as apply_rope makes its
    // on-the-fly rows (a CosSinStepper per thread: anchors and stepped rows proven equal to
    // the exact ones), instead of two exact sincos per pair and position. A pair whose frequency
    // did not change (dynamic NTK keeps pair 0) steps by exactly (1, 0). w_to - w_from is
    // rounded once to double (relative error 2^-53 of the angle difference), far below the
    // float32 rounding of the result; rerotate_test.cc bounds the re-rotated keys against keys
    // rotated directly.
    delta = to;
    for (std::size_t i = 0; i < n; ++i) delta.inv_freq[i] = to.inv_freq[i] - from.inv_freq[i];
    delta.attention_factor = to.attention_factor / from.attention_factor;
    delta_rows.emplace(delta, positions, tokens, nullptr);
    row = std::cref(*delta_rows);
    delta_blocks.emplace(delta, positions, tokens, nullptr);
    row_block = delta_blocks->fn();
  } else {
    // The engines' float32 rows: R(new) R(old)^T of the two rows as they are. With attention
    // factors folded into both, (c_n c_o + s_n s_o) / af_o^2 = (af_n / af_o) cos(new - old),
    // likewise for sin. Rows on the stack for the head dims models have.
    const double old_af2 = from.attention_factor * from.attention_factor;
    constexpr std::size_t kStackPairs = 256;
    row = [&, old_af2](std::int64_t t, float* c, float* s) {
      double stack[4 * kStackPairs];
      std::vector<double> heap(n > kStackPairs ? 4 * n : 0);
      double* rows = n > kStackPairs ? heap.data() : stack;
      const std::span<double> co(rows, n), so(rows + n, n), cn(rows + 2 * n, n),
          sn(rows + 3 * n, n);
      std::int64_t ap[kMaxAxes];
      detail::axis_positions(positions, axes, tokens, t, ap);
      const std::span<const std::int64_t> p(ap, static_cast<std::size_t>(axes));
      cos_sin_at(from, p, co, so);
      cos_sin_at(to, p, cn, sn);
      for (std::size_t i = 0; i < n; ++i) {
        c[i] = static_cast<float>((cn[i] * co[i] + sn[i] * so[i]) / old_af2);
        s[i] = static_cast<float>((sn[i] * co[i] - cn[i] * so[i]) / old_af2);
      }
      return detail::Row{c, s};
    };
  }
  const Pass pass{&k, &k};
  run(a, std::span<const Pass>(&pass, 1), tokens, Direction::kForward, threads, row, row_block,
      nullptr, "rerotate_keys");
}

}  // namespace posenc
