// cli/output_file.h: output files are written whole or not at all. Each is written to a temporary
// file next to its target and renamed over it once every output of the command was written, so
// a failure (a full disk, a missing folder, a second output that cannot be written) leaves the
// targets as they were. Errors name the option, the path and the system's reason.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/error.h"

namespace posenc::cli {

class StagedOutputs {
 public:
  StagedOutputs() = default;
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;
  ~StagedOutputs() {
    for (const Entry& e : entries_) std::remove(e.temp.c_str());
  }

  // Calls write(temporary path) for `path` (the target of option `flag`); write throws Error on
  // failure. Nothing appears at `path` before commit().
  void stage(const std::string& flag, const std::string& path,
             const std::function<void(const std::string&)>& write) {
    Entry e{flag, path, path + ".posenc-tmp." + std::to_string(::getpid())};
    entries_.push_back(e);
    try {
      write(e.temp);
    } catch (const Error& err) {
      throw Error(flag + ": cannot write " + path + ": " + err.what());
    }
  }

  // `contents` as the file's bytes.
  void stage_text(const std::string& flag, const std::string& path, std::string_view contents) {
    stage(flag, path, [&](const std::string& temp) {
      std::ofstream out(temp, std::ios::binary | std::ios::trunc);
      if (!out) throw Error(std::strerror(errno));
      out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
      out.close();
      if (!out) throw Error(std::strerror(errno));
    });
  }

  // Renames every staged file over its target.
  void commit() {
    for (Entry& e : entries_) {
      if (std::rename(e.temp.c_str(), e.path.c_str()) != 0) {
        throw Error(e.flag + ": cannot write " + e.path + ": " + std::strerror(errno));
      }
      e.temp.clear();
    }
    entries_.clear();
  }

 private:
  struct Entry {
    std::string flag, path, temp;
  };
  std::vector<Entry> entries_;
};

// Writes `contents` to `path` whole (through a temporary file), for option `flag`.
inline void write_output_file(const std::string& flag, const std::string& path,
                              std::string_view contents) {
  StagedOutputs out;
  out.stage_text(flag, path, contents);
  out.commit();
}

}  // namespace posenc::cli
