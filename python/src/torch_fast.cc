// _posenc_torch: the at::Tensor fields of a torch.Tensor without Python calls (torch_reader.h).
#include <torch/csrc/autograd/python_variable.h>

#include "torch_reader.h"

namespace {

using posenc::python::TorchFields;

int dtype_code(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return 0;
    case c10::ScalarType::Half:
      return 1;
    case c10::ScalarType::BFloat16:
      return 2;
    case c10::ScalarType::Double:
      return 3;
    case c10::ScalarType::Int:
      return 4;
    case c10::ScalarType::Long:
      return 5;
    default:
      return -1;
  }
}

bool read(PyObject* obj, TorchFields* out) {
  if (!THPVariable_Check(obj)) return false;
  const at::Tensor& t = THPVariable_Unpack(obj);
  out->cpu_strided = t.defined() && t.is_cpu() && t.layout() == c10::kStrided;
  if (!out->cpu_strided) return true;  // the attribute path words the error
  out->dtype = dtype_code(t.scalar_type());
  out->ndim = static_cast<int>(t.dim());
  if (out->ndim > posenc::python::kTorchReaderMaxDims) return true;
  for (int d = 0; d < out->ndim; ++d) {
    out->shape[d] = t.sizes()[d];
    out->strides[d] = t.strides()[d];
  }
  out->data = t.data_ptr();
  return true;
}

PyObject* reader(PyObject*, PyObject*) {
  return PyCapsule_New(reinterpret_cast<void*>(&read), posenc::python::kTorchReaderCapsule,
                       nullptr);
}

PyMethodDef methods[] = {
    {"reader", reader, METH_NOARGS, "The fast torch tensor reader, as a capsule for _posenc."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_posenc_torch",
                      "torch tensors' fields for posenc without Python calls", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__posenc_torch() { return PyModule_Create(&module); }
