// tensor_args.h: torch tensors and numpy arrays as the kernels take them, without a copy.
//
// A torch.Tensor is read through its Python attributes (data_ptr, shape, stride, dtype, device),
// so the module links neither libtorch nor its C++ ABI; a numpy array through the buffer numpy
// exposes. Strides are converted to elements. Every mismatch raises TypeError (not an array, an
// unsupported dtype) or ValueError (device, shape, strides, read-only) naming the argument.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "posenc/rope/tensor.h"

namespace posenc::python {

namespace py = pybind11;

// Element types an argument can carry. kBF16 is a torch.bfloat16 tensor or a numpy uint16 array
// passed with dtype="bfloat16"; kU8 is a uint8 tensor or array, or a torch.float8_e4m3fn tensor
// where torch has that dtype (the bits of an fp8 KV cache).
enum class Elem { kF32, kF16, kBF16, kF64, kI32, kI64, kU16, kU8 };

struct ArrayArg {
  void* data = nullptr;
  Elem elem = Elem::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // elements
  bool is_torch = false;
  bool writable = true;

  std::int64_t numel() const;
};

bool is_torch_tensor(py::handle obj);
bool is_numpy_array(py::handle obj);

// Whether torch tensors are read by _posenc_torch (torch_reader.h) rather than through their
// Python attributes; `enable` switches it (the tests compare both paths).
bool torch_fast_reader(std::optional<bool> enable);

// Reads `obj` (a CPU torch.Tensor or a numpy.ndarray); `name` prefixes every message.
// `bf16_from_uint16`: a numpy uint16 array stands for bfloat16 (dtype="bfloat16").
ArrayArg array_arg(py::handle obj, const std::string& name, bool bf16_from_uint16 = false);

std::string elem_name(Elem elem);

// The kernels' dtype of a float32/float16/bfloat16 argument; TypeError for anything else.
DType kernel_dtype(const ArrayArg& a, const std::string& name);

// Positions as int64, read through the strides (they are small; the copy keeps int32 and
// int64, torch and numpy, any strides, on one path). Integers only: TypeError otherwise.
std::vector<std::int64_t> read_positions(const ArrayArg& a, const std::string& name);

}  // namespace posenc::python
