// posenc/rope/tensor.h: views of query/key tensors and position lists, as the kernels take them.
//
// A TensorView is [tokens, heads, head_dim] over memory the caller owns, with explicit strides
// in elements, and head_dim contiguous:
//
//   element (t, h, d) lives at  data + t * token_stride + h * head_stride + d
//
//   [batch, seq, heads, dim] contiguous:   tokens = batch * seq, token_stride = heads * dim,
//                                          head_stride = dim
//   packed QKV [tokens, (Hq + 2 Hkv) * dim]: q = {data, tokens, Hq, dim, (Hq + 2 Hkv) * dim, dim},
//                                          k = the same with data + Hq * dim and heads = Hkv
//   GQA keys: simply fewer heads than the queries.
// Nothing is copied: the kernels read and write through the strides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

namespace posenc {

// Storage types. The math is float32 for all of them.
enum class DType { kF32, kF16, kBF16 };

std::string_view dtype_name(DType dtype);  // "f32", "f16", "bf16"
std::size_t dtype_size(DType dtype);       // bytes per element

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t tokens = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t token_stride = 0;  // elements
  std::int64_t head_stride = 0;   // elements

  // A contiguous [tokens, heads, head_dim] tensor.
  static TensorView contiguous(void* data, DType dtype, std::int64_t tokens, std::int64_t heads,
                               std::int64_t head_dim) {
    return {data, dtype, tokens, heads, head_dim, heads * head_dim, head_dim};
  }
};

// One position per token, int32 or int64, any values in any order.
using Positions = std::variant<std::span<const std::int32_t>, std::span<const std::int64_t>>;

inline std::int64_t position_count(const Positions& p) {
  return std::visit([](auto s) { return static_cast<std::int64_t>(s.size()); }, p);
}
inline std::int64_t position_at(const Positions& p, std::int64_t t) {
  return std::visit(
      [t](auto s) { return static_cast<std::int64_t>(s[static_cast<std::size_t>(t)]); }, p);
}

}  // namespace posenc
