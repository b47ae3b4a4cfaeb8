// tests/support/matchers.h: the matchers the tests share (test-only).
#pragma once

#include <gmock/gmock.h>

#include <string>
#include <string_view>
#include <vector>

namespace posenc::testing {

// A warning that contains both parts.
inline ::testing::Matcher<const std::vector<std::string>&> HasWarning(std::string_view a,
                                                                      std::string_view b = "") {
  return ::testing::Contains(
      ::testing::AllOf(::testing::HasSubstr(std::string(a)), ::testing::HasSubstr(std::string(b))));
}

}  // namespace posenc::testing
