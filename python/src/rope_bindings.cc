// Rotation for Python: apply_rope in place or into given outputs, rerotate_keys, cos/sin caches.
//
// Shapes (the engines' ones), all viewed without a copy through the strides:
//   [tokens, heads, head_dim]                 positions [tokens]
//   [tokens, heads * head_dim], head_size     positions [tokens]
//   [batch, seq, heads, head_dim]  (seq_dim 1) positions [batch, seq] or [seq] / [1, seq] (shared)
//   [batch, heads, seq, head_dim]  (seq_dim 2) likewise
// A spec with an axis map (M-RoPE) takes a leading axes dim on every positions shape: [axes,
// tokens], [axes, batch, seq] or [axes, seq] (transformers' position_ids [3, batch, seq]).
// The last dim must be contiguous. float32/float16/bfloat16 go to the SIMD kernels
// (posenc/rope/apply.h); float64 (for gradcheck and references) is rotated here by a scalar loop
// in double with cos/sin from cos_sin_at, in the Frequencies' convention.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/threads.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "rope_args.h"
#include "tensor_args.h"

namespace posenc::python {
namespace {

[[noreturn]] void value_error(const std::string& msg) { throw py::value_error(msg); }

std::string str(std::int64_t v) { return std::to_string(v); }

}  // namespace

std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + str(shape[i]);
  return s + "]";
}

// The spec's position axes, whatever form `rope` takes (1 when it is none of them: rope_source
// refuses it).
std::int64_t axes_of(py::handle rope) {
  if (py::isinstance<Table>(rope)) return axis_count(rope.cast<const Table&>().freqs->spec);
  if (py::isinstance<Frequencies>(rope)) return axis_count(rope.cast<const Frequencies&>().spec);
  if (py::isinstance<Spec>(rope)) return axis_count(rope.cast<const Spec&>().rope());
  return 1;
}

