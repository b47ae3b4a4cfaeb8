// Text metrics and wrapping for the SVG writer (svg_internal.h). Widths are estimates: DejaVu
// Sans, the widest common fallback, averages about 0.6 em per character, so they err on the
// side of room.
#include <algorithm>

#include "report/svg_internal.h"

namespace posenc::svg::detail {

std::size_t code_points(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

double text_width(std::string_view s, double font_size) {
  return static_cast<double>(code_points(s)) * font_size * kCharWidth;
}

// Greedy word wrap to `width` px; explicit '\n' starts a new line.
std::vector<std::string> wrap(std::string_view text, double width, double font_size) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view paragraph = text.substr(start, end - start);
    std::string line;
    std::size_t pos = 0;
    while (pos < paragraph.size()) {
      std::size_t next = paragraph.find(' ', pos);
      if (next == std::string_view::npos) next = paragraph.size();
      const std::string_view word = paragraph.substr(pos, next - pos);
      const std::string candidate =
          line.empty() ? std::string(word) : line + " " + std::string(word);
      if (!line.empty() && text_width(candidate, font_size) > width) {
        lines.push_back(line);
        line = std::string(word);
      } else {
        line = candidate;
      }
      pos = next + 1;
    }
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

}  // namespace posenc::svg::detail
