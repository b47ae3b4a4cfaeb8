// GGUF values (gguf.h): the type tables, decoding one value, and GgufValue's accessors. The
// file's layout (header, metadata, tensor infos, data) is read in gguf.cc.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "io/gguf_internal.h"
#include "util/format.h"

namespace posenc {
namespace gguf_detail {
namespace {

constexpr GgmlType kGgmlTypes[] = {
    {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},      {10, "q2_K", 256, 84},
    {11, "q3_K", 256, 110},   {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},  {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},  {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},         {25, "i16", 1, 2},
    {26, "i32", 1, 4},        {27, "i64", 1, 8},        {28, "f64", 1, 8},
    {29, "iq1_m", 256, 56},   {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},    {40, "nvfp4", 64, 36},
    {41, "q1_0", 128, 18},
};

// Walks the elements of an array (validating them) without keeping them.
void skip_elements(Reader& r, GgufType type, std::uint64_t count, int depth,
                   const std::string& field) {
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

}  // namespace

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
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
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
  if (!f32) return detail::num(v);
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtof(buf, nullptr) == static_cast<float>(v)) break;
  }
  return buf;
}

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

GgufValue read_value(Reader& r, GgufType type, const std::string& field) {
  GgufValue v;
  v.type = type;
  const std::uint64_t start = r.pos();
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kUint16:
    case GgufType::kUint32:
    case GgufType::kUint64:
      v.uint_value = r.fixed(fixed_size(type), field);
      break;
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
    case GgufType::kFloat64:
      v.float_value = f64_from_bits(r.fixed(8, field));
      break;
    case GgufType::kBool:
      v.uint_value = r.fixed(1, field);
      if (v.uint_value > 1) {
        r.fail_at(start, field + " (bool " + std::to_string(v.uint_value) + ") must be 0 or 1");
      }
      break;
    case GgufType::kString:
      v.string_value = r.string(field);
      break;
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

}  // namespace gguf_detail

using namespace gguf_detail;

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
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const {
  return type == GgufType::kFloat32 || type == GgufType::kFloat64;
}

std::optional<std::int64_t> GgufValue::as_integer() const {
  if (!is_integer()) return std::nullopt;
  switch (type) {
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64:
      return int_value;
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
    case GgufType::kFloat32:
      return f32_from_bits(static_cast<std::uint32_t>(bits));
    case GgufType::kFloat64:
      return f64_from_bits(bits);
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64:
      return static_cast<double>(sign_extend(bits, size));
    default:
      return static_cast<double>(bits);
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
  for (std::uint64_t i = 0; i < count; ++i)
    out.push_back(read_value(r, GgufType::kArray, "element"));
  return out;
}

std::string GgufValue::describe() const {
  const std::string name(gguf_type_name(type));
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kUint16:
    case GgufType::kUint32:
    case GgufType::kUint64:
      return name + " " + std::to_string(uint_value);
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64:
      return name + " " + std::to_string(int_value);
    case GgufType::kFloat32:
      return name + " " + show_float(float_value, true);
    case GgufType::kFloat64:
      return name + " " + show_float(float_value, false);
    case GgufType::kBool:
      return name + (uint_value ? " true" : " false");
    case GgufType::kString:
      return name + " " + quote(string_value);
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

}  // namespace posenc