Plan make_plan(const ArrayArg& q, const std::vector<std::int64_t>& given_shape,
               std::optional<int> seq_dim, std::optional<std::int64_t> head_size,
               std::int64_t axes) {
  Plan p;
  p.ndim = q.shape.size();
  p.head_size = head_size;
  p.axes = axes;
  // M-RoPE: the leading axes dim checked and dropped; the rest is read as for one axis.
  std::vector<std::int64_t> pos_shape = given_shape;
  if (axes > 1 && p.ndim >= 2 && p.ndim <= 4) {
    const std::size_t most = p.ndim == 4 ? 3 : 2;
    if (given_shape.size() < 2 || given_shape.size() > most || given_shape[0] != axes) {
      const std::string a = str(axes);
      value_error(
          "positions " + shape_str(given_shape) + " must be " +
          (p.ndim == 4 ? "[" + a + ", batch, seq] or [" + a + ", seq]" : "[" + a + ", tokens]") +
          " for the spec's " + a + "-axis map (M-RoPE: one row per axis; q " + shape_str(q.shape) +
          ")");
    }
    pos_shape.erase(pos_shape.begin());
  }
  std::int64_t pos_count = 1;
  for (std::int64_t s : pos_shape) pos_count *= s;
  if (head_size && p.ndim != 2) {
    value_error("head_size (" + str(*head_size) +
                ") is only for 2-D q [tokens, heads * head_dim]; q is " + shape_str(q.shape));
  }
  if (seq_dim && p.ndim != 4) {
    value_error("seq_dim (" + str(*seq_dim) + ") is only for 4-D q; q is " + shape_str(q.shape));
  }
  if (p.ndim == 2 || p.ndim == 3) {
    if (p.ndim == 2 && !head_size) {
      value_error("q " + shape_str(q.shape) +
                  " is 2-D [tokens, heads * head_dim]: pass head_size= (the head dim)");
    }
    p.tokens = q.shape[0];
    if (pos_count != p.tokens) {
      value_error("positions " + shape_str(pos_shape) + " hold " + str(pos_count) +
                  " entries; expected one per token of q " + shape_str(q.shape) + " (" +
                  str(p.tokens) + ")");
    }
    return p;
  }
  if (p.ndim != 4) {
    value_error("q has " + str(static_cast<std::int64_t>(p.ndim)) + " dims " + shape_str(q.shape) +
                "; expected [tokens, heads, head_dim], [tokens, heads * head_dim] with head_size=, "
                "[batch, seq, heads, head_dim] or [batch, heads, seq, head_dim]");
  }
  std::int64_t pos_batch = 1, seq = 0;
  if (pos_shape.size() == 1) {
    seq = pos_shape[0];
  } else if (pos_shape.size() == 2) {
    pos_batch = pos_shape[0];
    seq = pos_shape[1];
  } else {
    value_error("positions " + shape_str(pos_shape) + " must be [batch, seq] or [seq] for 4-D q " +
                shape_str(q.shape));
  }
  p.batch = q.shape[0];
  if (pos_batch != p.batch && pos_batch != 1) {
    value_error("positions " + shape_str(pos_shape) + ": batch " + str(pos_batch) +
                " must be 1 or q's batch (" + str(p.batch) + ", q " + shape_str(q.shape) + ")");
  }
  p.shared_positions = pos_batch == 1;
  p.pos_batch = pos_batch;
  if (seq_dim) {
    if (*seq_dim != 1 && *seq_dim != 2)
      value_error("seq_dim (" + str(*seq_dim) + ") must be 1 or 2");
    if (q.shape[static_cast<std::size_t>(*seq_dim)] != seq) {
      value_error("q " + shape_str(q.shape) + ": dim " + str(*seq_dim) + " (seq_dim) has " +
                  str(q.shape[static_cast<std::size_t>(*seq_dim)]) + " entries, positions " +
                  shape_str(pos_shape) + " have " + str(seq) + " per batch row");
    }
    p.seq_dim = *seq_dim;
  } else {
    const bool d1 = q.shape[1] == seq, d2 = q.shape[2] == seq;
    if (d1 && d2 && q.shape[1] != 1) {
      value_error("q " + shape_str(q.shape) + " with positions " + shape_str(pos_shape) +
                  " is ambiguous: dims 1 and 2 both have " + str(seq) +
                  " entries; pass seq_dim=1 ([batch, seq, heads, head_dim]) or seq_dim=2 ([batch, "
                  "heads, seq, head_dim])");
    }
    if (!d1 && !d2) {
      value_error("q " + shape_str(q.shape) + ": neither dim 1 nor dim 2 matches the " + str(seq) +
                  " positions per batch row of positions " + shape_str(pos_shape));
    }
    p.seq_dim = d1 ? 1 : 2;
  }
  p.tokens = seq;
  return p;
}

