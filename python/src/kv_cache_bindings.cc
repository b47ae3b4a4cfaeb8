// The fused RoPE + paged KV-cache append for Python (posenc/rope/kv_cache.h): q rotated in place,
// k rotated, and k and v written into a key and a value cache, one pass over k and v.
//
// Shapes, viewed without a copy through the strides (the last dim contiguous):
//   q (optional)       [tokens, heads_q, head_dim], or [tokens, heads_q * head_dim] with head_size
//   k, v               [tokens, kv_heads, head_dim], or 2-D likewise
//   positions          [tokens], or [axes, tokens] for a multi-axis spec (M-RoPE)
//   caches, "vllm"     [num_blocks, block_size, kv_heads, head_dim], slot_mapping [tokens]
//           "nhd"      [pages, page_size, kv_heads, head_dim]   FlashInfer's paged layouts, with
//           "hnd"      [pages, kv_heads, page_size, head_dim]   kv_indptr, kv_indices,
//                      kv_last_page_len, batch_indices and kv_positions (int32, FlashInfer's)
// The cache dtype is the cache tensors': float32, float16, bfloat16, or uint8 (torch.uint8,
// numpy uint8, torch.float8_e4m3fn where torch has it) for fp8 e4m3 bits with k_scale/v_scale.
// Everything is checked before anything is written: the library refuses bad slots, pages and
// positions with posenc::Error (ValueError here), naming the argument and the value.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "posenc/rope/kv_cache.h"
#include "rope_args.h"
#include "tensor_args.h"

namespace posenc::python {
namespace {

[[noreturn]] void value_error(const std::string& msg) { throw py::value_error(msg); }

std::string str(std::int64_t v) { return std::to_string(v); }

// The cache dtype a cache tensor's element type stands for.
CacheDType cache_dtype_of(const ArrayArg& a, const std::string& name) {
  switch (a.elem) {
    case Elem::kF32:
      return CacheDType::kF32;
    case Elem::kF16:
      return CacheDType::kF16;
    case Elem::kBF16:
      return CacheDType::kBF16;
    case Elem::kU8:
      return CacheDType::kFp8E4M3;
    default:
      throw py::type_error(name + ": dtype " + elem_name(a.elem) +
                           " is not a cache dtype; expected float32, float16, bfloat16, or uint8 "
                           "(torch.float8_e4m3fn) for fp8 e4m3 bits");
  }
}

// The KvCache over the two cache tensors (same shape, strides and dtype) in `layout`.
KvCache cache_of(const ArrayArg& key, const ArrayArg& value, KvCacheLayout layout) {
  if (key.elem != value.elem) {
    throw py::type_error("value_cache: dtype " + elem_name(value.elem) +
                         " differs from key_cache's (" + elem_name(key.elem) + ")");
  }
  if (key.is_torch != value.is_torch) {
    throw py::type_error(
        "value_cache: mixes torch tensors and numpy arrays; pass both as one kind");
  }
  const std::pair<const ArrayArg*, const char*> caches[] = {{&key, "key_cache"},
                                                            {&value, "value_cache"}};
  for (const auto& [a, name] : caches) {
    if (a->shape.size() != 4) {
      value_error(std::string(name) + " " + shape_str(a->shape) + " must have 4 dims: " +
                  (layout == KvCacheLayout::kHnd ? "[pages, kv_heads, page_size, head_dim]"
                   : layout == KvCacheLayout::kNhd
                       ? "[pages, page_size, kv_heads, head_dim]"
                       : "[num_blocks, block_size, kv_heads, head_dim]") +
                  " for layout \"" + std::string(kv_cache_layout_name(layout)) + "\"");
    }
    if (!a->writable) value_error(std::string(name) + ": a read-only array cannot be written");
    if (a->strides[3] != 1 && a->shape[3] > 1) {
      value_error(std::string(name) + ": the last dim (head_dim) must be contiguous, got stride " +
                  str(a->strides[3]) + "; call .contiguous() first");
    }
  }
  if (key.shape != value.shape || key.strides != value.strides) {
    value_error("value_cache " + shape_str(value.shape) + " with strides " +
                shape_str(value.strides) + " must match key_cache " + shape_str(key.shape) +
                " with strides " + shape_str(key.strides));
  }
  KvCache c;
  c.key = key.data;
  c.value = value.data;
  c.dtype = cache_dtype_of(key, "key_cache");
  c.layout = layout;
  c.pages = key.shape[0];
  c.head_dim = key.shape[3];
  c.page_stride = key.strides[0];
  const bool hnd = layout == KvCacheLayout::kHnd;
  c.page_size = key.shape[hnd ? 2 : 1];
  c.heads = key.shape[hnd ? 1 : 2];
  c.entry_stride = key.strides[hnd ? 2 : 1];
  c.head_stride = key.strides[hnd ? 1 : 2];
  return c;
}

// An int32 index array (FlashInfer's IdType) as the library takes it: numpy or torch, int32 or
// int64 (each value checked to fit), 1-D. `out` keeps the values.
std::span<const std::int32_t> index_arg(py::handle obj, const std::string& name,
                                        std::vector<std::int32_t>& out) {
  const ArrayArg a = array_arg(obj, name);
  if (a.shape.size() != 1) {
    value_error(name + " " + shape_str(a.shape) + " must be 1-D");
  }
  const std::vector<std::int64_t> v = read_positions(a, name);
  out.resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] < std::numeric_limits<std::int32_t>::min() ||
        v[i] > std::numeric_limits<std::int32_t>::max()) {
      value_error(name + "[" + str(static_cast<std::int64_t>(i)) + "] = " + str(v[i]) +
                  " does not fit int32 (FlashInfer's index type)");
    }
    out[i] = static_cast<std::int32_t>(v[i]);
  }
  return out;
}

