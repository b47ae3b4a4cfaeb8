// GGUF reader (gguf.h), written from the format's public description: ggml's include/gguf.h
// and docs/gguf.md. Facts from ggml's sources are cited where used; no code is shared.
//
// Every read goes through Reader, which checks the bytes left first. Counts are checked
// against the bytes left times the smallest encoding of one element before anything is
// reserved, so allocation is bounded by the file size.
#include "posenc/gguf.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "file_bytes.h"
#include "format.h"
#include "posenc/error.h"

namespace posenc {
namespace {

using detail::num;

constexpr std::uint32_t kMaxDims = 4;             // GGML_MAX_DIMS (ggml.h)
constexpr std::uint64_t kDefaultAlignment = 32;   // GGUF_DEFAULT_ALIGNMENT (gguf.h)
constexpr std::uint32_t kLastValueType = 12;      // GGUF_TYPE_FLOAT64; GGUF_TYPE_COUNT is 13
constexpr std::size_t kShowLimit = 60;            // characters of a name quoted in a message

// The smallest encodings, for the count checks: a key-value pair is a key of at least one
// byte (u64 length + 1), its u32 type and a value of at least one byte; a tensor info is an
// empty name (u64), n_dims (u32), ggml_type (u32) and offset (u64).
constexpr std::uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
constexpr std::uint64_t kMinStringBytes = 8;
constexpr std::uint64_t kMinArrayBytes = 4 + 8;

// Block size (elements) and bytes per block of each ggml_type: ggml.c's type_traits, with
// the block structs of ggml-common.h (e.g. block_q4_0 = fp16 scale + 16 bytes of nibbles).
// Ids 4, 5, 31-33 and 36-38 were removed from ggml ("support has been removed").
struct GgmlType {
  std::uint32_t id;
  std::string_view name;
  std::uint32_t block;
  std::uint32_t bytes;
};
constexpr GgmlType kGgmlTypes[] = {
    {0, "f32", 1, 4},          {1, "f16", 1, 2},          {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},       {6, "q5_0", 32, 22},       {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},       {9, "q8_1", 32, 36},       {10, "q2_K", 256, 84},
    {11, "q3_K", 256, 110},    {12, "q4_K", 256, 144},    {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},    {15, "q8_K", 256, 292},    {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},   {18, "iq3_xxs", 256, 98},  {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},    {21, "iq3_s", 256, 110},   {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136},  {24, "i8", 1, 1},          {25, "i16", 1, 2},
    {26, "i32", 1, 4},         {27, "i64", 1, 8},         {28, "f64", 1, 8},
    {29, "iq1_m", 256, 56},    {30, "bf16", 1, 2},        {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},    {39, "mxfp4", 32, 17},     {40, "nvfp4", 64, 36},
    {41, "q1_0", 128, 18},
};

const GgmlType* find_ggml_type(std::uint32_t id) {
  for (const GgmlType& t : kGgmlTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

// Bytes of one element of a fixed-size value type; 0 for str and arr.
std::uint64_t fixed_size(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

std::uint64_t min_size(GgufType type) {
  if (type == GgufType::kString) return kMinStringBytes;
  if (type == GgufType::kArray) return kMinArrayBytes;
  return fixed_size(type);
}

std::uint64_t load_le(const std::uint8_t* p, std::uint64_t n) {
  std::uint64_t v = 0;
  for (std::uint64_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

float f32_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

double f64_from_bits(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

std::int64_t sign_extend(std::uint64_t v, std::uint64_t bytes) {
  if (bytes == 8) return static_cast<std::int64_t>(v);
  const std::uint64_t sign = std::uint64_t{1} << (8 * bytes - 1);
  return static_cast<std::int64_t>(v ^ sign) - static_cast<std::int64_t>(sign);
}

// Quoted, with control and non-ASCII bytes escaped, cut at kShowLimit characters.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (out.size() > kShowLimit) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "\"";
}

// A float for messages: integers in full (10000, not 1e+04), else the shortest text that reads
// back as the same value in the stored precision (0.1 for 0.1f).
std::string show_float(double v, bool f32) {
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  if (!f32) return num(v);
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtof(buf, nullptr) == static_cast<float>(v)) break;
  }
  return buf;
}

bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// ---------------------------------------------------------------------------------------------

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
  std::uint32_t u32(const std::string& field) { return static_cast<std::uint32_t>(fixed(4, field)); }
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

GgufType value_type(Reader& r, const std::string& field) {
  const std::uint64_t start = r.pos();
  const std::uint32_t t = r.u32(field);
  if (t > kLastValueType) {
    r.fail_at(start, field + " (" + std::to_string(t) + ") is not a GGUF type (0..12)");
  }
  return static_cast<GgufType>(t);
}

// Checks that `count` elements of at least `min_bytes` each can fit in what is left.
void check_count(const Reader& r, std::uint64_t start, std::uint64_t count, std::uint64_t min_bytes,
                 const std::string& field, const std::string& element) {
  if (min_bytes != 0 && count > r.remaining() / min_bytes) {
    r.fail_at(start, field + " (" + std::to_string(count) + ") " + element + " of at least " +
                         std::to_string(min_bytes) + " bytes each cannot fit in the " +
                         std::to_string(r.remaining()) + " bytes left");
  }
}

// Walks the elements of an array (validating them) without keeping them.
void skip_elements(Reader& r, GgufType type, std::uint64_t count, int depth, const std::string& field) {
  const std::uint64_t size = fixed_size(type);
  if (size != 0) {
    // count <= remaining / size was checked, so the product cannot overflow.
    r.need(count * size, field);
    if (type == GgufType::kBool) {
      for (std::uint64_t i = 0; i < count; ++i) {
        const std::uint8_t b = *r.at(r.pos() + i);
        if (b > 1) {
          r.fail_at(r.pos() + i, field + "[" + std::to_string(i) + "] (bool " + std::to_string(b) +
                                     ") must be 0 or 1");
        }
      }
    }
    r.skip(count * size);
    return;
  }
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::string element = field + "[" + std::to_string(i) + "]";
    if (type == GgufType::kString) {
      const std::uint64_t start = r.pos();
      const std::uint64_t n = r.u64(element + " length");
      if (n > r.remaining()) {
        r.fail_at(start, element + " length (" + std::to_string(n) +
                             ") runs past the end of the file (" + std::to_string(r.remaining()) +
                             " bytes left)");
      }
      r.skip(n);
    } else {
      if (depth >= kGgufMaxArrayDepth) {
        r.fail_at(r.pos(), element + ": arrays nested deeper than " +
                               std::to_string(kGgufMaxArrayDepth) + " levels are not supported");
      }
      const GgufType inner = value_type(r, element + " element type");
      const std::uint64_t start = r.pos();
      const std::uint64_t n = r.u64(element + " count");
      check_count(r, start, n, min_size(inner), element + " count", "elements");
      skip_elements(r, inner, n, depth + 1, element);
    }
  }
}

GgufValue read_value(Reader& r, GgufType type, const std::string& field) {
  GgufValue v;
  v.type = type;
  const std::uint64_t start = r.pos();
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kUint16:
    case GgufType::kUint32:
    case GgufType::kUint64: v.uint_value = r.fixed(fixed_size(type), field); break;
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64: {
      const std::uint64_t n = fixed_size(type);
      v.int_value = sign_extend(r.fixed(n, field), n);
      break;
    }
    case GgufType::kFloat32:
      v.float_value = f32_from_bits(static_cast<std::uint32_t>(r.fixed(4, field)));
      break;
    case GgufType::kFloat64: v.float_value = f64_from_bits(r.fixed(8, field)); break;
    case GgufType::kBool:
      v.uint_value = r.fixed(1, field);
      if (v.uint_value > 1) {
        r.fail_at(start, field + " (bool " + std::to_string(v.uint_value) + ") must be 0 or 1");
      }
      break;
    case GgufType::kString: v.string_value = r.string(field); break;
    case GgufType::kArray: {
      v.element_type = value_type(r, field + " element type");
      const std::uint64_t count_at = r.pos();
      v.count = r.u64(field + " count");
      check_count(r, count_at, v.count, min_size(v.element_type), field + " count",
                  std::string(gguf_type_name(v.element_type)) + " elements");
      const std::uint64_t first = r.pos();
      skip_elements(r, v.element_type, v.count, 1, field);
      v.raw.assign(r.at(first), r.at(r.pos()));
      break;
    }
  }
  return v;
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
  static constexpr std::array<std::string_view, 13> kNames = {
      "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
  const auto i = static_cast<std::uint32_t>(type);
  return i < kNames.size() ? kNames[i] : std::string_view("?");
}

std::string_view ggml_type_name(std::uint32_t ggml_type) {
  const GgmlType* t = find_ggml_type(ggml_type);
  return t ? t->name : std::string_view();
}

// ---------------------------------------------------------------------------------------------
// GgufValue

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64: return true;
    default: return false;
  }
}

bool GgufValue::is_float() const { return type == GgufType::kFloat32 || type == GgufType::kFloat64; }

std::optional<std::int64_t> GgufValue::as_integer() const {
  if (!is_integer()) return std::nullopt;
  switch (type) {
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64: return int_value;
    default:
      if (uint_value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return std::nullopt;
      }
      return static_cast<std::int64_t>(uint_value);
  }
}

std::optional<double> GgufValue::number_at(std::uint64_t i) const {
  if (type != GgufType::kArray || i >= count) return std::nullopt;
  const std::uint64_t size = fixed_size(element_type);
  if (size == 0 || raw.size() / size < count) return std::nullopt;
  const std::uint64_t bits = load_le(raw.data() + i * size, size);
  switch (element_type) {
    case GgufType::kFloat32: return f32_from_bits(static_cast<std::uint32_t>(bits));
    case GgufType::kFloat64: return f64_from_bits(bits);
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64: return static_cast<double>(sign_extend(bits, size));
    default: return static_cast<double>(bits);
  }
}

std::vector<std::string> GgufValue::strings() const {
  std::vector<std::string> out;
  if (type != GgufType::kArray || element_type != GgufType::kString) return out;
  const std::string source = "array";
  Reader r(raw, source);
  check_count(r, 0, count, kMinStringBytes, "count", "strings");
  out.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) out.push_back(r.string("element"));
  return out;
}

std::vector<GgufValue> GgufValue::arrays() const {
  std::vector<GgufValue> out;
  if (type != GgufType::kArray || element_type != GgufType::kArray) return out;
  const std::string source = "array";
  Reader r(raw, source);
  check_count(r, 0, count, kMinArrayBytes, "count", "arrays");
  out.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) out.push_back(read_value(r, GgufType::kArray, "element"));
  return out;
}