// The [tokens, heads, head_dim] view of batch row `b` of `a` under `plan`.
TensorView view_of(const ArrayArg& a, const std::string& name, const Plan& plan, std::int64_t b,
                   DType dtype, std::size_t elem_size) {
  if (a.shape.size() != plan.ndim) {
    value_error(name + " " + shape_str(a.shape) + " must have as many dims as q (" +
                str(static_cast<std::int64_t>(plan.ndim)) + ")");
  }
  const std::size_t last = a.shape.size() - 1;
  if (a.strides[last] != 1 && a.shape[last] > 1) {
    value_error(name + ": the last dim must be contiguous (stride 1), got stride " +
                str(a.strides[last]) + " (shape " + shape_str(a.shape) +
                "); call .contiguous() first");
  }
  TensorView v;
  v.dtype = dtype;
  char* base = static_cast<char*>(a.data);
  if (plan.ndim == 4) {
    const auto seq_axis = static_cast<std::size_t>(plan.seq_dim);
    const std::size_t head_axis = 3 - seq_axis;
    base += b * a.strides[0] * static_cast<std::int64_t>(elem_size);
    v.tokens = a.shape[seq_axis];
    v.heads = a.shape[head_axis];
    v.head_dim = a.shape[3];
    v.token_stride = a.strides[seq_axis];
    v.head_stride = a.strides[head_axis];
    if (a.shape[0] != plan.batch) {
      value_error(name + " " + shape_str(a.shape) + ": batch must equal q's (" + str(plan.batch) +
                  ")");
    }
  } else if (plan.ndim == 3) {
    v.tokens = a.shape[0];
    v.heads = a.shape[1];
    v.head_dim = a.shape[2];
    v.token_stride = a.strides[0];
    v.head_stride = a.strides[1];
  } else {
    const std::int64_t hs = *plan.head_size;
    if (hs <= 0 || a.shape[1] % hs != 0) {
      value_error(name + " " + shape_str(a.shape) + ": head_size (" + str(hs) +
                  ") must be positive and divide the last dim (" + str(a.shape[1]) + ")");
    }
    v.tokens = a.shape[0];
    v.heads = a.shape[1] / hs;
    v.head_dim = hs;
    v.token_stride = a.strides[0];
    v.head_stride = hs;
  }
  if (v.tokens != plan.tokens) {
    value_error(name + " " + shape_str(a.shape) + " has " + str(v.tokens) + " tokens; q has " +
                str(plan.tokens));
  }
  // Strides of size-1 dims carry no meaning (torch may report anything there).
  if (v.heads == 1) v.head_stride = v.head_dim;
  if (v.tokens == 1) v.token_stride = v.heads * v.head_stride;
  v.data = base;
  return v;
}

namespace {

struct Operand {
  ArrayArg arg;
  std::string name;
};

// The positions of batch row `b` as the library takes them: [tokens], or [axes, tokens]
// axis-major for M-RoPE (gathered into `scratch` when the rows of the axes are apart).
std::span<const std::int64_t> row_positions(const Plan& plan, const std::vector<std::int64_t>& pos,
                                            std::int64_t b, std::vector<std::int64_t>& scratch) {
  const std::int64_t row = plan.shared_positions ? 0 : b;
  const auto tokens = static_cast<std::size_t>(plan.tokens);
  if (plan.axes == 1) return {pos.data() + row * plan.tokens, tokens};
  if (plan.pos_batch == 1) return {pos.data(), tokens * static_cast<std::size_t>(plan.axes)};
  scratch.resize(tokens * static_cast<std::size_t>(plan.axes));
  for (std::int64_t a = 0; a < plan.axes; ++a) {
    const auto from = pos.begin() + (a * plan.pos_batch + row) * plan.tokens;
    std::copy(from, from + plan.tokens, scratch.begin() + a * plan.tokens);
  }
  return scratch;
}

// Rotates one f64 [tokens, heads, head_dim] view in double (see the file comment).
void rotate_f64(const Frequencies& f, const TensorView& in, const TensorView& out,
                std::span<const std::int64_t> positions, bool inverse) {
  const RopeSpec& s = f.spec;
  const std::int64_t n = s.rotary_dim / 2;
  std::vector<double> c(static_cast<std::size_t>(n)), sn(c.size());
  const auto* src = static_cast<const double*>(in.data);
  auto* dst = static_cast<double*>(out.data);
  const double sign = inverse ? -1.0 : 1.0;
  const std::int64_t axes = axis_count(s);
  std::vector<std::int64_t> at(static_cast<std::size_t>(axes));
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    if (axes == 1) {
      cos_sin_at(f, positions[static_cast<std::size_t>(t)], c, sn);
    } else {
      for (std::int64_t a = 0; a < axes; ++a) {
        at[static_cast<std::size_t>(a)] = positions[static_cast<std::size_t>(a * in.tokens + t)];
      }
      cos_sin_at(f, at, c, sn);
    }
    for (std::int64_t h = 0; h < in.heads; ++h) {
      const double* x = src + t * in.token_stride + h * in.head_stride;
      double* y = dst + t * out.token_stride + h * out.head_stride;
      if (y != x) std::copy(x, x + in.head_dim, y);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t a = s.rotary_offset + (s.layout == Layout::kInterleaved ? 2 * i : i);
        const std::int64_t bb = s.layout == Layout::kInterleaved ? a + 1 : a + n;
        const double xa = x[a], xb = x[bb];
        const double ci = c[static_cast<std::size_t>(i)];
        const double si = sign * sn[static_cast<std::size_t>(i)];
        y[a] = xa * ci - xb * si;
        y[bb] = xb * ci + xa * si;
      }
    }
  }
}

}  // namespace

