// rope_args.h: how the rope bindings read their arguments (rope_bindings.cc), shared with the
// fused KV-cache append's binding (kv_cache_bindings.cc): the layout of a call's tensors, their
// [tokens, heads, head_dim] views, and the Frequencies (and table) a `spec` argument stands for.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "posenc/core/frequencies.h"
#include "posenc/rope/table.h"
#include "posenc/rope/tensor.h"
#include "tensor_args.h"

namespace posenc::python {

namespace py = pybind11;

// A CosSinTable with the Frequencies it was built from (posenc.CosSinTable).
struct Table {
  std::shared_ptr<Frequencies> freqs;
  CosSinTable table;
};

// How the tokens of a call are laid out: `batch` rows of `tokens` each (batch 1 unless 4-D).
struct Plan {
  std::size_t ndim = 3;
  std::int64_t batch = 1;
  std::int64_t tokens = 0;
  int seq_dim = 0;                // 4-D only: 1 or 2
  bool shared_positions = false;  // 4-D: one positions row for every batch row
  std::optional<std::int64_t> head_size;
  std::int64_t axes = 1;       // position axes of the spec (M-RoPE: 3 or 4)
  std::int64_t pos_batch = 1;  // batch rows the positions hold
};

// The Frequencies of a call and the table to read, if `spec` was a CosSinTable.
struct RopeSource {
  std::shared_ptr<Frequencies> freqs;
  const CosSinTable* table = nullptr;
};

// "[2, 3, 4]"
std::string shape_str(const std::vector<std::int64_t>& shape);

// The spec's position axes, whatever form `rope` takes (1 when it is none of them).
std::int64_t axes_of(py::handle rope);

// The layout of q (2-D with head_size, 3-D, or 4-D with seq_dim) against the positions' shape;
// ValueError naming what does not fit.
Plan make_plan(const ArrayArg& q, const std::vector<std::int64_t>& given_shape,
               std::optional<int> seq_dim, std::optional<std::int64_t> head_size,
               std::int64_t axes = 1);

// The [tokens, heads, head_dim] view of batch row `b` of `a` under `plan`.
TensorView view_of(const ArrayArg& a, const std::string& name, const Plan& plan, std::int64_t b,
                   DType dtype, std::size_t elem_size);

// `rope`: a RopeSpec (numerics default "precise"; seq_len default max(positions) + 1 for the
// methods that depend on it), a Frequencies or a CosSinTable; TypeError / ValueError otherwise.
RopeSource rope_source(py::handle rope, const std::optional<std::string>& numerics,
                       const std::optional<std::int64_t>& seq_len,
                       const std::vector<std::int64_t>& positions);

// threads= above the hardware threads: a RuntimeWarning naming the count that runs.
void warn_capped_threads(int threads);

}  // namespace posenc::python
