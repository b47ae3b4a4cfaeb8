// src/analysis/doctor_mrope.h: the M-RoPE pitfalls of doctor (posenc/analysis/doctor.h) and the
// notes compare adds to each engine's view of a multi-axis spec (internal).
#pragma once

#include <string_view>
#include <vector>

#include "posenc/analysis/doctor.h"
#include "posenc/analysis/engines.h"
#include "posenc/io/config.h"

namespace posenc::mrope_doctor {

// Appends mrope-bf16-cache, mrope-position-rule, mrope-fractional-seconds, mrope-yarn and
// imrope-fourth-axis, each only for the models it concerns.
void add_findings(const ModelConfig& config, const DoctorOptions& options, const Comparison& cmp,
                  std::vector<Finding>& out);

// The M-RoPE notes of one engine's view (vLLM's bf16 cache, llama.cpp's IMROPE fourth axis,
// YaRN with M-RoPE; for a VL model_type the position rule the engine follows); nothing for a
// one-axis spec.
void add_engine_notes(const RopeSpec& spec, std::string_view model_type, EngineView& view);

// llama.cpp's IMROPE axis of pair j (ggml_mrope_cache_init with is_imrope, sections
// [s_t, s_h, s_w, 0] repeated over sum(sections)): 0 t, 1 h, 2 w, 3 e.
int ggml_imrope_axis(const AxisMap& map, std::int64_t pair);

}  // namespace posenc::mrope_doctor