std::string GgufValue::describe() const {
  const std::string name(gguf_type_name(type));
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kUint16:
    case GgufType::kUint32:
    case GgufType::kUint64: return name + " " + std::to_string(uint_value);
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64: return name + " " + std::to_string(int_value);
    case GgufType::kFloat32: return name + " " + show_float(float_value, true);
    case GgufType::kFloat64: return name + " " + show_float(float_value, false);
    case GgufType::kBool: return name + (uint_value ? " true" : " false");
    case GgufType::kString: return name + " " + quote(string_value);
    case GgufType::kArray:
      return "arr[" + std::string(gguf_type_name(element_type)) + "] of " + std::to_string(count);
  }
  return name;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index.find(name);
  return it == tensor_index.end() ? nullptr : &tensors[it->second];
}

// ---------------------------------------------------------------------------------------------
// The file

namespace {

void read_header(Reader& r, GgufFile& f, std::uint64_t& n_tensors, std::uint64_t& n_kv) {
  if (r.remaining() < 4) {
    r.fail_at(0, "the file is " + std::to_string(r.remaining()) +
                     " bytes long, too short for the magic \"GGUF\" (not a GGUF file)");
  }
  const std::string_view magic(reinterpret_cast<const char*>(r.at(0)), 4);
  if (magic != "GGUF") {
    const std::string looks = detail::foreign_format(std::span(r.at(0), r.remaining()));
    r.fail_at(0, "magic (" + quote(magic) + ") is not \"GGUF\" (not a GGUF file" +
                     (looks.empty() ? "" : ": this is " + looks) + ")");
  }
  r.skip(4);
  f.version = r.u32("version");
  if (f.version == 1) {
    r.fail_at(4, "version (1) is unsupported: GGUF version 1 used 32-bit counts and lengths; "
                 "this reader reads versions 2 and 3 (convert the file again)");
  }
  if (f.version != 2 && f.version != 3) {
    const bool swapped = (f.version & 0xFFFFu) == 0;
    r.fail_at(4, "version (" + std::to_string(f.version) + ") is unsupported: this reader reads "
                     "versions 2 and 3" +
                     (swapped ? " (a byte-swapped version: a big-endian file?)" : ""));
  }
  const std::uint64_t tensors_at = r.pos();
  n_tensors = r.u64("tensor_count");
  const std::uint64_t kv_at = r.pos();
  n_kv = r.u64("metadata_kv_count");
  check_count(r, tensors_at, n_tensors, kMinTensorInfoBytes, "tensor_count", "tensor infos");
  check_count(r, kv_at, n_kv, kMinKvBytes, "metadata_kv_count", "key-value pairs");
}

void read_metadata(Reader& r, GgufFile& f, std::uint64_t n_kv) {
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::string entry = "metadata key #" + std::to_string(i);
    const std::uint64_t key_at = r.pos();
    std::string key = r.string(entry);
    if (key.empty()) r.fail_at(key_at, entry + ": the key is empty");
    const std::string field = entry + " (" + quote(key) + ")";
    if (f.metadata.count(key) != 0) {
      r.fail_at(key_at, field + ": duplicate key " + quote(key) + " (keys must be unique)");
    }
    const GgufType type = value_type(r, field + ": value type");
    GgufValue value = read_value(r, type, field + ": value");
    f.metadata.emplace(std::move(key), std::move(value));
  }
  // general.alignment: a u32 power of two (gguf.cpp refuses any other type or value).
  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type != GgufType::kUint32 || !is_power_of_two(a->uint_value)) {
      r.fail_at(r.pos(), "general.alignment (" + a->describe() +
                             ") must be a u32 power of two");
    }
    f.alignment = a->uint_value;
  } else {
    f.alignment = kDefaultAlignment;
  }
}

