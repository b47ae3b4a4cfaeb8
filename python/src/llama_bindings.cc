// posenc::llama for Python (posenc.llama, posenc.finetune): the v1 model file, its tokenizer, the
// C++ forward pass's logits and `posenc eval`'s perplexity protocol, so that the PyTorch model is
// checked against, and evaluated by, the one C++ implementation.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.h"
#include "posenc/core/error.h"
#include "posenc/core/method_params.h"
#include "posenc/core/threads.h"
#include "posenc/llama/llama.h"
#include "posenc/llama/perplexity.h"

namespace posenc::python {
namespace {

using ModelPtr = std::shared_ptr<llama::Model>;
using Tokens = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

std::span<const std::int32_t> token_span(const Tokens& tokens) {
  if (tokens.ndim() != 1) {
    throw py::value_error("tokens: expected a 1-D sequence of token ids, got " +
                          std::to_string(tokens.ndim()) + " dims");
  }
  return {tokens.data(), static_cast<std::size_t>(tokens.size())};
}

// {"beta_fast": 16, "truncate": False, ...} (posenc/core/method_params.h's keys; None: the
// method's default) as RopeParams. An unknown key is an error, never dropped.
MethodParams method_params_of(const std::optional<py::dict>& d) {
  MethodParams p;
  if (!d) return p;
  for (const auto& [k, v] : *d) {
    const std::string key = py::str(k);
    const MethodParamInfo& info = method_param_info(key);
    if (v.is_none()) continue;
    const bool is_bool = py::isinstance<py::bool_>(v);
    if (info.number) {
      if (is_bool || !(py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)))
        throw py::type_error(key + ": expected a number, got " +
                             std::string(py::str(py::type::of(v).attr("__name__"))));
      p.*info.number = v.cast<double>();
    } else {
      if (!is_bool)
        throw py::type_error(key + ": expected True or False, got " +
                             std::string(py::str(py::type::of(v).attr("__name__"))));
      p.truncate = v.cast<bool>();
    }
  }
  return p;
}

// The model's RoPE for `method` and factor with the method's parameters (eval's flags, refused as
// eval refuses them for methods that do not read them).
std::shared_ptr<Spec> llama_spec(const llama::Config& config, const std::string& method,
                                 double factor, const std::optional<py::dict>& params,
                                 ParamNames names = ParamNames::kKeys) {
  if (!(factor > 0)) throw Error("factor (" + std::to_string(factor) + ") must be positive");
  RopeSpec spec = llama::rope_spec(config, method, factor);
  apply_method_params(spec, method_params_of(params), names, "method " + method);
  ModelConfig c;
  c.source = "llama " + method;
  c.model_type = "llama";
  c.spec = spec;
  return std::make_shared<Spec>(std::move(c));
}

py::dict config_dict(const llama::Config& c) {
  py::dict d;
  d["dim"] = c.dim;
  d["hidden_dim"] = c.hidden_dim;
  d["n_layers"] = c.layers;
  d["n_heads"] = c.heads;
  d["n_kv_heads"] = c.kv_heads;
  d["vocab_size"] = c.vocab_size;
  d["seq_len"] = c.max_seq_len;
  d["tied_output"] = c.tied_output;
  d["rope_theta"] = c.rope_theta;
  return d;
}

llama::Config config_of(std::int64_t dim, std::int64_t n_heads, std::int64_t seq_len,
                        double rope_theta) {
  llama::Config c;
  c.dim = dim;
  c.heads = n_heads;
  c.kv_heads = n_heads;
  c.max_seq_len = seq_len;
  c.rope_theta = rope_theta;
  if (n_heads < 1 || dim % n_heads != 0 || (dim / n_heads) % 2 != 0) {
    throw Error("dim (" + std::to_string(dim) + ") must be a positive multiple of n_heads (" +
                std::to_string(n_heads) + ") with an even head dim");
  }
  return c;
}

}  // namespace

