// tests/support/cli_expect.h: what every refused command line must show (GoogleTest checks).
#pragma once

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/cli_runner.h"

namespace posenc_cli {

// Exit status 1, "posenc: error: " on stderr with each of `words`, never an internal error.
inline void expect_refused(const CliRun& r, const std::vector<std::string>& words,
                           const std::string& args) {
  using ::testing::HasSubstr;
  using ::testing::Not;
  EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
  EXPECT_THAT(r.err, HasSubstr("posenc: error: ")) << args;
  for (const std::string& w : words) EXPECT_THAT(r.err, HasSubstr(w)) << args;
  EXPECT_THAT(r.err, Not(HasSubstr("internal error"))) << args;
}

}  // namespace posenc_cli
