// tests/support/cli_runner.h: runs the posenc tool with stdout and stderr captured separately, for
// the CLI tests (test-only).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace posenc_cli {

struct CliRun {
  int status = -1;  // exit status; -1 if the process did not exit normally
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `<env> <posenc> <args>` (env: "" or assignments such as "POSENC_SIMD_TARGET=AVX2"); `tag`
// names the scratch folder (one per test binary and process).
inline CliRun run(const std::string& posenc, const std::string& args, const std::string& tag,
                  const std::string& env = "") {
  const auto dir =
      std::filesystem::temp_directory_path() / (tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cmd = (env.empty() ? "" : env + " ") + posenc + " " + args + " >" +
                          (dir / "out").string() + " 2>" + (dir / "err").string();
  CliRun r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

}  // namespace posenc_cli
