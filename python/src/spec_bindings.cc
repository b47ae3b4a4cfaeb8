// RopeSpec and Frequencies for Python: parsing (config.json, GGUF, presets), the computed
// frequencies as numpy arrays, and the JSON reports of inspect, compare and doctor.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <optional>
#include <string>

#include "bindings.h"
#include "posenc/core/error.h"
#include "posenc/io/gguf.h"
#include "posenc/io/model.h"
#include "posenc/io/presets.h"
#include "posenc/io/vision_config.h"
#include "posenc/report/json.h"

namespace posenc::python {
namespace {

py::array_t<double> to_numpy(const std::vector<double>& v) {
  py::array_t<double> a(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

std::int64_t seq_len_arg(const std::optional<std::int64_t>& seq_len) {
  if (seq_len && *seq_len < 0) {
    throw py::value_error("seq_len (" + std::to_string(*seq_len) + ") must not be negative");
  }
  return seq_len.value_or(0);
}

std::string spec_repr(const Spec& s) {
  const RopeSpec& r = s.rope();
  std::string out = "RopeSpec(rope_type=" + method_name(r) +
                    ", head_dim=" + std::to_string(r.head_dim) +
                    ", rotary_dim=" + std::to_string(r.rotary_dim) +
                    ", layout=" + std::string(layout_name(r.layout));
  out += ", rope_theta=" + py::repr(py::float_(r.rope_theta)).cast<std::string>();
  if (r.method != Method::kNone) {
    out += ", factor=" + py::repr(py::float_(r.factor)).cast<std::string>();
  }
  return out + ", source=" + py::repr(py::str(s.config().source)).cast<std::string>() + ")";
}

}  // namespace

Spec::Spec(ModelConfig config) : config_(std::move(config)) { validate(config_.spec); }

std::shared_ptr<Frequencies> Spec::frequencies(Numerics numerics, std::int64_t seq_len) const {
  if (!depends_on_length(config_.spec)) seq_len = 0;
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->numerics == numerics && it->seq_len == seq_len) {
      Entry hit = *it;
      cache_.erase(it);
      cache_.push_back(hit);
      return hit.freqs;
    }
  }
  auto f = std::make_shared<Frequencies>(compute_frequencies(config_.spec, numerics, seq_len));
  if (cache_.size() == kCacheSize) cache_.erase(cache_.begin());
  cache_.push_back({numerics, seq_len, f});
  return f;
}

Numerics numerics_arg(const std::string& name, const std::string& field) {
  return parse_numerics(name, field);  // posenc::Error: ValueError through the translator
}

void bind_spec(py::module_& m) {
  using FreqPtr = std::shared_ptr<Frequencies>;
  py::class_<Frequencies, FreqPtr>(m, "Frequencies",
                                   "A RopeSpec turned into numbers in one numeric convention.")
      .def_property_readonly(
          "inv_freq", [](const Frequencies& f) { return to_numpy(f.inv_freq); },
          "w_i per pair (numpy float64; float32 conventions widened exactly)")
      .def_property_readonly("unscaled_inv_freq",
                             [](const Frequencies& f) { return to_numpy(f.unscaled_inv_freq); })
      .def_property_readonly("interpolation_weight",
                             [](const Frequencies& f) { return to_numpy(f.interpolation_weight); })
      .def_readonly("attention_factor", &Frequencies::attention_factor)
      .def_readonly("softmax_scale_multiplier", &Frequencies::softmax_scale_multiplier)
      .def_readonly("scale", &Frequencies::scale)
      .def_readonly("base", &Frequencies::base)
      .def_readonly("seq_len", &Frequencies::seq_len)
      .def_readonly("uses_long_factors", &Frequencies::uses_long_factors)
      .def_property_readonly(
          "numerics", [](const Frequencies& f) { return std::string(numerics_name(f.numerics)); })
      .def_property_readonly("rope_type", [](const Frequencies& f) { return method_name(f.spec); })
      .def_property_readonly("correction_range",
                             [](const Frequencies& f) -> py::object {
                               if (!f.correction_low) return py::none();
                               return py::make_tuple(*f.correction_low, *f.correction_high);
                             })
      .def_property_readonly("pair_count", &Frequencies::pair_count)
      .def("__repr__", [](const Frequencies& f) {
        return "Frequencies(rope_type=" + method_name(f.spec) +
               ", numerics=" + std::string(numerics_name(f.numerics)) +
               ", seq_len=" + std::to_string(f.seq_len) +
               ", pairs=" + std::to_string(f.pair_count()) + ", attention_factor=" +
               py::repr(py::float_(f.attention_factor)).cast<std::string>() + ")";
      });

  py::class_<Spec, std::shared_ptr<Spec>>(m, "RopeSpec",
                                          "A model's RoPE, parsed as the C++ library parses it.")
      .def_static(
          "_from_hf_json",
          [](const std::string& text, const std::string& source) {
            return std::make_shared<Spec>(parse_hf_config(text, source));
          },
          py::arg("text"), py::arg("source"))
      .def_static(
          "_load",
          [](const std::filesystem::path& path, const std::string& layer_type) {
            return std::make_shared<Spec>(load_model(path, layer_type));
          },
          py::arg("path"), py::arg("layer_type") = "")
      .def_static(
          "_from_gguf",
          [](const std::filesystem::path& path) {
            return std::make_shared<Spec>(load_gguf_model(path).config);
          },
          py::arg("path"))
      .def_static(
          "preset",
          [](const std::string& name) { return std::make_shared<Spec>(load_preset(name)); },
          py::arg("name"), "A named preset (posenc presets lists them), e.g. \"llama-2-7b\".")
      .def_static("presets",
                  [] {
                    std::vector<std::string> names;
                    for (const Preset& p : posenc::presets()) names.emplace_back(p.name);
                    return names;
                  })
      .def(
          "layer",
          [](const Spec& s, const std::string& layer_type) {
            ModelConfig c = s.config();
            select_layer_type(c, layer_type);
            return std::make_shared<Spec>(std::move(c));
          },
          py::arg("layer_type"), "The RoPE of one layer type of a per-layer config (layer_types).")
      .def(
          "_at_layer",
          [](const Spec& s, std::int64_t layer) {
            ModelConfig c = s.config();
            std::optional<RopeSpec> r;
            try {
              r = layer_spec(c, layer);
            } catch (const Error& e) {
              throw py::value_error(std::string("layer: ") + e.what());
            }
            if (!r) {
              throw py::value_error("layer (" + std::to_string(layer) + ") of " + c.source +
                                    " has no RoPE (NoPE): its queries and keys are not rotated");
            }
            c.spec = *r;
            return std::make_shared<Spec>(std::move(c));
          },
          py::arg("layer"))
      .def(
          "frequencies",
          [](const Spec& s, const std::string& numerics, std::optional<std::int64_t> seq_len) {
            return s.frequencies(numerics_arg(numerics), seq_len_arg(seq_len));
          },
          py::arg("numerics") = "precise", py::arg("seq_len") = py::none(),
          "Frequencies in a numeric convention at a sequence length (None: at initialisation).")
      .def_property_readonly("rope_type", [](const Spec& s) { return method_name(s.rope()); })
      .def_property_readonly("head_dim", [](const Spec& s) { return s.rope().head_dim; })
      .def_property_readonly("rotary_dim", [](const Spec& s) { return s.rope().rotary_dim; })
      .def_property_readonly("rotary_offset", [](const Spec& s) { return s.rope().rotary_offset; })
      .def_property_readonly(
          "layout", [](const Spec& s) { return std::string(layout_name(s.rope().layout)); })
      .def_property_readonly("rope_theta", [](const Spec& s) { return s.rope().rope_theta; })
      .def_property_readonly("factor", [](const Spec& s) { return s.rope().factor; })
      .def_property_readonly(
          "original_max_position_embeddings",
          [](const Spec& s) { return s.rope().original_max_position_embeddings; })
      .def_property_readonly("max_position_embeddings",
                             [](const Spec& s) { return s.rope().max_position_embeddings; })
      .def_property_readonly("depends_on_seq_len",
                             [](const Spec& s) { return depends_on_length(s.rope()); })
      .def_property_readonly("source", [](const Spec& s) { return s.config().source; })
      .def_property_readonly("model_type", [](const Spec& s) { return s.config().model_type; })
      .def_property_readonly("warnings", [](const Spec& s) { return s.config().warnings; })
      .def_property_readonly("ignored_keys", [](const Spec& s) { return s.config().ignored_keys; })
      .def_property_readonly("layer_types",
                             [](const Spec& s) {
                               std::vector<std::string> names;
                               for (const auto& kv : s.config().layer_specs)
                                 names.push_back(kv.first);
                               return names;
                             })
      .def("__repr__", &spec_repr);

  // The commands' --json, as text the Python layer turns into dicts (json.loads).
  m.def(
      "_inspect_json",
      [](const Spec& s, const std::string& numerics, std::int64_t seq_len) {
        return inspect_json(s.config(), numerics_arg(numerics), seq_len);
      },
      py::arg("spec"), py::arg("numerics"), py::arg("seq_len"));
  m.def(
      "_compare_json",
      [](const Spec& s, std::int64_t seq_len, const std::vector<std::int64_t>& positions) {
        return compare_json(s.config(), seq_len, positions);
      },
      py::arg("spec"), py::arg("seq_len"), py::arg("positions"));
  m.def(
      "_doctor_json",
      [](const Spec& s, const std::string& layout) {
        DoctorOptions o;
        if (!layout.empty()) o.layout = parse_mrope_layout(layout);
        return doctor_json(s.config(), o);
      },
      py::arg("spec"), py::arg("layout") = "");
  // posenc.mrope_positions: position_ids [3, 1, tokens] and rope_deltas [1, 1], int64, as
  // transformers' get_rope_index returns them for one prompt. `config` is a path (is_path) or
  // config.json text.
  m.def(
      "_mrope_positions",
      [](const std::string& config, bool is_path, const std::string& layout,
         const std::string& rule) {
        const MropeRule r = parse_mrope_rule(rule);
        const std::vector<MropeSegment> segments = parse_mrope_layout(layout);
        const VisionConfig v = is_path ? load_vision_config(std::filesystem::path(config))
                                       : parse_vision_config(config, "<dict>");
        const MropePositions p = mrope_positions(segments, v.vision, r);
        const py::ssize_t n = p.tokens();
        py::array_t<std::int64_t> ids({py::ssize_t{3}, py::ssize_t{1}, n});
        for (std::size_t a = 0; a < 3; ++a) {
          std::copy(p.ids[a].begin(), p.ids[a].end(),
                    ids.mutable_data() + static_cast<py::ssize_t>(a) * n);
        }
        py::array_t<std::int64_t> deltas({py::ssize_t{1}, py::ssize_t{1}});
        *deltas.mutable_data() = p.rope_deltas;
        return py::make_tuple(ids, deltas, v.warnings);
      },
      py::arg("config"), py::arg("is_path"), py::arg("layout"), py::arg("rule"));
}

}  // namespace posenc::python