RopeSource rope_source(py::handle rope, const std::optional<std::string>& numerics,
                       const std::optional<std::int64_t>& seq_len,
                       const std::vector<std::int64_t>& positions) {
  if (py::isinstance<Table>(rope)) {
    const Table& t = rope.cast<const Table&>();
    if (numerics && parse_numerics(*numerics, "numerics") != t.freqs->numerics) {
      value_error("numerics (" + *numerics + ") differs from the table's (" +
                  std::string(numerics_name(t.freqs->numerics)) + ")");
    }
    if (seq_len)
      value_error("seq_len is fixed by the table (built at seq_len " + str(t.freqs->seq_len) + ")");
    return {t.freqs, &t.table};
  }
  if (py::isinstance<Frequencies>(rope)) {
    auto f = rope.cast<std::shared_ptr<Frequencies>>();
    if (numerics && parse_numerics(*numerics, "numerics") != f->numerics) {
      value_error("numerics (" + *numerics + ") differs from the Frequencies' (" +
                  std::string(numerics_name(f->numerics)) + ")");
    }
    if (seq_len)
      value_error("seq_len is fixed by the Frequencies (computed at " + str(f->seq_len) + ")");
    return {f, nullptr};
  }
  if (!py::isinstance<Spec>(rope)) {
    throw py::type_error("spec: expected a posenc.RopeSpec, Frequencies or CosSinTable, got " +
                         py::str(py::type::handle_of(rope).attr("__name__")).cast<std::string>());
  }
  const Spec& spec = rope.cast<const Spec&>();
  std::int64_t len = 0;
  if (seq_len) {
    if (*seq_len < 0) value_error("seq_len (" + str(*seq_len) + ") must not be negative");
    len = *seq_len;
  } else if (depends_on_length(spec.rope()) && !positions.empty()) {
    len = *std::max_element(positions.begin(), positions.end()) + 1;  // transformers' rule
    len = std::max<std::int64_t>(len, 0);
  }
  return {spec.frequencies(numerics_arg(numerics.value_or("precise")), len), nullptr};
}

// threads= above the hardware threads runs on run_threads(threads) of them: a RuntimeWarning
// says so, as the CLI's --threads warning does (an out-of-range count is the library's error).
void warn_capped_threads(int threads) {
  if (threads <= hardware_threads() || threads > kMaxThreads) return;
  const std::string msg = "threads (" + std::to_string(threads) + ") is more than this machine's " +
                          std::to_string(hardware_threads()) + " hardware threads; running " +
                          std::to_string(run_threads(threads));
  if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 2) < 0) throw py::error_already_set();
}

