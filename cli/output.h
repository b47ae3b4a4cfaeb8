// cli/output.h: what every command writes besides its own report: warnings on stderr, and an
// output that goes to a file (-o PATH) or to stdout (-o -).
#pragma once

#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

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

// The rows of a [rows][width] cos/sin buffer, two lines per row ("    k cos ...", "      sin ..."),
// each value with 9 significant digits (a float32 read back exactly).
template <typename Values>
void print_cos_sin_rows(std::int64_t rows, std::int64_t width, const Values& cos,
                        const Values& sin) {
  for (std::int64_t k = 0; k < rows; ++k) {
    std::string c = fmt::format("{:>5} cos", k), s = "      sin";
    for (std::int64_t j = 0; j < width; ++j) {
      const auto i = static_cast<std::size_t>(k * width + j);
      c += fmt::format(" {:.9g}", cos[i]);
      s += fmt::format(" {:.9g}", sin[i]);
    }
    fmt::print("{}\n{}\n", c, s);
  }
}

}  // namespace posenc::cli
