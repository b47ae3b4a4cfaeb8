// tests/support/config_test_support.h: what the config.json tests share (test-only).
#pragma once

#include <string>
#include <string_view>

#include "posenc/core/error.h"
#include "posenc/io/config.h"
#include "support/error_of.h"
#include "support/matchers.h"

namespace posenc::testing {

inline std::string config_path(std::string_view file) {
  return std::string(POSENC_SHARED_DIR) + "/testdata/hf-configs/" + std::string(file);
}

// The message of the posenc::Error that parsing `json` throws; "(no error)" when none.
inline std::string config_error_of(std::string_view json) {
  return error_of([&] { parse_hf_config(json); });
}

}  // namespace posenc::testing