namespace {

// apply_rope / apply_rope_ (q_out, k_out None: in place). Returns the threads that ran.
int apply(py::handle q, py::handle k, py::handle q_out, py::handle k_out, py::handle positions,
          py::handle rope, bool inverse, const std::optional<std::string>& numerics,
          const std::optional<std::int64_t>& seq_len, const std::optional<std::int64_t>& head_size,
          const std::optional<int>& seq_dim, int threads, bool bf16) {
  warn_capped_threads(threads);
  std::vector<Operand> ins, outs;
  ins.push_back({array_arg(q, "q", bf16), "q"});
  if (!k.is_none()) ins.push_back({array_arg(k, "k", bf16), "k"});
  const bool in_place = q_out.is_none();
  if (!in_place) {
    outs.push_back({array_arg(q_out, "q_out", bf16), "q_out"});
    if (!k.is_none()) {
      if (k_out.is_none()) value_error("k_out is required when q_out is given and k is");
      outs.push_back({array_arg(k_out, "k_out", bf16), "k_out"});
    }
  }
  const ArrayArg pos_arg = array_arg(positions, "positions");
  const std::vector<std::int64_t> pos = read_positions(pos_arg, "positions");
  const Plan plan = make_plan(ins[0].arg, pos_arg.shape, seq_dim, head_size, axes_of(rope));

  const bool f64 = ins[0].arg.elem == Elem::kF64;
  DType dtype = DType::kF32;
  if (!f64) dtype = kernel_dtype(ins[0].arg, "q");
  for (const auto* list : {&ins, &outs}) {
    for (const Operand& o : *list) {
      if (o.arg.elem != ins[0].arg.elem) {
        throw py::type_error(o.name + ": dtype " + elem_name(o.arg.elem) + " differs from q's (" +
                             elem_name(ins[0].arg.elem) + ")");
      }
      if (o.arg.is_torch != ins[0].arg.is_torch) {
        throw py::type_error(o.name +
                             ": mixes torch tensors and numpy arrays; pass both as one kind");
      }
    }
  }
  for (const Operand& o : in_place ? ins : outs) {
    if (!o.arg.writable) value_error(o.name + ": a read-only array cannot be written");
  }
  if (ins.size() == 2 && ins[0].arg.data == ins[1].arg.data &&
      ins[0].arg.strides == ins[1].arg.strides && ins[0].arg.shape == ins[1].arg.shape) {
    value_error("q and k are the same tensor: it would be rotated twice");
  }
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].arg.shape != ins[i].arg.shape) {
      value_error(outs[i].name + " " + shape_str(outs[i].arg.shape) + " must have " + ins[i].name +
                  "'s shape " + shape_str(ins[i].arg.shape));
    }
  }

  const RopeSource src = rope_source(rope, numerics, seq_len, pos);
  const std::size_t es = f64 ? sizeof(double) : dtype_size(dtype);
  int ran = 0;
  for (std::int64_t b = 0; b < plan.batch; ++b) {
    std::vector<TensorView> vin, vout;
    for (const Operand& o : ins) vin.push_back(view_of(o.arg, o.name, plan, b, dtype, es));
    for (const Operand& o : outs) vout.push_back(view_of(o.arg, o.name, plan, b, dtype, es));
    std::vector<std::int64_t> scratch;
    const std::span<const std::int64_t> p = row_positions(plan, pos, b, scratch);
    if (f64) {
      for (std::size_t i = 0; i < vin.size(); ++i) {
        const std::string& name = ins[i].name;
        if (vin[i].head_dim != src.freqs->spec.head_dim) {
          value_error(name + ": head_dim (" + str(vin[i].head_dim) +
                      ") must equal the spec's head_dim (" + str(src.freqs->spec.head_dim) + ")");
        }
        py::gil_scoped_release release;
        rotate_f64(*src.freqs, vin[i], in_place ? vin[i] : vout[i], p, inverse);
      }
      ran = 1;
      continue;
    }
    RopeArgs args;
    args.q = vin[0];
    if (vin.size() > 1) args.k = vin[1];
    if (!in_place) {
      args.q_out = vout[0];
      if (vout.size() > 1) args.k_out = vout[1];
    }
    args.positions = p;
    args.direction = inverse ? Direction::kInverse : Direction::kForward;
    args.table = src.table;
    args.threads = threads;
    py::gil_scoped_release release;
    ran = std::max(ran, apply_rope(*src.freqs, args));
  }
  return ran;
}

