// transformers' reading of a RopeSpec: modeling_rope_utils.py ROPE_INIT_FUNCTIONS, float32 (kHf).
// The rules come from the engine's sources, cited where applied; docs/engines.md collects them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "analysis/engines/engines_internal.h"
#include "core/ggml_model.h"
#include "core/max_nan.h"
#include "core/methods.h"
#include "posenc/analysis/engines.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/ggml.h"
#include "util/format.h"

namespace posenc::engines_detail {
namespace {}  // namespace

EngineView transformers_view(const RopeSpec& spec, std::int64_t seq_len) {
  EngineView v;
  v.engine = Engine::kTransformers;
  v.freqs = compute_frequencies(spec, Numerics::kHf, seq_len);
  finish(v, seq_len);
  const std::string values = "; the values are posenc's float32 emulation";
  if (const EngineSupport& e = method_info(spec).transformers; !e.supported) {
    mark_unsupported(v, std::string(e.reason) + values);
  }
  switch (spec.method) {
    case Method::kYarn:
      if (spec.yarn.mscale_all_dim && *spec.yarn.mscale_all_dim != 0.0) {
        v.notes.push_back(
            "the softmax-scale multiplier g(s, mscale_all_dim)^2 is applied by the "
            "DeepSeek attention classes (DeepseekV3Attention), not by other models");
      }
      break;
    case Method::kDynamic:
      v.notes.push_back(
          "recomputes inv_freq in the forward pass once seq_len exceeds "
          "max_position_embeddings (dynamic_rope_update); keys already in the KV cache "
          "keep the rotation they were stored with");
      break;
    case Method::kLongrope:
      v.notes.push_back(
          "switches the whole sequence to the long factors once seq_len exceeds "
          "original_max_position_embeddings (longrope_frequency_update); cached keys "
          "keep the short rotation");
      break;
    case Method::kNone:
    case Method::kLinear:
    case Method::kNtk:
    case Method::kDynamicYarn:
    case Method::kLlama3:
    case Method::kProportional:
    case Method::kNtkAlpha:
      break;
  }
  return v;
}

}  // namespace posenc::engines_detail
