// .npy reading and writing (npy.h), after numpy/lib/format.py: read_magic,
// _read_array_header (which requires exactly the keys descr, fortran_order and shape) and
// _write_array_header / _wrap_header (ARRAY_ALIGN 64, GROWTH_AXIS_MAX_DIGITS 21).
//
// The header is parsed with a small recursive-descent reader of just the literals a .npy header
// holds (a flat dict of str, bool and a tuple of int), never an evaluator, so hostile input costs
// time linear in its length and no allocation beyond it.
#include "posenc/io/npy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include "posenc/core/error.h"
#include "util/file_bytes.h"

namespace posenc {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kVersionBytes = 2;
constexpr std::int64_t kMaxDims = 64;             // NPY_MAXDIMS of NumPy 2
constexpr std::size_t kArrayAlign = 64;           // format.py ARRAY_ALIGN
constexpr std::size_t kGrowthAxisMaxDigits = 21;  // format.py GROWTH_AXIS_MAX_DIGITS
constexpr std::size_t kQuoteLimit = 40;           // characters of untrusted text shown in a message

struct DtypeInfo {
  std::string_view descr;
  std::size_t size;
  std::string_view what;
};

constexpr std::array<DtypeInfo, 5> kDtypes = {{
    {"<f4", 4, "float32"},
    {"<f2", 2, "float16"},
    {"<i4", 4, "int32"},
    {"<i8", 8, "int64"},
    {"<u2", 2, "uint16, also bfloat16 bits"},
}};

const DtypeInfo* find_dtype(std::string_view descr) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.descr == descr) return &d;
  }
  return nullptr;
}

std::string supported_list() {
  std::string s;
  for (const DtypeInfo& d : kDtypes) {
    s += (s.empty() ? "" : ", ") + std::string("'") + std::string(d.descr) + "' " +
         std::string(d.what);
  }
  return s;
}

// Untrusted text for a message: printable ASCII as is, other bytes as \xNN, cut short.
std::string quote(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= kQuoteLimit) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    s += std::to_string(shape[i]);
    if (shape.size() == 1) s += ",";
    if (i + 1 < shape.size()) s += ", ";
  }
  return s + ")";
}

// prod(shape) * item_size as a byte count, or nothing when it overflows int64. Like NumPy, the
// non-zero dims must multiply without overflow even when another dim is 0.
std::optional<std::int64_t> byte_count(std::span<const std::int64_t> shape, std::size_t item_size) {
  std::int64_t bytes = static_cast<std::int64_t>(item_size);
  bool zero = false;
  for (std::int64_t d : shape) {
    if (d == 0) {
      zero = true;
      continue;
    }
    if (__builtin_mul_overflow(bytes, d, &bytes)) return std::nullopt;
  }
  return zero ? 0 : bytes;
}

// Swaps each item between little-endian file order and native order (a no-op on x86 and Arm).
void to_native(std::span<std::byte> data, std::size_t item_size) {
  if constexpr (std::endian::native == std::endian::big) {
    for (std::size_t i = 0; i + item_size <= data.size(); i += item_size) {
      std::reverse(data.begin() + static_cast<std::ptrdiff_t>(i),
                   data.begin() + static_cast<std::ptrdiff_t>(i + item_size));
    }
  } else {
    (void)data;
    (void)item_size;
  }
}

struct Header {
  std::string descr;
  std::vector<std::int64_t> shape;
};