void rerotate(py::handle k, py::handle positions, std::shared_ptr<Frequencies> from,
              std::shared_ptr<Frequencies> to, std::optional<std::int64_t> head_size,
              std::optional<int> seq_dim, int threads, bool bf16) {
  warn_capped_threads(threads);
  const ArrayArg a = array_arg(k, "k", bf16);
  const DType dtype = kernel_dtype(a, "k");
  if (!a.writable) value_error("k: a read-only array cannot be written");
  const ArrayArg pos_arg = array_arg(positions, "positions");
  const std::vector<std::int64_t> pos = read_positions(pos_arg, "positions");
  const Plan plan = make_plan(a, pos_arg.shape, seq_dim, head_size, axis_count(from->spec));
  for (std::int64_t b = 0; b < plan.batch; ++b) {
    const TensorView v = view_of(a, "k", plan, b, dtype, dtype_size(dtype));
    std::vector<std::int64_t> scratch;
    const std::span<const std::int64_t> p = row_positions(plan, pos, b, scratch);
    py::gil_scoped_release release;
    rerotate_keys(*from, *to, v, p, threads);
  }
}

// Rows of cos then sin per position: cos_sin_at's doubles, or rounded once to float32.
template <typename T>
py::array cache_of(const Frequencies& f, std::int64_t max_positions) {
  const std::int64_t n = f.pair_count();
  const auto half = static_cast<std::size_t>(n);
  py::array_t<T> out({max_positions, 2 * n});
  T* d = out.mutable_data();
  {
    py::gil_scoped_release release;
    for (std::int64_t p = 0; p < max_positions; ++p) {
      T* row = d + p * 2 * n;
      if constexpr (std::is_same_v<T, double>) {
        cos_sin_at(f, p, {row, half}, {row + n, half});
      } else {
        cos_sin_row_f32(f, p, {row, half}, {row + n, half});
      }
    }
  }
  return out;
}

// [positions, rotary_dim]: cos of every pair, then sin (vLLM's cos_sin_cache).
py::array cos_sin_cache(const Frequencies& f, std::int64_t max_positions, bool f64) {
  if (max_positions < 0)
    value_error("max_positions (" + str(max_positions) + ") must not be negative");
  return f64 ? cache_of<double>(f, max_positions) : cache_of<float>(f, max_positions);
}

// transformers' rotary forward: [batch, seq, width] (core/cos_sin.h).
py::tuple rotary_cos_sin(const Frequencies& f, py::handle positions, bool cat) {
  const ArrayArg pos_arg = array_arg(positions, "position_ids");
  // M-RoPE: [axes, batch, seq], as transformers' multimodal rotary forward takes them.
  const std::int64_t axes = axis_count(f.spec);
  const std::size_t dims = axes > 1 ? 3 : 2;
  if (pos_arg.shape.size() != dims || (axes > 1 && pos_arg.shape[0] != axes)) {
    value_error("position_ids " + shape_str(pos_arg.shape) + " must be " +
                (axes > 1
                     ? "[" + str(axes) + ", batch, seq] for the spec's " + str(axes) + "-axis map"
                     : std::string("[batch, seq]")));
  }
  const std::vector<std::int64_t> pos = read_positions(pos_arg, "position_ids");
  const std::int64_t batch = pos_arg.shape[dims - 2], seq = pos_arg.shape[dims - 1];
  const std::int64_t width = cat ? 2 * f.pair_count() : f.pair_count();
  py::array_t<float> cos({batch, seq, width}), sin({batch, seq, width});
  const auto size = static_cast<std::size_t>(batch * seq * width);
  std::span<float> c(cos.mutable_data(), size), s(sin.mutable_data(), size);
  if (batch > 0 && seq > 0) {
    py::gil_scoped_release release;
    rotary_forward_cos_sin(f, pos, batch, cat, c, s);
  }
  return py::make_tuple(cos, sin);
}

}  // namespace

