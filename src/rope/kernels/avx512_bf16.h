// src/rope/kernels/avx512_bf16.h: the AVX-512 BF16 extension of the AVX3 target (internal).
//
// Highway 1.0.3 (Debian 12) has no target or op for AVX-512 BF16, whose VCVTNE2PS2BF16 rounds
// 32 floats to bf16 in one instruction; rounding in integer lanes (half-inl.h) costs about 6 ops
// per 16 lanes. This file adds that instruction where it is the rotation's bottleneck: bf16
// rows that stay in registers (the pair counts below), and the benchmarks' in-place stream in
// bf16 (its roofline).
//
// Bits: VCVTNE2PS2BF16 rounds to nearest even and quiets NaNs exactly as half.h's
// bf16_from_f32 does, for every float32 input except subnormals, which it flushes to zero
// (checked against the software rounding on all 2^32 inputs on a Sapphire-Rapids-class Xeon;
// tests compare the AVX3_BF16 target with the others bit for bit). A vector holding a subnormal
// result therefore takes the software rounding; rotation results are almost never subnormal, and
// such a vector is found by a zero word in the converted output (a normal float never rounds to
// a bf16 zero), one VPTESTNMW per 32 results.
//
// The bf16 values are loaded in even/odd form (one 512-bit load of 32 elements: the even ones
// are the low halves shifted up, the odd ones the high halves masked, no widening shuffle), the
// cos/sin row is deinterleaved to match once per token, and the rounded results are put back in
// order by one VPERMW.
//
// It is listed and forced like a Highway target, as "AVX3_BF16" (targets.h): the default where
// the CPU has AVX-512 BF16; forcing "AVX3" runs the AVX3 code without it, so both are tested.
// The same target also turns on AVX-512 VBMI's byte permutes where the CPU has them
// (avx512_vbmi_enabled): bf16 and f16 rounded to fp8 E4M3 64 values at a time in byte lanes
// (fp8-inl.h).
#pragma once

#include <cstdint>

#include "rope/kernels/rotate.h"

namespace posenc::detail {

// Whether this build has the extension (x86-64, GCC or clang) and the CPU supports AVX-512 BF16
// (with AVX-512 F, BW, VL, DQ).
bool avx512_bf16_supported();

// Whether the kernels use it now: supported, and not switched off by forcing another target.
bool avx512_bf16_enabled();
void set_avx512_bf16_enabled(bool on);  // targets.cc; on only where supported

// Whether the fp8 stores use AVX-512 VBMI (fp8-inl.h's Bf16RowsToFp8Vbmi and F16RowsToFp8Vbmi):
// avx512_bf16_enabled() and the CPU has VBMI: Zen 4 and later, Sapphire Rapids and later. Not
// Cooper Lake (BF16 without VBMI), nor Ice Lake to Rocket Lake (VBMI without BF16, so no
// AVX3_BF16 target: the byte lanes are tied to it so that forcing AVX3 tests the 16-bit ones).
bool avx512_vbmi_enabled();

// rotate_token_heads for a bf16 t, half-split with any multiple of 16 pairs up to 128 or
// interleaved with 16 to 96 or 128 pairs, when avx512_bf16_enabled(); returns false (nothing
// done) for anything else. Call it from the AVX3 target's code only.
bool rotate_bf16_heads_avx512_bf16(const TokenHeads& t);

// rotate_token_block for the same rows: the run of tokens in one call, not one per token (one
// call per token cost 14-23% of the time at 8 or 16 heads a token, avx512_bf16.cc).
bool rotate_bf16_block_avx512_bf16(const TokenBlock& b);

// x[i] <- bf16(x[i] * scale) in place for i in [0, count) (the bf16 pass of the benchmarks'
// stream roofline, bench/stream.cc), with or without the kernels' software prefetch, when
// avx512_bf16_enabled(); false (nothing done) otherwise.
bool scale_bf16_avx512_bf16(std::uint16_t* x, std::int64_t count, float scale, bool prefetch);

}  // namespace posenc::detail
