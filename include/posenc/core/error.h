// posenc/core/error.h: the one exception type posenc throws for invalid input.
//
// Every message names the field, the value and what was expected, for example
//   yarn: beta_fast (0.5) must be greater than beta_slow (1)
//   config.json: rope_scaling.factor ("x") must be a number
// Callers that prefer codes to exceptions catch `posenc::Error` at the boundary; the CLI does so
// and exits with status 1.
#pragma once

#include <stdexcept>
#include <string>

namespace posenc {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace posenc