void bind_rope(py::module_& m) {
  py::class_<Table, std::shared_ptr<Table>>(
      m, "CosSinTable", "cos/sin per (position, pair), built once (rope/table.h)")
      .def(py::init([](const Spec& spec, std::int64_t positions, const std::string& numerics,
                       std::optional<std::int64_t> seq_len) {
             if (seq_len && *seq_len < 0)
               value_error("seq_len (" + str(*seq_len) + ") must not be negative");
             auto f = spec.frequencies(numerics_arg(numerics), seq_len.value_or(0));
             py::gil_scoped_release release;
             return std::make_shared<Table>(Table{f, CosSinTable(*f, positions)});
           }),
           py::arg("spec"), py::arg("positions"), py::arg("numerics") = "precise",
           py::arg("seq_len") = py::none())
      .def_property_readonly("positions", [](const Table& t) { return t.table.positions(); })
      .def_property_readonly("pairs", [](const Table& t) { return t.table.pairs(); })
      .def_property_readonly("frequencies", [](const Table& t) { return t.freqs; })
      .def_property_readonly(
          "numerics", [](const Table& t) { return std::string(numerics_name(t.freqs->numerics)); })
      .def("__repr__", [](const Table& t) {
        return "CosSinTable(rope_type=" + method_name(t.freqs->spec) +
               ", numerics=" + std::string(numerics_name(t.freqs->numerics)) +
               ", positions=" + str(t.table.positions()) + ", pairs=" + str(t.table.pairs()) + ")";
      });

  m.def("_apply", &apply, py::arg("q"), py::arg("k"), py::arg("q_out"), py::arg("k_out"),
        py::arg("positions"), py::arg("spec"), py::arg("inverse"), py::arg("numerics"),
        py::arg("seq_len"), py::arg("head_size"), py::arg("seq_dim"), py::arg("threads"),
        py::arg("bf16"));
  m.def(
      "_time_apply",
      [](py::handle q, py::handle k, py::handle positions, py::handle rope, int iterations) {
        // ns per apply_rope call on views built once: what "the C++ call" costs, for
        // bench/python_bench.py's overhead column.
        const ArrayArg qa = array_arg(q, "q");
        const ArrayArg pa = array_arg(positions, "positions");
        const std::vector<std::int64_t> pos = read_positions(pa, "positions");
        const Plan plan = make_plan(qa, pa.shape, std::nullopt, std::nullopt);
        const DType dtype = kernel_dtype(qa, "q");
        RopeArgs args;
        args.q = view_of(qa, "q", plan, 0, dtype, dtype_size(dtype));
        std::optional<ArrayArg> ka;
        if (!k.is_none()) {
          ka = array_arg(k, "k");
          args.k = view_of(*ka, "k", plan, 0, dtype, dtype_size(dtype));
        }
        args.positions = std::span<const std::int64_t>(pos);
        const RopeSource src = rope_source(rope, std::nullopt, std::nullopt, pos);
        args.table = src.table;
        py::gil_scoped_release release;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iterations; ++i) apply_rope(*src.freqs, args);
        const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
        return dt.count() / std::max(iterations, 1);
      },
      py::arg("q"), py::arg("k"), py::arg("positions"), py::arg("spec"), py::arg("iterations"));
  m.def("_torch_fast_reader", &torch_fast_reader, py::arg("enable") = py::none(),
        "Whether torch tensors are read without Python calls (_posenc_torch); enable= switches.");
  m.def("_rerotate", &rerotate, py::arg("k"), py::arg("positions"), py::arg("old"), py::arg("new"),
        py::arg("head_size"), py::arg("seq_dim"), py::arg("threads"), py::arg("bf16"));
  m.def("_cos_sin_cache", &cos_sin_cache, py::arg("freqs"), py::arg("max_positions"),
        py::arg("f64"));
  m.def("_rotary_cos_sin", &rotary_cos_sin, py::arg("freqs"), py::arg("position_ids"),
        py::arg("cat"));
}

}  // namespace posenc::python