// Reads the dict literal of a .npy header.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  Header parse() {
    Header h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_space();
    if (!eat('{')) fail("is not a Python dict literal: expected '{', found " + found());
    skip_space();
    while (!eat('}')) {
      const std::size_t key_at = pos_;
      if (!at_quote()) fail("key must be a string, found " + found());
      const std::string key = parse_string();
      skip_space();
      if (!eat(':')) fail("expects ':' after key '" + quote(key) + "', found " + found());
      skip_space();
      bool* seen = key == "descr"           ? &seen_descr
                   : key == "fortran_order" ? &seen_order
                   : key == "shape"         ? &seen_shape
                                            : nullptr;
      if (seen == nullptr) {
        pos_ = key_at;
        fail("has an unknown key '" + quote(key) +
             "' (a .npy header holds exactly 'descr', "
             "'fortran_order' and 'shape')");
      }
      if (*seen) fail("has the key '" + key + "' twice");
      *seen = true;
      if (key == "descr") {
        if (!at_quote()) fail("'descr' must be a string, found " + found());
        h.descr = parse_string();
      } else if (key == "fortran_order") {
        if (parse_bool("fortran_order")) {
          fail(
              "'fortran_order' is True: only C-order arrays are supported (save "
              "np.ascontiguousarray(a) instead)");
        }
      } else {
        h.shape = parse_shape();
      }
      skip_space();
      if (eat(',')) {
        skip_space();
      } else if (peek() != '}') {
        fail("expects ',' or '}' after the value of '" + key + "', found " + found());
      }
    }
    skip_space();
    if (pos_ < text_.size()) fail("has text after the closing '}': " + found());
    for (auto [seen, key] : {std::pair{seen_descr, "descr"}, std::pair{seen_order, "fortran_order"},
                             std::pair{seen_shape, "shape"}}) {
      if (!seen) fail(std::string("has no '") + key + "' key");
    }
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(std::string(name_) + ": .npy header " + what + " (at character " +
                std::to_string(pos_) + ")");
  }

  static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool at_quote() const { return peek() == '\'' || peek() == '"'; }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  std::string found() const {
    return pos_ >= text_.size() ? std::string("the end of the header")
                                : "'" + quote(text_.substr(pos_)) + "'";
  }

  // A quoted string without escapes (no .npy writer emits any).
  std::string parse_string() {
    const char q = text_[pos_++];
    const std::size_t begin = pos_;
    while (pos_ < text_.size() && text_[pos_] != q) {
      if (text_[pos_] == '\\') fail("string has an escape sequence, which .npy headers never need");
      ++pos_;
    }
    if (pos_ >= text_.size()) {
      pos_ = begin - 1;
      fail("has an unterminated string " + found());
    }
    return std::string(text_.substr(begin, pos_++ - begin));
  }

  bool parse_bool(std::string_view key) {
    for (auto [word, value] :
         {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        const std::size_t end = pos_ + word.size();
        if (end < text_.size() &&
            (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
          break;
        pos_ = end;
        return value;
      }
    }
    fail("'" + std::string(key) + "' must be True or False, found " + found());
  }

  // A tuple of non-negative ints: (), (n,), (a, b), (a, b,). Python 2 era files write 3L.
  std::vector<std::int64_t> parse_shape() {
    if (peek() == '[') fail("'shape' must be a tuple, found a list " + found());
    if (!eat('(')) fail("'shape' must be a tuple of integers, found " + found());
    std::vector<std::int64_t> shape;
    bool trailing_comma = false;
    skip_space();
    while (!eat(')')) {
      if (static_cast<std::int64_t>(shape.size()) >= kMaxDims) {
        fail("'shape' has more than " + std::to_string(kMaxDims) + " dimensions");
      }
      shape.push_back(parse_dim());
      skip_space();
      trailing_comma = eat(',');
      skip_space();
      if (!trailing_comma && peek() != ')') fail("'shape' expects ',' or ')', found " + found());
    }
    if (shape.size() == 1 && !trailing_comma) {
      fail("'shape' (" + std::to_string(shape[0]) +
           ") is an integer in parentheses, not a tuple (write (" + std::to_string(shape[0]) +
           ",))");
    }
    return shape;
  }

  std::int64_t parse_dim() {
    const std::size_t begin = pos_;
    const bool negative = eat('-');
    if (!negative) eat('+');
    if (!std::isdigit(static_cast<unsigned char>(peek()))) {
      pos_ = begin;
      fail("'shape' must hold integers, found " + found());
    }
    std::int64_t v = 0;
    bool huge = false;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      huge = huge || __builtin_mul_overflow(v, 10, &v) ||
             __builtin_add_overflow(v, text_[pos_] - '0', &v);
      ++pos_;
    }
    if (peek() == 'L' || peek() == 'l') ++pos_;
    const std::string digits(text_.substr(begin, pos_ - begin));
    if (negative) {
      pos_ = begin;
      fail("'shape' has a negative dimension (" + quote(digits) + ")");
    }
    if (huge) {
      pos_ = begin;
      fail("'shape' has a dimension (" + quote(digits) + ") larger than 2^63 - 1");
    }
    return v;
  }

  std::string_view text_;
  std::string_view name_;
  std::size_t pos_ = 0;
};

