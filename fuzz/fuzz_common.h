// fuzz/fuzz_common.h: what both fuzz targets do with a spec that parsed.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/numerics.h"
#include "posenc/core/spec.h"

namespace posenc::fuzz {

// compute_frequencies allocates a few doubles per pair. Both parsers validate() the spec, which
// refuses head_dim > kMaxHeadDim (spec.h) and rotary dims beyond head_dim; this
// guard repeats that bound so that a spec reaching here unvalidated is not an out-of-memory
// report instead of a finding. Real heads are at most a few hundred dims.
inline constexpr std::int64_t kMaxDims = kMaxHeadDim;

// Frequencies in every numeric convention, at initialisation and just past the original
// context (where dynamic methods and LongRoPE change). posenc::Error is the only exception
// allowed out; anything else escapes to libFuzzer as a finding.
inline void exercise(const RopeSpec& spec) {
  if (spec.head_dim > kMaxDims || spec.rotary_dim > kMaxDims) return;
  const std::int64_t past = spec.original_max_position_embeddings > 0 &&
                                    spec.original_max_position_embeddings < (std::int64_t{1} << 40)
                                ? spec.original_max_position_embeddings + 1
                                : 0;
  for (Numerics numerics : {Numerics::kPrecise, Numerics::kHf, Numerics::kGgml}) {
    for (std::int64_t seq_len : {std::int64_t{0}, past}) {
      try {
        const Frequencies f = compute_frequencies(spec, numerics, seq_len);
        (void)f;
      } catch (const Error&) {
      }
    }
  }
}

}  // namespace posenc::fuzz