// posenc.rope_append_kv_cache_ (kv_cache.py). Returns the threads that ran.
int append_kv(py::handle q, py::handle k, py::handle v, py::handle key_cache,
              py::handle value_cache, py::handle positions, py::handle rope,
              const std::string& layout_name, py::handle slot_mapping, py::handle kv_indptr,
              py::handle kv_indices, py::handle kv_last_page_len, py::handle batch_indices,
              py::handle kv_positions, double k_scale, double v_scale, bool rotate, bool k_in_place,
              const std::optional<std::string>& numerics,
              const std::optional<std::int64_t>& seq_len,
              const std::optional<std::int64_t>& head_size, int threads, bool bf16) {
  warn_capped_threads(threads);
  const KvCacheLayout layout = parse_kv_cache_layout(layout_name);
  const ArrayArg ka = array_arg(k, "k", bf16);
  const ArrayArg va = array_arg(v, "v", bf16);
  std::optional<ArrayArg> qa;
  if (!q.is_none()) qa = array_arg(q, "q", bf16);
  const ArrayArg pos_arg = array_arg(positions, "positions");
  const std::vector<std::int64_t> pos = read_positions(pos_arg, "positions");
  // q (else k) sets the layout of the tokens: [tokens, heads, head_dim] or 2-D with head_size.
  const ArrayArg& lead = qa ? *qa : ka;
  const Plan plan = make_plan(lead, pos_arg.shape, std::nullopt, head_size, axes_of(rope));
  if (plan.ndim == 4) {
    value_error(std::string(qa ? "q " : "k ") + shape_str(lead.shape) +
                ": expected [tokens, heads, head_dim] or [tokens, heads * head_dim] with "
                "head_size= (one token per row, as engines append them)");
  }
  const DType kd = kernel_dtype(ka, "k"), vd = kernel_dtype(va, "v");
  if (va.is_torch != ka.is_torch || (qa && qa->is_torch != ka.is_torch)) {
    throw py::type_error("q, k and v mix torch tensors and numpy arrays; pass them as one kind");
  }
  KvAppendArgs args;
  args.k = view_of(ka, "k", plan, 0, kd, dtype_size(kd));
  args.v = view_of(va, "v", plan, 0, vd, dtype_size(vd));
  if (qa) {
    const DType qd = kernel_dtype(*qa, "q");
    if (!qa->writable) value_error("q: a read-only array cannot be written");
    args.q = view_of(*qa, "q", plan, 0, qd, dtype_size(qd));
  }
  if (k_in_place && !ka.writable)
    value_error("k: a read-only array cannot be written (k_in_place)");
  args.rotate = rotate;
  args.k_in_place = k_in_place;
  args.positions = std::span<const std::int64_t>(pos);
  args.threads = threads;

  const ArrayArg kc = array_arg(key_cache, "key_cache", bf16);
  const ArrayArg vc = array_arg(value_cache, "value_cache", bf16);
  if (kc.is_torch != ka.is_torch) {
    throw py::type_error("key_cache: mixes torch tensors and numpy arrays with k; pass one kind");
  }
  KvCache cache = cache_of(kc, vc, layout);
  // float32 scales, as the kernel takes them (and vLLM keeps them); the library refuses one that
  // is not positive and finite there. A double beyond float32's range has no float32 to round to.
  for (const auto& [value, name] : {std::pair{k_scale, "k_scale"}, std::pair{v_scale, "v_scale"}}) {
    if (std::abs(value) > static_cast<double>(std::numeric_limits<float>::max())) {
      value_error(std::string(name) + " (" + std::to_string(value) +
                  ") is beyond float32's range; expected a positive finite float32 scale");
    }
  }
  cache.k_scale = static_cast<float>(k_scale);
  cache.v_scale = static_cast<float>(v_scale);

  std::vector<std::int64_t> slots;
  std::vector<std::int32_t> indptr, indices, last_len, batch, kv_pos;
  const bool paged = layout != KvCacheLayout::kVllm;
  const std::pair<py::handle, const char*> flashinfer[] = {{kv_indptr, "kv_indptr"},
                                                           {kv_indices, "kv_indices"},
                                                           {kv_last_page_len, "kv_last_page_len"},
                                                           {batch_indices, "batch_indices"},
                                                           {kv_positions, "kv_positions"}};
  if (!paged) {
    if (slot_mapping.is_none()) value_error("slot_mapping is required for layout \"vllm\"");
    for (const auto& [h, name] : flashinfer) {
      if (!h.is_none()) {
        value_error(std::string(name) + " is for the paged layouts (\"nhd\", \"hnd\"); layout " +
                    "\"vllm\" takes slot_mapping");
      }
    }
    const ArrayArg sa = array_arg(slot_mapping, "slot_mapping");
    if (sa.shape.size() != 1) value_error("slot_mapping " + shape_str(sa.shape) + " must be 1-D");
    slots = read_positions(sa, "slot_mapping");
    args.slot_mapping = slots;
  } else {
    if (!slot_mapping.is_none()) {
      value_error("slot_mapping is for layout \"vllm\"; layout \"" + layout_name +
                  "\" takes kv_indptr, kv_indices, kv_last_page_len, batch_indices and "
                  "kv_positions");
    }
    for (const auto& [h, name] : flashinfer) {
      if (h.is_none())
        value_error(std::string(name) + " is required for layout \"" + layout_name + "\"");
    }
    PagedKvIndex index;
    index.kv_indptr = index_arg(kv_indptr, "kv_indptr", indptr);
    index.kv_indices = index_arg(kv_indices, "kv_indices", indices);
    index.kv_last_page_len = index_arg(kv_last_page_len, "kv_last_page_len", last_len);
    index.batch_indices = index_arg(batch_indices, "batch_indices", batch);
    index.positions = index_arg(kv_positions, "kv_positions", kv_pos);
    args.paged = index;
  }

  const RopeSource src = rope_source(rope, numerics, seq_len, pos);
  args.table = src.table;
  py::gil_scoped_release release;
  return rope_append_kv_cache(*src.freqs, cache, args);
}

