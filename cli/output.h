// cli/output.h: what every command writes besides its own report: warnings on stderr, and an
// output that goes to a file (-o PATH) or to stdout (-o -).
#pragma once

#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "output_file.h"

namespace posenc::cli {

// "posenc: warning: MESSAGE" on stderr.
inline void warn(std::string_view message) { std::cerr << "posenc: warning: " << message << "\n"; }
inline void warn_all(const std::vector<std::string>& messages) {
  for (const std::string& m : messages) warn(m);
}

// `contents` to stdout when `path` is "-", else to the file (whole, write_output_file). Returns
// whether a file was written, for the command's "wrote PATH" line.
inline bool write_output(const std::string& flag, const std::string& path,
                         std::string_view contents) {
  if (path == "-") {
    std::cout << contents;
    return false;
  }
  write_output_file(flag, path, contents);
  return true;
}

}  // namespace posenc::cli
