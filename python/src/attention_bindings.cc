// posenc::llama's fused causal attention for Python (posenc.llama's attention="fused"): the
// forward pass and its backward, on torch tensors or numpy arrays the caller allocates (outputs
// included), so the module links no libtorch. Every argument is checked here, with errors that
// name it; the kernels run without the GIL.
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.h"
#include "posenc/llama/attention.h"
#include "tensor_args.h"

namespace posenc::python {
namespace {

std::string dims_text(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// An argument of the attention: float32 or float64 (the same as q's), CPU, `dims` dims.
struct Checked {
  ArrayArg a;
  std::string name;
};

Checked take(py::handle obj, const std::string& name, std::size_t dims, bool output,
             const Elem* same_as) {
  Checked c{array_arg(obj, name), name};
  if (c.a.elem != Elem::kF32 && c.a.elem != Elem::kF64) {
    throw py::type_error(name + ": dtype " + elem_name(c.a.elem) +
                         " is not supported; expected float32 or float64");
  }
  if (same_as && c.a.elem != *same_as) {
    throw py::type_error(name + ": dtype " + elem_name(c.a.elem) + ", but q is " +
                         elem_name(*same_as) + "; every tensor must have q's dtype");
  }
  if (c.a.shape.size() != dims) {
    throw py::value_error(name + ": expected " + std::to_string(dims) + " dims, got shape " +
                          dims_text(c.a.shape));
  }
  if (output && !c.a.writable) throw py::value_error(name + ": a read-only array");
  return c;
}

void expect_shape(const Checked& c, const std::vector<std::int64_t>& shape, const char* what) {
  if (c.a.shape != shape) {
    throw py::value_error(c.name + ": shape " + dims_text(c.a.shape) + ", expected " +
                          dims_text(shape) + " (" + what + ")");
  }
}

template <class T>
llama::HeadsView<T> heads(const Checked& c) {
  if (c.a.shape[3] > 1 && c.a.strides[3] != 1) {
    throw py::value_error(c.name + ": the head dim must be contiguous (stride 1), got stride " +
                          std::to_string(c.a.strides[3]) + "; pass .contiguous()");
  }
  return {static_cast<T*>(c.a.data), c.a.strides[0], c.a.strides[1], c.a.strides[2]};
}

template <class T>
T* dense(const Checked& c) {
  std::int64_t expect = 1;
  for (std::size_t d = c.a.shape.size(); d-- > 0;) {
    if (c.a.shape[d] > 1 && c.a.strides[d] != expect) {
      throw py::value_error(c.name + ": must be contiguous (strides " + dims_text(c.a.strides) +
                            " for shape " + dims_text(c.a.shape) + ")");
    }
    expect *= c.a.shape[d];
  }
  return static_cast<T*>(c.a.data);
}

// q [B, S, H, hd], k and v [B, S, KV, hd]: the shape, checked.
llama::AttentionShape shape_of(const Checked& q, const Checked& k, const Checked& v) {
  llama::AttentionShape s{q.a.shape[0], q.a.shape[1], q.a.shape[2], k.a.shape[2], q.a.shape[3]};
  expect_shape(k, {s.batch, s.seq, s.kv_heads, s.head_dim}, "q's batch, seq and head dim");
  expect_shape(v, k.a.shape, "k's shape");
  if (s.kv_heads < 1 || s.heads % s.kv_heads != 0) {
    throw py::value_error("k: " + std::to_string(s.kv_heads) + " kv heads must divide q's " +
                          std::to_string(s.heads) + " heads");
  }
  return s;
}

template <class T>
void forward(const llama::AttentionShape& s, double scale, const Checked& q, const Checked& k,
             const Checked& v, const Checked& out, const Checked& lse, int threads) {
  llama::AttentionForward<T> a;
  a.shape = s;
  a.scale = static_cast<T>(scale);
  a.q = heads<const T>(q);
  a.k = heads<const T>(k);
  a.v = heads<const T>(v);
  a.out = heads<T>(out);
  a.lse = dense<T>(lse);
  py::gil_scoped_release release;
  llama::causal_attention_forward(a, threads);
}

template <class T>
void backward(const llama::AttentionShape& s, double scale, const std::vector<Checked>& t,
              int threads) {
  llama::AttentionBackward<T> a;
  a.shape = s;
  a.scale = static_cast<T>(scale);
  a.q = heads<const T>(t[0]);
  a.k = heads<const T>(t[1]);
  a.v = heads<const T>(t[2]);
  a.out = heads<const T>(t[3]);
  a.dout = heads<const T>(t[4]);
  a.lse = dense<const T>(t[5]);
  a.dq = heads<T>(t[6]);
  a.dk = heads<T>(t[7]);
  a.dv = heads<T>(t[8]);
  py::gil_scoped_release release;
  llama::causal_attention_backward(a, threads);
}

}  // namespace

void bind_attention(py::module_& m) {
  m.def(
      "_causal_attention",
      [](py::handle q_obj, py::handle k_obj, py::handle v_obj, py::handle out_obj,
         py::handle lse_obj, double scale, int threads) {
        const Checked q = take(q_obj, "q", 4, false, nullptr);
        const Checked k = take(k_obj, "k", 4, false, &q.a.elem);
        const Checked v = take(v_obj, "v", 4, false, &q.a.elem);
        const Checked out = take(out_obj, "out", 4, true, &q.a.elem);
        const Checked lse = take(lse_obj, "lse", 3, true, &q.a.elem);
        const llama::AttentionShape s = shape_of(q, k, v);
        expect_shape(out, q.a.shape, "q's shape");
        expect_shape(lse, {s.batch, s.heads, s.seq}, "[batch, heads, seq]");
        if (q.a.elem == Elem::kF32) {
          forward<float>(s, scale, q, k, v, out, lse, threads);
        } else {
          forward<double>(s, scale, q, k, v, out, lse, threads);
        }
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::arg("scale"),
      py::arg("threads") = 1,
      "Causal attention (posenc/llama/attention.h): writes out [B, S, H, hd] and lse [B, H, S]");
  m.def(
      "_causal_attention_backward",
      [](py::handle q_obj, py::handle k_obj, py::handle v_obj, py::handle out_obj,
         py::handle dout_obj, py::handle lse_obj, py::handle dq_obj, py::handle dk_obj,
         py::handle dv_obj, double scale, int threads) {
        std::vector<Checked> t;
        t.push_back(take(q_obj, "q", 4, false, nullptr));
        const Elem elem = t[0].a.elem;
        t.push_back(take(k_obj, "k", 4, false, &elem));
        t.push_back(take(v_obj, "v", 4, false, &elem));
        t.push_back(take(out_obj, "out", 4, false, &elem));
        t.push_back(take(dout_obj, "dout", 4, false, &elem));
        t.push_back(take(lse_obj, "lse", 3, false, &elem));
        t.push_back(take(dq_obj, "dq", 4, true, &elem));
        t.push_back(take(dk_obj, "dk", 4, true, &elem));
        t.push_back(take(dv_obj, "dv", 4, true, &elem));
        const llama::AttentionShape s = shape_of(t[0], t[1], t[2]);
        expect_shape(t[3], t[0].a.shape, "q's shape");
        expect_shape(t[4], t[0].a.shape, "q's shape");
        expect_shape(t[5], {s.batch, s.heads, s.seq}, "[batch, heads, seq]");
        expect_shape(t[6], t[0].a.shape, "q's shape");
        expect_shape(t[7], t[1].a.shape, "k's shape");
        expect_shape(t[8], t[1].a.shape, "k's shape");
        if (elem == Elem::kF32) {
          backward<float>(s, scale, t, threads);
        } else {
          backward<double>(s, scale, t, threads);
        }
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("dout"), py::arg("lse"),
      py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("scale"), py::arg("threads") = 1,
      "The backward pass of _causal_attention: writes dq, dk, dv from dout and the forward's "
      "out and lse");
}

}  // namespace posenc::python