void read_tensor_infos(Reader& r, GgufFile& f, std::uint64_t n_tensors) {
  const std::uint64_t count_at = 8;
  check_count(r, count_at, n_tensors, kMinTensorInfoBytes, "tensor_count", "tensor infos");
  f.tensors.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.info_at = r.pos();
    const std::string entry = "tensor info #" + std::to_string(i);
    t.name = r.string(entry + " name");
    const std::string field = entry + " (" + quote(t.name) + ")";
    if (f.tensor_index.count(t.name) != 0) {
      r.fail_at(t.info_at, field + ": duplicate tensor name " + quote(t.name));
    }
    const std::uint64_t dims_at = r.pos();
    const std::uint32_t n_dims = r.u32(field + ": n_dims");
    if (n_dims > kMaxDims) {
      r.fail_at(dims_at, field + ": n_dims (" + std::to_string(n_dims) +
                             ") is more than GGML_MAX_DIMS (" + std::to_string(kMaxDims) + ")");
    }
    // ggml counts elements in int64_t (ggml_nelements): the product must stay below 2^63.
    constexpr auto kMaxElements = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t ne_at = r.pos();
      const std::string dim = field + ": ne[" + std::to_string(d) + "]";
      const std::uint64_t ne = r.u64(dim);
      if (ne > kMaxElements) r.fail_at(ne_at, dim + " (" + std::to_string(ne) + ") is above 2^63 - 1");
      t.ne.push_back(ne);
      if (ne != 0 && elements > kMaxElements / ne) {
        std::string shape;
        for (std::uint64_t x : t.ne) shape += (shape.empty() ? "" : ", ") + std::to_string(x);
        r.fail_at(ne_at, field + ": the element count of shape (" + shape +
                             ", ...) overflows 2^63 - 1");
      }
      elements *= ne;
    }
    t.n_elements = elements;
    const std::uint64_t type_at = r.pos();
    t.ggml_type = r.u32(field + ": ggml_type");
    const GgmlType* gt = find_ggml_type(t.ggml_type);
    if (!gt) {
      r.fail_at(type_at, field + ": ggml_type (" + std::to_string(t.ggml_type) +
                             ") is not a ggml type this reader knows, so its size is unknown");
    }
    const std::uint64_t ne0 = t.ne.empty() ? 1 : t.ne[0];
    if (ne0 % gt->block != 0) {
      r.fail_at(type_at, field + ": ne[0] (" + std::to_string(ne0) + ") is not a multiple of the " +
                             std::string(gt->name) + " block size (" + std::to_string(gt->block) + ")");
    }
    const std::uint64_t blocks = elements / gt->block;
    if (blocks > std::numeric_limits<std::uint64_t>::max() / gt->bytes) {
      r.fail_at(type_at, field + ": the size in bytes of " + std::to_string(elements) + " " +
                             std::string(gt->name) + " elements overflows 64 bits");
    }
    t.n_bytes = blocks * gt->bytes;
    const std::uint64_t offset_at = r.pos();
    t.offset = r.u64(field + ": offset");
    if (t.offset % f.alignment != 0) {
      r.fail_at(offset_at, field + ": offset (" + std::to_string(t.offset) +
                               ") is not a multiple of the alignment (" +
                               std::to_string(f.alignment) + ")");
    }
    f.tensor_index.emplace(t.name, f.tensors.size());
    f.tensors.push_back(std::move(t));
  }
}

