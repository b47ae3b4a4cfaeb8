// tests/support/temp_files.h: a scratch folder per test binary and process, and files in it
// (test-only).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace posenc_test {

// <temp>/<tag>_<pid>, created on first use.
inline std::filesystem::path temp_dir(const std::string& tag) {
  const auto dir =
      std::filesystem::temp_directory_path() / (tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes `bytes` to <temp_dir(tag)>/<name>; returns the path.
inline std::string write_temp_file(const std::string& tag, const std::string& name,
                                   const std::string& bytes) {
  const auto path = temp_dir(tag) / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

}  // namespace posenc_test
