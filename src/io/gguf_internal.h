// src/io/gguf_internal.h: what the GGUF reader (gguf.cc) and the value decoding (gguf_value.cc)
// share: the ggml type table, the little-endian helpers and the bounds-checked Reader.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "posenc/core/error.h"
#include "posenc/io/gguf.h"

namespace posenc::gguf_detail {

inline constexpr std::uint32_t kLastValueType = 12;  // GGUF_TYPE_FLOAT64; GGUF_TYPE_COUNT is 13
inline constexpr std::size_t kShowLimit = 60;        // characters of a name quoted in a message
inline constexpr std::uint64_t kMinStringBytes = 8;  // the smallest encodings, for count checks
inline constexpr std::uint64_t kMinArrayBytes = 4 + 8;

// Block size (elements) and bytes per block of each ggml_type: ggml.c's type_traits, with
// the block structs of ggml-common.h (e.g. block_q4_0 = fp16 scale + 16 bytes of nibbles).
// Ids 4, 5, 31-33 and 36-38 were removed from ggml ("support has been removed").
struct GgmlType {
  std::uint32_t id;
  std::string_view name;
  std::uint32_t block;
  std::uint32_t bytes;
};
const GgmlType* find_ggml_type(std::uint32_t id);  // nullptr for an unknown or removed id

// Bytes of one element of a fixed-size value type; 0 for str and arr.
std::uint64_t fixed_size(GgufType type);

std::uint64_t min_size(GgufType type);

std::uint64_t load_le(const std::uint8_t* p, std::uint64_t n);

float f32_from_bits(std::uint32_t bits);

double f64_from_bits(std::uint64_t bits);

std::int64_t sign_extend(std::uint64_t v, std::uint64_t bytes);

// Quoted, with control and non-ASCII bytes escaped, cut at kShowLimit characters.
std::string quote(std::string_view s);

// A float for messages: integers in full (10000, not 1e+04), else the shortest text that reads
// back as the same value in the stored precision (0.1 for 0.1f).
std::string show_float(double v, bool f32);

// Bounds-checked little-endian reads over one buffer. `what_` names the field being read, for
// messages: "source: byte N: <what_>: <problem>".
class Reader {
 public:
  Reader(std::span<const std::uint8_t> bytes, const std::string& source)
      : bytes_(bytes), source_(source) {}

  std::uint64_t pos() const { return pos_; }
  std::uint64_t remaining() const { return bytes_.size() - pos_; }
  const std::uint8_t* at(std::uint64_t offset) const { return bytes_.data() + offset; }

  [[noreturn]] void fail_at(std::uint64_t offset, const std::string& what) const {
    throw Error(source_ + ": byte " + std::to_string(offset) + ": " + what);
  }

  // Throws unless `n` more bytes are there; names `field` and the bytes wanted and left.
  void need(std::uint64_t n, const std::string& field) const {
    if (n > remaining()) {
      fail_at(pos_, field + " needs " + std::to_string(n) + " bytes but the file ends " +
                        std::to_string(remaining()) + " bytes later (truncated file)");
    }
  }

  std::uint64_t fixed(std::uint64_t n, const std::string& field) {
    need(n, field);
    const std::uint64_t v = load_le(at(pos_), n);
    pos_ += n;
    return v;
  }
  std::uint32_t u32(const std::string& field) {
    return static_cast<std::uint32_t>(fixed(4, field));
  }
  std::uint64_t u64(const std::string& field) { return fixed(8, field); }

  // A string: u64 length, then that many bytes.
  std::string string(const std::string& field) {
    const std::uint64_t start = pos_;
    const std::uint64_t n = u64(field + " length");
    if (n > remaining()) {
      fail_at(start, field + " length (" + std::to_string(n) + ") runs past the end of the file (" +
                         std::to_string(remaining()) + " bytes left)");
    }
    std::string s(reinterpret_cast<const char*>(at(pos_)), static_cast<std::size_t>(n));
    pos_ += n;
    return s;
  }

  void skip(std::uint64_t n) { pos_ += n; }  // after need()

 private:
  std::span<const std::uint8_t> bytes_;
  const std::string& source_;
  std::uint64_t pos_ = 0;
};

GgufType value_type(Reader& r, const std::string& field);

// Checks that `count` elements of at least `min_bytes` each can fit in what is left.
void check_count(const Reader& r, std::uint64_t start, std::uint64_t count, std::uint64_t min_bytes,
                 const std::string& field, const std::string& element);

// Reads one value of `type` (an array's elements are validated and kept raw).
GgufValue read_value(Reader& r, GgufType type, const std::string& field);

}  // namespace posenc::gguf_detail
