// The _posenc extension module: the C++ library behind the `posenc` Python package.
// posenc::Error (bad input: a field, its value, what was expected) becomes ValueError.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "posenc/core/error.h"
#include "posenc/version.h"

PYBIND11_MODULE(_posenc, m) {
  namespace py = pybind11;
  m.doc() = "posenc: transformer positional encodings (RoPE and its context extensions)";
  m.attr("__version__") = POSENC_VERSION_STRING;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const posenc::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  posenc::python::bind_spec(m);
  posenc::python::bind_rope(m);
  posenc::python::bind_kv_cache(m);
  posenc::python::bind_llama(m);
  posenc::python::bind_attention(m);
}