// The data section starts at the next multiple of the alignment (gguf.cpp pads only when there
// are tensors); every tensor must lie inside it.
void check_tensor_data(Reader& r, GgufFile& f) {
  if (f.tensors.empty()) return;
  const std::uint64_t end_of_infos = r.pos();
  const std::uint64_t pad = (f.alignment - end_of_infos % f.alignment) % f.alignment;
  if (pad > r.remaining()) {
    r.fail_at(end_of_infos, "the data section (aligned to " + std::to_string(f.alignment) +
                                " bytes, at byte " + std::to_string(end_of_infos) + " + " +
                                std::to_string(pad) + ") starts past the end of the file (" +
                                std::to_string(f.file_size) + " bytes)");
  }
  f.data_offset = end_of_infos + pad;
  const std::uint64_t data_size = f.file_size - f.data_offset;
  for (const GgufTensorInfo& t : f.tensors) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      r.fail_at(t.info_at, "tensor " + quote(t.name) + ": its data (offset " +
                               std::to_string(t.offset) + ", " + std::to_string(t.n_bytes) +
                               " bytes) runs past the end of the data section (" +
                               std::to_string(data_size) + " bytes from byte " +
                               std::to_string(f.data_offset) + ")");
    }
  }
}

void read_rope_tensors(const Reader& r, GgufFile& f) {
  for (std::string_view name : {kGgufRopeFreqs, kGgufRopeFactorsLong, kGgufRopeFactorsShort}) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) continue;
    if (t->ggml_type != 0) {
      const std::string_view type = ggml_type_name(t->ggml_type);
      r.fail_at(t->info_at, "tensor " + quote(t->name) + ": ggml_type " + std::string(type) + " (" +
                                std::to_string(t->ggml_type) +
                                ") is not supported for RoPE factors; only f32 (0) is read");
    }
    std::vector<float> values(static_cast<std::size_t>(t->n_elements));  // inside the file
    const std::uint8_t* p = r.at(f.data_offset + t->offset);
    for (std::size_t i = 0; i < values.size(); ++i) {
      values[i] = f32_from_bits(static_cast<std::uint32_t>(load_le(p + 4 * i, 4)));
    }
    f.rope_tensors.emplace(std::string(name), std::move(values));
  }
}

}  // namespace

GgufFile parse_gguf(std::span<const std::uint8_t> bytes, std::string_view source) {
  GgufFile f;
  f.source = std::string(source);
  f.file_size = bytes.size();
  Reader r(bytes, f.source);
  std::uint64_t n_tensors = 0;
  std::uint64_t n_kv = 0;
  read_header(r, f, n_tensors, n_kv);
  read_metadata(r, f, n_kv);
  read_tensor_infos(r, f, n_tensors);
  check_tensor_data(r, f);
  read_rope_tensors(r, f);
  return f;
}

GgufFile read_gguf(const std::filesystem::path& path) {
  const std::string source = path.string();
  const detail::FileBytes file(path, {kMaxStreamedGgufBytes, false, "a GGUF file", [&source](std::span<const std::uint8_t> start) {
    if (start.size() >= 4 && std::memcmp(start.data(), "GGUF", 4) != 0) parse_gguf(start, source);  // throws: the magic
  }});
  return parse_gguf(file.bytes(), path.string());
}

}  // namespace posenc
