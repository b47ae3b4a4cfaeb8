// The fused RoPE + KV-cache kernel (kv_cache_kernel.h) for fp8 E4M3 caches, compiled once per
// SIMD target; its code is kv_cache-inl.h's (the scale there; the E4M3 rounding in fp8-inl.h). A translation unit
// of its own so that its instantiations (three input dtypes into fp8) compile beside the other
// caches' instead of after them.
// foreach_target.h re-includes this file once per target: the order of these lines is Highway's.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rope/kernels/kv_cache_fp8_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "rope/kernels/kv_cache-inl.h"
#include "rope/kernels/kv_cache_kernel.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {

void AppendTokenKvFp8(const TokenKv& t) { AppendTyped(Fp8Tag(), t); }

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::detail {

HWY_EXPORT(AppendTokenKvFp8);

void append_token_kv_fp8(const TokenKv& args) { HWY_DYNAMIC_DISPATCH(AppendTokenKvFp8)(args); }

}  // namespace posenc::detail
#endif  // HWY_ONCE
