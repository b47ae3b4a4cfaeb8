#include "posenc/rope/tensor.h"

namespace posenc {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
  }
  return "?";
}

std::size_t dtype_size(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

}  // namespace posenc
