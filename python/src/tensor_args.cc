// Reading torch tensors and numpy arrays through their Python attributes (tensor_args.h).
#include "tensor_args.h"

#include "torch_reader.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

namespace posenc::python {
namespace {

// torch's dtype objects and Tensor type, looked up once torch is imported. Kept alive for the
// life of the process (handles, not objects, so nothing is released after the interpreter).
struct TorchTypes {
  py::handle tensor, strided, f32, f16, bf16, f64, i32, i64, u8;
  py::handle fp8;  // torch.float8_e4m3fn (torch 2.1 and later), else None
};

TorchReader torch_reader = nullptr;  // _posenc_torch's, when it was built and imports
bool torch_reader_enabled = true;

// The fast reader from _posenc_torch, if that module exists (built with libtorch-dev).
void load_torch_reader() {
  try {
    py::object capsule = py::module_::import("posenc._posenc_torch").attr("reader")();
    torch_reader =
        reinterpret_cast<TorchReader>(PyCapsule_GetPointer(capsule.ptr(), kTorchReaderCapsule));
    if (!torch_reader) PyErr_Clear();
  } catch (const py::error_already_set&) {
    torch_reader = nullptr;  // not built here: the attribute path serves
  }
}

const TorchTypes* torch_types() {
  static const TorchTypes* types = nullptr;
  if (types) return types;
  py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch")) return nullptr;  // not imported: nothing can be a tensor
  py::module_ torch = modules["torch"];
  auto keep = [&](const char* name) { return py::object(torch.attr(name)).release(); };
  types = new TorchTypes{
      keep("Tensor"),   keep("strided"),
      keep("float32"),  keep("float16"),
      keep("bfloat16"), keep("float64"),
      keep("int32"),    keep("int64"),
      keep("uint8"),    py::object(py::getattr(torch, "float8_e4m3fn", py::none())).release()};
  load_torch_reader();
  return types;
}

constexpr Elem kTorchReaderElems[] = {Elem::kF32, Elem::kF16, Elem::kBF16,
                                      Elem::kF64, Elem::kI32, Elem::kI64};

// The fast path: true when the reader filled `a` (a CPU strided tensor of a dtype posenc knows).
bool read_fast(py::handle t, ArrayArg& a) {
  if (!torch_reader || !torch_reader_enabled) return false;
  TorchFields f;
  if (!torch_reader(t.ptr(), &f) || !f.cpu_strided || f.dtype < 0 || f.ndim > kTorchReaderMaxDims) {
    return false;
  }
  a.is_torch = true;
  a.elem = kTorchReaderElems[f.dtype];
  a.shape.assign(f.shape, f.shape + f.ndim);
  a.strides.assign(f.strides, f.strides + f.ndim);
  a.data = f.data;
  return true;
}

// Attribute names interned once: pybind11's attr("name") builds and hashes a new string per
// lookup, which costs more than the rotation of a decode token.
struct Names {
  PyObject *is_cpu, *layout, *dtype, *shape, *stride, *data_ptr;
};

const Names& names() {
  static const Names n{
      PyUnicode_InternFromString("is_cpu"), PyUnicode_InternFromString("layout"),
      PyUnicode_InternFromString("dtype"),  PyUnicode_InternFromString("shape"),
      PyUnicode_InternFromString("stride"), PyUnicode_InternFromString("data_ptr")};
  return n;
}

py::object get(py::handle obj, PyObject* name) {
  PyObject* r = PyObject_GetAttr(obj.ptr(), name);
  if (!r) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

py::object call(py::handle obj, PyObject* name) {
  PyObject* r = PyObject_CallMethodNoArgs(obj.ptr(), name);
  if (!r) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

[[noreturn]] void type_error(const std::string& msg) { throw py::type_error(msg); }
[[noreturn]] void value_error(const std::string& msg) { throw py::value_error(msg); }

std::string type_name(py::handle obj) {
  return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>();
}

// torch.Size and stride() are tuples of ints; read through the C API (the generic list caster
// costs microseconds per call, which a decode step notices).
std::vector<std::int64_t> int_tuple(const py::object& obj) {
  if (!PyTuple_Check(obj.ptr())) return obj.cast<std::vector<std::int64_t>>();
  const Py_ssize_t n = PyTuple_GET_SIZE(obj.ptr());
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[static_cast<std::size_t>(i)] = PyLong_AsLongLong(PyTuple_GET_ITEM(obj.ptr(), i));
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  return out;
}

ArrayArg torch_arg(py::handle t, const std::string& name) {
  const TorchTypes& tt = *torch_types();
  ArrayArg a;
  if (read_fast(t, a)) return a;
  a.is_torch = true;
  const Names& nm = names();
  if (get(t, nm.is_cpu).ptr() != Py_True) {
    const std::string device = py::str(t.attr("device").attr("type")).cast<std::string>();
    value_error(name + ": a " + device +
                " tensor; posenc runs on CPU tensors (move it with .cpu() first)");
  }
  if (get(t, nm.layout).ptr() != tt.strided.ptr()) {
    value_error(name + ": layout " + py::str(t.attr("layout")).cast<std::string>() +
                "; expected a strided (dense) tensor");
  }
  const py::object dt_obj = get(t, nm.dtype);
  PyObject* dt = dt_obj.ptr();
  if (dt == tt.f32.ptr()) {
    a.elem = Elem::kF32;
  } else if (dt == tt.f16.ptr()) {
    a.elem = Elem::kF16;
  } else if (dt == tt.bf16.ptr()) {
    a.elem = Elem::kBF16;
  } else if (dt == tt.f64.ptr()) {
    a.elem = Elem::kF64;
  } else if (dt == tt.i32.ptr()) {
    a.elem = Elem::kI32;
  } else if (dt == tt.i64.ptr()) {
    a.elem = Elem::kI64;
  } else if (dt == tt.u8.ptr() || (!tt.fp8.is_none() && dt == tt.fp8.ptr())) {
    a.elem = Elem::kU8;
  } else {
    type_error(name + ": dtype " + py::str(dt_obj).cast<std::string>() +
               " is not supported; expected torch.float32, torch.float16 or torch.bfloat16 "
               "(int32 or int64 for positions, uint8 for an fp8 cache's bits)");
  }
  a.shape = int_tuple(get(t, nm.shape));
  a.strides = int_tuple(call(t, nm.stride));
  a.data = PyLong_AsVoidPtr(call(t, nm.data_ptr).ptr());
  if (PyErr_Occurred()) throw py::error_already_set();
  return a;
}

ArrayArg numpy_arg(py::handle obj, const std::string& name, bool bf16_from_uint16) {
  auto arr = py::reinterpret_borrow<py::array>(obj);
  ArrayArg a;
  const py::dtype dt = arr.dtype();
  const char kind = dt.kind();
  const auto size = static_cast<std::int64_t>(dt.itemsize());
  if (kind == 'f' && size == 4) {
    a.elem = Elem::kF32;
  } else if (kind == 'f' && size == 2) {
    a.elem = Elem::kF16;
  } else if (kind == 'f' && size == 8) {
    a.elem = Elem::kF64;
  } else if (kind == 'u' && size == 2) {
    a.elem = bf16_from_uint16 ? Elem::kBF16 : Elem::kU16;
  } else if (kind == 'i' && size == 4) {
    a.elem = Elem::kI32;
  } else if (kind == 'i' && size == 8) {
    a.elem = Elem::kI64;
  } else if (kind == 'u' && size == 1) {
    a.elem = Elem::kU8;
  } else {
    type_error(name + ": numpy dtype " + py::str(obj.attr("dtype")).cast<std::string>() +
               " is not supported; expected float32, float16, or uint16 with "
               "dtype=\"bfloat16\" (int32 or int64 for positions, uint8 for an fp8 cache's bits)");
  }
  if (dt.byteorder() == '>') value_error(name + ": a big-endian array; expected native byte order");
  a.writable = arr.writeable();
  a.data = const_cast<void*>(arr.data());
  for (py::ssize_t d = 0; d < arr.ndim(); ++d) {
    a.shape.push_back(arr.shape(d));
    const auto bytes = static_cast<std::int64_t>(arr.strides(d));
    if (bytes % size != 0) {
      value_error(name + ": stride " + std::to_string(bytes) + " bytes in dim " +
                  std::to_string(d) + " is not a multiple of the element size (" +
                  std::to_string(size) + ")");
    }
    a.strides.push_back(bytes / size);
  }
  return a;
}

}  // namespace

std::int64_t ArrayArg::numel() const {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

bool is_torch_tensor(py::handle obj) {
  const TorchTypes* tt = torch_types();
  return tt && py::isinstance(obj, tt->tensor);
}

bool torch_fast_reader(std::optional<bool> enable) {
  torch_types();
  if (enable) torch_reader_enabled = *enable;
  return torch_reader != nullptr && torch_reader_enabled;
}

bool is_numpy_array(py::handle obj) { return py::isinstance<py::array>(obj); }

ArrayArg array_arg(py::handle obj, const std::string& name, bool bf16_from_uint16) {
  if (is_torch_tensor(obj)) return torch_arg(obj, name);
  if (is_numpy_array(obj)) return numpy_arg(obj, name, bf16_from_uint16);
  type_error(name + ": expected a torch.Tensor or a numpy.ndarray, got " + type_name(obj));
}

std::string elem_name(Elem elem) {
  switch (elem) {
    case Elem::kF32:
      return "float32";
    case Elem::kF16:
      return "float16";
    case Elem::kBF16:
      return "bfloat16";
    case Elem::kF64:
      return "float64";
    case Elem::kI32:
      return "int32";
    case Elem::kI64:
      return "int64";
    case Elem::kU16:
      return "uint16";
    case Elem::kU8:
      return "uint8";
  }
  return "?";
}

DType kernel_dtype(const ArrayArg& a, const std::string& name) {
  switch (a.elem) {
    case Elem::kF32:
      return DType::kF32;
    case Elem::kF16:
      return DType::kF16;
    case Elem::kBF16:
      return DType::kBF16;
    case Elem::kU16:
      type_error(name + ": a uint16 array; pass dtype=\"bfloat16\" if it holds bfloat16 bits");
    default:
      type_error(name + ": dtype " + elem_name(a.elem) +
                 " is not supported; expected float32, float16 or bfloat16");
  }
}

std::vector<std::int64_t> read_positions(const ArrayArg& a, const std::string& name) {
  if (a.elem != Elem::kI32 && a.elem != Elem::kI64) {
    type_error(name + ": dtype " + elem_name(a.elem) +
               " is not supported; expected int32 or int64");
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(a.numel()));
  if (out.empty()) return out;
  // Row-major walk through any strides (positions have at most a few dims).
  std::vector<std::int64_t> index(a.shape.size(), 0);
  for (std::size_t k = 0; k < out.size(); ++k) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < index.size(); ++d) offset += index[d] * a.strides[d];
    out[k] = a.elem == Elem::kI32 ? static_cast<const std::int32_t*>(a.data)[offset]
                                  : static_cast<const std::int64_t*>(a.data)[offset];
    for (std::size_t d = index.size(); d-- > 0;) {
      if (++index[d] < a.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace posenc::python