// posenc.append_positions (kv_cache.py): FlashInfer's get_batch_indices_positions.
py::tuple append_positions_of(py::handle append_indptr, py::handle kv_indptr,
                              py::handle kv_last_page_len, std::int64_t page_size) {
  std::vector<std::int32_t> a, b, c;
  const auto ai = index_arg(append_indptr, "append_indptr", a);
  const auto ki = index_arg(kv_indptr, "kv_indptr", b);
  const auto kl = index_arg(kv_last_page_len, "kv_last_page_len", c);
  if (ai.empty()) value_error("append_indptr is empty; expected [batch + 1] entries from 0");
  const std::int64_t tokens = ai.back();
  if (tokens < 0) value_error("append_indptr[-1] (" + str(tokens) + ") must not be negative");
  py::array_t<std::int32_t> batch(tokens), positions(tokens);
  append_positions(
      ai, ki, kl, page_size,
      std::span<std::int32_t>(batch.mutable_data(), static_cast<std::size_t>(tokens)),
      std::span<std::int32_t>(positions.mutable_data(), static_cast<std::size_t>(tokens)));
  return py::make_tuple(batch, positions);
}

}  // namespace

void bind_kv_cache(py::module_& m) {
  m.def("_append_positions", &append_positions_of, py::arg("append_indptr"), py::arg("kv_indptr"),
        py::arg("kv_last_page_len"), py::arg("page_size"));
  m.def("_append_kv_cache", &append_kv, py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("key_cache"), py::arg("value_cache"), py::arg("positions"), py::arg("spec"),
        py::arg("layout"), py::arg("slot_mapping"), py::arg("kv_indptr"), py::arg("kv_indices"),
        py::arg("kv_last_page_len"), py::arg("batch_indices"), py::arg("kv_positions"),
        py::arg("k_scale"), py::arg("v_scale"), py::arg("rotate"), py::arg("k_in_place"),
        py::arg("numerics"), py::arg("seq_len"), py::arg("head_size"), py::arg("threads"),
        py::arg("bf16"));
}

}  // namespace posenc::python
