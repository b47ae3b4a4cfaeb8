// torch_reader.h: the optional fast path for torch tensors' fields.
//
// Reading a tensor through its Python attributes costs about 1.5 us (six attribute calls, two of
// them through torch's argument parser), which a decode step of three tensors notices. When
// libtorch's headers are installed (Debian's libtorch-dev), the build adds a second module,
// _posenc_torch, that reads the same fields from the at::Tensor inside the Python object; it is
// handed to _posenc as a function pointer in a capsule the first time a torch tensor is seen.
// Anything it does not handle (another device, layout or dtype, more dims) goes the attribute
// way, which also words the errors.
#pragma once

#include <Python.h>

#include <cstdint>

namespace posenc::python {

inline constexpr int kTorchReaderMaxDims = 8;
inline constexpr const char* kTorchReaderCapsule = "posenc._posenc_torch.reader";

// dtype codes: 0 float32, 1 float16, 2 bfloat16, 3 float64, 4 int32, 5 int64; -1 anything else.
struct TorchFields {
  void* data = nullptr;
  int dtype = -1;
  int ndim = 0;
  bool cpu_strided = false;  // a CPU tensor with the strided layout
  std::int64_t shape[kTorchReaderMaxDims] = {};
  std::int64_t strides[kTorchReaderMaxDims] = {};
};

// Fills `out` from a torch.Tensor; false when `obj` is not one.
using TorchReader = bool (*)(PyObject* obj, TorchFields* out);

}  // namespace posenc::python
