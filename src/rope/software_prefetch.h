// src/rope/software_prefetch.h: whether a call prefetches its tensors in software (internal).
//
// The kernels can prefetch the lines kPrefetchAhead bytes past each head (rotate.h's
// prefetch_ahead). Whether that helps depends on the machine:
//   - On a Sapphire-Rapids-class Xeon a standalone f32 rotation of 64 MiB in place ran at
//     0.67-0.83 of the in-place stream without it and 0.96-1.25 with it; on a Zen 5 guest (AMD
//     family 0x1A) apply_rope at Llama 2 7B's f32 prefill took 1.80-1.98 ms with it against
//     2.97-3.18 without (docs/kernel-log.md, sessions 13 and 15). The rotation reads a head's
//     lines out of order (a pair's two dims are n apart), which those cores' hardware
//     prefetchers follow late.
//   - On a Zen 4 guest (AMD family 0x19 with AVX-512) the same prefetch slowed whole f32 rows: the
//     plain f32 rotation of [4096, 8, 128] (16 MiB, in L3) ran at 0.84-0.87 of the stream without
//     software prefetch and at 0.49-0.76 with it (to L1 or L2, 1 to 8 KiB ahead), of
//     [4096, 32, 128] (64 MiB) at 0.97-1.01 against 0.79-0.85, and in apply_rope's f32 kernel a
//     quarter of the samples fell on the instruction after the prefetch. Without it there (three
//     rounds, binaries in turn, session 29): apply_rope f32 at Llama 2 7B's prefill 3.65 -> 2.90
//     ms, [4096, 8, 128] 396 -> 351 us, M-RoPE 3.32 -> 3.05 ms; the fused Llama 3 8B prefill f32
//     5.71 -> 5.11 ms, bf16 2.73 -> 2.23 ms. But 16-bit rows rotated in place lost 4-11%
//     (prefill-q f16 on the fly 1.40 -> 1.55 ms, [4096, 8, 128] bf16 302 -> 315 us, M-RoPE f16
//     1.50 -> 1.60 ms), heads of 256 dims lost (kHardwarePrefetchMaxDim, below), rows read in
//     part lost most (GPT-NeoX's in-place rows, 24 of 96 dims rotated and the lines between them
//     skipped, took twice as long), and calls on two threads
//     lost everywhere (two rounds: apply_rope f32 at Llama 2 7B's prefill 1.77 -> 2.01 ms,
//     [4096, 8, 128] f32 177 -> 228 us, the fused Llama 3 8B prefill bf16 1.48 -> 2.18 ms): with
//     both cores loading, the software prefetch is what keeps enough lines in flight.
// So a call prefetches when it moves at least kPrefetchMinBytes (a smaller tensor was usually
// just written and sits in L1 or L2; rotate.h), unless it runs on one thread of a Zen 4 and reads
// whole rows of the kind whose hardware prefetch served better there (RowAccess::kWhole, heads
// of at most kHardwarePrefetchMaxDim dims). POSENC_SOFTWARE_PREFETCH=on or off sets it for every
// call of at least kPrefetchMinBytes (for machines not measured here, and for measuring); auto,
// or unset, is the rule above (posenc/rope/targets.h's kSoftwarePrefetchSetting says it for help
// screens).
#pragma once

#include <cstdint>

namespace posenc::detail {

enum class SoftwarePrefetch { kAuto, kOn, kOff };

// POSENC_SOFTWARE_PREFETCH's value (null or empty: kAuto); anything but on, off or auto throws
// posenc::Error naming the variable, the value and the values it takes.
SoftwarePrefetch software_prefetch_from(const char* value);

// Whether this CPU is one whose hardware prefetchers made the software prefetch of whole rows a
// loss (above): an AMD of family 0x19 with AVX-512 (Zen 4; Zen 3, the same family, has none).
bool cpu_prefers_hardware_prefetch();

// How a call reads its rows, for the rule above.
enum class RowAccess {
  // apply_rope: rows read in part (an in-place pass of rotary_dim < head_dim) or not packed
  // token-major (heads or tokens with gaps, head-major views): prefetched as before, since
  // nothing else was measured.
  kPartial,
  // apply_rope: packed token-major rows of 16-bit elements, read whole (they lost 4-11% without
  // the prefetch on Zen 4).
  kWholeHalf,
  // apply_rope: packed token-major f32 rows, read whole; the fused append (k and v read whole
  // into the cache; it is kPartial where its q, in place, has rotary_dim < head_dim or q, k or v
  // have gaps between heads).
  kWhole,
};

// The largest head for which Zen 4's hardware prefetch served whole f32 rows better: at 64 and
// 128 dims the one-thread calls gained (above), at 256 they lost. Six processes each way of
// [2048, 8, 256] f32 with a table: 414-642 us (median 444) with the prefetch, 454-1196 (median
// 563) without; [4096, 16, 64] in the same processes 362-1018 (median 455) against 309-360 (332).
inline constexpr std::int64_t kHardwarePrefetchMaxDim = 128;

// The rule above, for a call moving `bytes` of its tensors, heads of `head_dim`, on `threads`
// threads.
bool software_prefetch(std::int64_t bytes, RowAccess access, std::int64_t head_dim, int threads,
                       SoftwarePrefetch mode, bool prefers_hardware);

// The same with POSENC_SOFTWARE_PREFETCH (read by the first call of at least kPrefetchMinBytes;
// a bad value throws on every such call, smaller ones never read it) and this CPU. `threads` is
// the call's: several one-thread calls running at once on different cores (where two threads
// needed the prefetch) still take the one-thread rule.
bool software_prefetch(std::int64_t bytes, RowAccess access, std::int64_t head_dim, int threads);

}  // namespace posenc::detail