void bind_llama(py::module_& m) {
  py::class_<llama::Model, ModelPtr>(m, "_LlamaModel",
                                     "a llama2.ts v1 model file, as `posenc eval` reads it")
      .def_static(
          "load",
          [](const std::string& path) {
            py::gil_scoped_release release;
            return std::make_shared<llama::Model>(llama::Model::load(path));
          },
          py::arg("path"))
      .def_static(
          "parse",
          [](const py::bytes& data, const std::string& name) {
            const std::string_view bytes = data;
            const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
            return std::make_shared<llama::Model>(llama::Model::parse({p, bytes.size()}, name));
          },
          py::arg("data"), py::arg("name"))
      .def_property_readonly("config",
                             [](const llama::Model& model) { return config_dict(model.config()); })
      .def(
          "rope_spec",
          [](const llama::Model& model, const std::string& method, double factor,
             const std::optional<py::dict>& params) {
            return llama_spec(model.config(), method, factor, params);
          },
          py::arg("method") = "none", py::arg("factor") = 1.0, py::arg("params") = py::none())
      .def(
          "encode",
          [](const llama::Model& model, const std::string& text) {
            py::gil_scoped_release release;
            return model.tokenizer().encode(text);
          },
          py::arg("text"))
      .def(
          "decode",
          [](const llama::Model& model, const std::vector<std::int32_t>& ids) {
            for (std::int32_t id : ids) {
              if (id < 0 || id >= model.tokenizer().size()) {
                throw Error("decode: token id " + std::to_string(id) + " is outside [0, " +
                            std::to_string(model.tokenizer().size()) + ")");
              }
            }
            return py::bytes(model.tokenizer().decode(ids));
          },
          py::arg("ids"))
      .def_property_readonly("bos_id",
                             [](const llama::Model& model) { return model.tokenizer().bos_id(); })
      .def_property_readonly("eos_id",
                             [](const llama::Model& model) { return model.tokenizer().eos_id(); })
      .def(
          "logits",
          [](const llama::Model& model, const Tokens& tokens, const Spec& spec,
             const std::string& numerics, int threads, std::int64_t step) {
            const std::span<const std::int32_t> ids = token_span(tokens);
            llama::SessionOptions o;
            o.rope = spec.rope();
            o.numerics = numerics_arg(numerics);
            o.capacity = std::max<std::int64_t>(1, static_cast<std::int64_t>(ids.size()));
            o.threads = threads;
            o.step = step;
            const std::int64_t vocab = model.config().vocab_size;
            py::array_t<float> out(
                {static_cast<py::ssize_t>(ids.size()), static_cast<py::ssize_t>(vocab)});
            float* data = out.mutable_data();
            {
              py::gil_scoped_release release;
              llama::Session session(model, std::move(o));
              session.forward(ids, {data, ids.size() * static_cast<std::size_t>(vocab)});
            }
            return out;
          },
          py::arg("tokens"), py::arg("spec"), py::arg("numerics") = "precise",
          py::arg("threads") = 1, py::arg("step") = 64,
          "The C++ forward pass (llama::Session) over tokens at positions 0 .. n-1 from an empty "
          "cache: float32 logits [n, vocab]")
      .def(
          "perplexity",
          [](const llama::Model& model, const Tokens& tokens, const Spec& spec, std::int64_t ctx,
             std::int64_t max_tokens, std::int64_t stride, int threads, std::int64_t step,
             const std::string& numerics) {
            const std::span<const std::int32_t> ids = token_span(tokens);
            llama::PerplexityOptions o;
            o.ctx = ctx;
            o.max_tokens = max_tokens;
            o.stride = stride;
            o.threads = threads;
            o.step = step;
            o.numerics = numerics_arg(numerics);
            llama::PerplexityResult r;
            {
              py::gil_scoped_release release;
              r = llama::perplexity(model, spec.rope(), ids, o);
            }
            py::dict d;
            d["ctx"] = ctx;
            d["windows"] = r.windows;
            d["tokens_run"] = r.tokens_run;
            d["tokens_scored"] = r.tokens_scored;
            d["nll"] = r.tokens_scored ? r.nll_sum / static_cast<double>(r.tokens_scored) : NAN;
            d["perplexity"] = r.perplexity;
            d["seconds"] = r.seconds;
            d["rerotations"] = r.rerotations;
            return d;
          },
          py::arg("tokens"), py::arg("spec"), py::arg("ctx"), py::arg("max_tokens") = 131072,
          py::arg("stride") = 0, py::arg("threads") = 1, py::arg("step") = 64,
          py::arg("numerics") = "precise",
          "`posenc eval`'s protocol (posenc/llama/perplexity.h) over the token ids");

  m.def(
      "_llama_rope_spec",
      [](std::int64_t dim, std::int64_t n_heads, std::int64_t seq_len, double rope_theta,
         const std::string& method, double factor, const std::optional<py::dict>& params,
         bool flag_names) {
        return llama_spec(config_of(dim, n_heads, seq_len, rope_theta), method, factor, params,
                          flag_names ? ParamNames::kFlags : ParamNames::kKeys);
      },
      py::arg("dim"), py::arg("n_heads"), py::arg("seq_len"), py::arg("rope_theta"),
      py::arg("method"), py::arg("factor") = 1.0, py::arg("params") = py::none(),
      py::arg("flag_names") = false,
      "Model::rope_spec for a model of this configuration (llama::rope_spec), with the "
      "method's parameters (a dict of posenc/core/method_params.h's keys); errors name them as "
      "keys, or as flags (--beta-fast) with flag_names");
  m.def(
      "_method_params",
      [] {
        py::list rows;
        for (const MethodParamInfo& info : method_param_table()) {
          rows.append(py::make_tuple(std::string(info.key), std::string(info.flag), info.positive,
                                     info.number == nullptr, methods_reading(info.param)));
        }
        return rows;
      },
      "posenc/core/method_params.h's table: (key, flag, positive, boolean, read by) per "
      "parameter");
  m.def(
      "_reads_factor", [](const Spec& spec) { return method_reads(spec.rope(), kParamFactor); },
      py::arg("spec"),
      "Whether the spec's method reads a factor (eval refuses --factor otherwise)");
}

}  // namespace posenc::python