// Where the data of a .npy buffer lies, after checking everything but the data's contents.
struct Layout {
  Header header;
  std::size_t item_size = 0;
  std::size_t data_offset = 0;
  std::size_t data_bytes = 0;
  std::vector<std::string> warnings;
};

std::uint32_t little_endian(std::span<const std::byte> b) {
  std::uint32_t v = 0;
  for (std::size_t i = b.size(); i-- > 0;) v = (v << 8) | std::to_integer<std::uint32_t>(b[i]);
  return v;
}

Layout parse_layout(std::span<const std::byte> bytes, std::string_view name) {
  const std::string n(name);
  constexpr std::size_t kPreamble = kMagic.size() + kVersionBytes;
  const std::string_view head(reinterpret_cast<const char*>(bytes.data()),
                              std::min(bytes.size(), kMagic.size()));
  if (head != kMagic) {
    const std::string looks =
        detail::foreign_format(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                         std::min<std::size_t>(bytes.size(), detail::kStartBytes)));
    throw Error(n + ": not a .npy file: it does not start with the magic \\x93NUMPY (found '" +
                quote(head) + "', " + std::to_string(bytes.size()) + " bytes in all)" +
                (looks.empty() ? "" : "; this is " + looks));
  }
  if (bytes.size() < kPreamble + 2) {
    throw Error(n + ": truncated .npy file: " + std::to_string(bytes.size()) +
                " bytes, shorter than the fixed preamble (10 bytes)");
  }
  const int major = std::to_integer<int>(bytes[6]), minor = std::to_integer<int>(bytes[7]);
  if (minor != 0 || major < 1 || major > 3) {
    throw Error(n + ": unsupported .npy format version " + std::to_string(major) + "." +
                std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  }
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < kPreamble + len_bytes) {
    throw Error(n + ": truncated .npy file: " + std::to_string(bytes.size()) +
                " bytes, the version " + std::to_string(major) + ".0 preamble needs " +
                std::to_string(kPreamble + len_bytes));
  }
  const std::size_t header_len = little_endian(bytes.subspan(kPreamble, len_bytes));
  Layout out;
  out.data_offset = kPreamble + len_bytes + header_len;
  if (header_len > bytes.size() - kPreamble - len_bytes) {
    throw Error(n + ": truncated .npy file: the header length field says " +
                std::to_string(header_len) + " bytes, but only " +
                std::to_string(bytes.size() - kPreamble - len_bytes) + " follow it");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + kPreamble + len_bytes,
                              header_len);
  out.header = HeaderParser(text, name).parse();
  const DtypeInfo* dtype = find_dtype(out.header.descr);
  if (dtype == nullptr) {
    throw Error(n + ": unsupported dtype descr '" + quote(out.header.descr) +
                "' (supported: " + supported_list() + ")");
  }
  out.item_size = dtype->size;
  const auto needed = byte_count(out.header.shape, out.item_size);
  if (!needed) {
    throw Error(n + ": shape " + shape_text(out.header.shape) + " of '" + out.header.descr +
                "' overflows: its size in bytes exceeds 2^63 - 1");
  }
  const std::size_t available = bytes.size() - out.data_offset;
  if (static_cast<std::uint64_t>(*needed) > available) {
    throw Error(n + ": truncated .npy data: shape " + shape_text(out.header.shape) + " of '" +
                out.header.descr + "' needs " + std::to_string(*needed) + " bytes, found " +
                std::to_string(available));
  }
  out.data_bytes = static_cast<std::size_t>(*needed);
  if (available > out.data_bytes) {
    out.warnings.push_back(n + ": " + std::to_string(available - out.data_bytes) +
                           " bytes after the array data were ignored");
  }
  return out;
}

