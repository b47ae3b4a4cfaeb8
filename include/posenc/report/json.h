// posenc/report/json.h: the JSON objects `posenc inspect`, `posenc compare` and `posenc doctor`
// print with --json, as text (the tool and the Python bindings both print these).
//
// Each returns the object as nlohmann::json's dump(2) writes it (keys sorted, two-space indent),
// without a trailing newline. NaN and infinity are written as null; text that is not UTF-8 (a
// file name) has U+FFFD for each bad byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/analysis/doctor.h"
#include "posenc/core/numerics.h"
#include "posenc/io/config.h"

namespace posenc {

// `posenc inspect --json`: source, model_type, the encoding (rope_type, numerics, seq_len,
// head_dim, rotary_dim, rotary_offset, layout, attention_factor, softmax_scale_multiplier), the
// spec's scalars and contexts, inv_freq, freq_factors, correction_range (yarn), pairs (one object
// per pair_rows() row), warnings, ignored_keys, layer_types, and for per-layer models "layers"
// (layer_groups(): type, rope, layers), Llama 4's "attention", Qwen2.5-1M's "dual_chunk".
// `layer`: the object is labelled as that layer's ("layer", "layer_type", "rope"), whose RoPE
// config.spec must hold (layer_spec() gives it); a layer without RoPE gets no encoding keys; `dca_position`: "dual_chunk.positions" of that token. Throws Error for a
// negative seq_len, an invalid spec, a layer out of range or a dca_position without dual chunk.
std::string inspect_json(const ModelConfig& config, Numerics numerics, std::int64_t seq_len = 0,
                         std::optional<std::int64_t> layer = std::nullopt,
                         std::optional<std::int64_t> dca_position = std::nullopt);

// `posenc compare --json`: source, model_type, rope_type, seq_len, positions, reference, and
// engines (per engine: inv_freq, relative_difference, rounding_budget, the scalars,
// cos_sin_difference per position, notes, verdict, verdict_text). `positions` empty: the
// defaults. Throws Error as compare_engines() does.
std::string compare_json(const ModelConfig& config, std::int64_t seq_len = 0,
                         const std::vector<std::int64_t>& positions = {});

// `posenc doctor --json`: source, model_type, rope_type, findings (id, severity, title, detail,
// advice, in diagnose()'s order) and counts (error, warning, info).
// With `options`: the M-RoPE position checks' vision settings and layout (doctor.h).
std::string doctor_json(const ModelConfig& config);
std::string doctor_json(const ModelConfig& config, const DoctorOptions& options);

}  // namespace posenc
