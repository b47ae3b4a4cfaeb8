// tests/support/spec_builder.h: the one way tests build a RopeSpec by hand (test-only).
#pragma once

#include <cstdint>

#include "posenc/core/spec.h"

namespace posenc::testing {

// `method` over a head of `head_dim`, all of it rotated (D = d_h), base `theta`, factor s, the
// contexts L (`original`) and L' (`max_pos`); 0 leaves a context unset, as RopeSpec's defaults do.
inline RopeSpec make_spec(Method method = Method::kNone, std::int64_t head_dim = 128,
                          double theta = 10000.0, double factor = 1.0, std::int64_t original = 0,
                          std::int64_t max_pos = 0) {
  RopeSpec spec;
  spec.method = method;
  spec.head_dim = head_dim;
  spec.rotary_dim = head_dim;
  spec.rope_theta = theta;
  spec.factor = factor;
  spec.original_max_position_embeddings = original;
  spec.max_position_embeddings = max_pos;
  return spec;
}

}  // namespace posenc::testing