std::string header_text(std::string_view descr, std::span<const std::int64_t> shape) {
  std::string h = "{'descr': '" + std::string(descr) +
                  "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Spare room so that the first axis can grow in place (format.py, NumPy >= 1.23).
  if (!shape.empty()) h.append(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');
  // format.py _wrap_header: padlen = 64 - (10 + len(header) + 1) % 64, which is 64, not 0, when
  // the header already ends on the boundary.
  const std::size_t unpadded = kMagic.size() + kVersionBytes + 2 + h.size() + 1;
  h.append(kArrayAlign - unpadded % kArrayAlign, ' ');
  return h + "\n";
}

}  // namespace

std::int64_t NpyArray::element_count() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::size_t npy_item_size(std::string_view descr) {
  const DtypeInfo* d = find_dtype(descr);
  if (d == nullptr) {
    throw Error("unsupported dtype descr '" + quote(descr) + "' (supported: " + supported_list() +
                ")");
  }
  return d->size;
}

NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view name) {
  Layout l = parse_layout(bytes, name);
  NpyArray a{std::move(l.header.descr), std::move(l.header.shape), {}, std::move(l.warnings)};
  const auto data = bytes.subspan(l.data_offset, l.data_bytes);
  a.data.assign(data.begin(), data.end());
  to_native(a.data, l.item_size);
  return a;
}

NpyArray read_npy(const std::filesystem::path& path) {
  // mmap for regular files (read() for pipes): the data is copied once, out of the mapping.
  const std::string name = path.string();
  const detail::FileBytes file(
      path,
      {kMaxStreamedNpyBytes, false, "a .npy file", [&name](std::span<const std::uint8_t> start) {
         if (start.size() >= kMagic.size() &&
             std::memcmp(start.data(), kMagic.data(), kMagic.size()) != 0) {
           parse_npy(std::as_bytes(start), name);  // throws: the magic
         }
       }});
  return parse_npy(std::as_bytes(file.bytes()), path.string());
}

std::vector<std::byte> npy_bytes(std::string_view descr, std::span<const std::int64_t> shape,
                                 std::span<const std::byte> data) {
  const DtypeInfo* dtype = find_dtype(descr);
  if (dtype == nullptr) {
    throw Error("write_npy: unsupported dtype descr '" + quote(descr) +
                "' (supported: " + supported_list() + ")");
  }
  if (static_cast<std::int64_t>(shape.size()) > kMaxDims) {
    throw Error("write_npy: shape has " + std::to_string(shape.size()) + " dimensions, more than " +
                std::to_string(kMaxDims));
  }
  for (std::int64_t d : shape) {
    if (d < 0) throw Error("write_npy: shape " + shape_text(shape) + " has a negative dimension");
  }
  const auto needed = byte_count(shape, dtype->size);
  if (!needed || static_cast<std::uint64_t>(*needed) != data.size()) {
    throw Error("write_npy: shape " + shape_text(shape) + " of '" + std::string(descr) +
                "' needs " +
                (needed ? std::to_string(*needed) : std::string("more than 2^63 - 1")) +
                " bytes, got " + std::to_string(data.size()));
  }
  const std::string header = header_text(descr, shape);
  std::vector<std::byte> out;
  out.reserve(kMagic.size() + 4 + header.size() + data.size());
  for (char c : kMagic) out.push_back(static_cast<std::byte>(c));
  for (int b :
       {1, 0, static_cast<int>(header.size() & 0xff), static_cast<int>(header.size() >> 8)}) {
    out.push_back(static_cast<std::byte>(b));
  }
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  const std::size_t data_at = out.size();
  out.insert(out.end(), data.begin(), data.end());
  to_native(std::span(out).subspan(data_at), dtype->size);
  return out;
}

void write_npy(const std::filesystem::path& path, std::string_view descr,
               std::span<const std::int64_t> shape, std::span<const std::byte> data) {
  std::vector<std::byte> bytes;
  try {
    bytes = npy_bytes(descr, shape, data);
  } catch (const Error& e) {
    throw Error(path.string() + ": " + e.what());
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path.string() + ": cannot open for writing (" + std::strerror(errno) + ")");
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) throw Error(path.string() + ": write failed (" + std::strerror(errno) + ")");
}

}  // namespace posenc
