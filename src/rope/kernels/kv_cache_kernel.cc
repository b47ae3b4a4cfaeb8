// The fused RoPE + KV-cache kernel (kv_cache_kernel.h) for f32, f16 and bf16 caches, compiled
// once per SIMD target like rotate.cc; its code is kv_cache-inl.h's, shared with the fp8 caches'
// kv_cache_fp8_kernel.cc, to which append_token_kv hands fp8 caches.
// foreach_target.h re-includes this file once per target: the order of these lines is Highway's.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rope/kernels/kv_cache_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "rope/kernels/kv_cache-inl.h"
#include "rope/kernels/kv_cache_kernel.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace posenc::detail {
namespace HWY_NAMESPACE {

void AppendTokenKv(const TokenKv& t) {
  switch (t.cache_dtype) {
    case CacheDType::kF32:
      return AppendTyped(F32Tag(), t);
    case CacheDType::kF16:
      return AppendTyped(F16Tag(), t);
    case CacheDType::kBF16:
      return AppendTyped(BF16Tag(), t);
    case CacheDType::kFp8E4M3:
      return;  // append_token_kv sends these to append_token_kv_fp8
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::detail {

HWY_EXPORT(AppendTokenKv);

void append_token_kv(const TokenKv& args) {
  if (args.cache_dtype == CacheDType::kFp8E4M3) return append_token_kv_fp8(args);
  HWY_DYNAMIC_DISPATCH(AppendTokenKv)(args);
}

}  // namespace posenc::detail
#endif  // HWY_ONCE
