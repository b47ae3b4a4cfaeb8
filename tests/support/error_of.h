// tests/support/error_of.h: what an error says, and a matcher for what it must name (test-only).
#pragma once

#include <gmock/gmock.h>

#include <concepts>
#include <string>
#include <string_view>
#include <utility>

#include "posenc/core/error.h"

namespace posenc::testing {

// The message of the posenc::Error that `f()` throws; "(no error)" when it throws none.
template <std::invocable F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const posenc::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Matches a message that names `field` and shows `value`.
inline ::testing::Matcher<const std::string&> Names(std::string_view field,
                                                    std::string_view value) {
  return ::testing::AllOf(::testing::HasSubstr(std::string(field)),
                          ::testing::HasSubstr(std::string(value)));
}

}  // namespace posenc::testing
