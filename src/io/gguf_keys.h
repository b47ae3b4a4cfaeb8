// src/io/gguf_keys.h: a GGUF file's metadata read key by key with llama.cpp's type rules, for the
// mapping (gguf_rope.cc): every key read is recorded, so that the keys left over can be reported.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/error.h"
#include "posenc/io/gguf.h"
#include "util/format.h"

namespace posenc::gguf_detail {

// The shortest decimal d with float32(scale * d) == f: the number the converter most likely
// started from (a Python float, times `scale`, rounded to f32). With scale 1 this reads 0.1f as
// 0.1, not 0.100000001; with scale 0.1 it reads DeepSeek-2's 0.0707f as 0.707.
inline double decimal_of(float f, double scale = 1.0) {
  if (!std::isfinite(f)) return static_cast<double>(f);
  const double x = static_cast<double>(f) / scale;
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, x);
    const double d = std::strtod(buf, nullptr);
    if (static_cast<float>(scale * d) == f) return d;
  }
  return x;
}

// A number as the spec (double) and llama.cpp (float32) see it.
struct Number {
  double value;  // f32: decimal_of; f64 and integers: exact
  float f32;     // what llama.cpp's get_key(float) holds
};

class GgufKeys {
 public:
  explicit GgufKeys(const GgufFile& file) : f_(file) {}

 protected:
  [[noreturn]] void fail(const std::string& what) const { throw Error(f_.source + ": " + what); }
  void warn(const std::string& what) { warnings_.push_back(f_.source + ": " + what); }

  const GgufValue* get(const std::string& key) {
    read_.insert(key);
    return f_.find(key);
  }

  std::string show(const std::string& key, const GgufValue& v) const {
    return key + " (" + v.describe() + ")";
  }

  std::optional<std::string> string(const std::string& key) {
    const GgufValue* v = get(key);
    if (!v) return std::nullopt;
    if (v->type != GgufType::kString) wrong_type(key, *v, "str");
    return v->string_value;
  }

  // llama.cpp reads every key with one type and refuses any other (llama-model-loader.cpp,
  // GGUFMeta::GKV::get_kv: "key %s has wrong type %s but expected type %s"), so a file that
  // stores, say, a context length as u64 or as an array does not load there.
  [[noreturn]] void wrong_type(const std::string& key, const GgufValue& v,
                               std::string_view expected) const {
    fail(show(key, v) + " has the wrong type: llama.cpp reads " + key + " as " +
         std::string(expected) + " and refuses a file that stores it otherwise");
  }

  // A u32 key (context lengths, dims): load_hparams' get_key into a uint32_t. Values at or above
  // 2^31 are refused too: ggml counts dims and positions in int32.
  std::optional<std::int64_t> integer(const std::string& key) {
    const GgufValue* v = get(key);
    if (!v) return std::nullopt;
    if (v->type != GgufType::kUint32) wrong_type(key, *v, "u32");
    if (v->uint_value > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max())) {
      fail(show(key, *v) + " must be below 2^31 (ggml counts dims and positions in int32)");
    }
    return static_cast<std::int64_t>(v->uint_value);
  }

  // A u32, or an array of u32/i32 with one value per layer (get_key_or_arr: attention.head_count;
  // OpenELM's vary by layer). The first layer's value is used.
  std::optional<std::int64_t> integer_or_array(const std::string& key) {
    const GgufValue* v = get(key);
    if (!v) return std::nullopt;
    if (v->type != GgufType::kArray) return integer(key);
    if (v->element_type != GgufType::kUint32 && v->element_type != GgufType::kInt32) {
      wrong_type(key, *v, "u32 or an array of u32 or i32 (one per layer)");
    }
    if (v->count == 0) fail(show(key, *v) + " must not be an empty array");
    const double x = *v->number_at(0);
    for (std::uint64_t i = 1; i < v->count; ++i) {
      if (v->number_at(i) != x) {
        warn(show(key, *v) + " varies by layer; the first layer's value " + detail::num(x) +
             " is used");
        break;
      }
    }
    if (!(x >= 0 && x <= std::numeric_limits<std::int32_t>::max())) {
      fail(show(key, *v) + ": element 0 (" + detail::num(x) + ") must be in [0, 2^31)");
    }
    return static_cast<std::int64_t>(x);
  }

  // An f32 key (get_key into a float), finite.
  std::optional<Number> number(const std::string& key) {
    const GgufValue* v = get(key);
    if (!v) return std::nullopt;
    if (v->type != GgufType::kFloat32) wrong_type(key, *v, "f32");
    Number n{};
    n.f32 = static_cast<float>(v->float_value);
    n.value = decimal_of(n.f32);
    if (!std::isfinite(n.f32)) fail(show(key, *v) + " must be a finite number");
    return n;
  }

  const GgufFile& f_;
  std::set<std::string> read_;  // every key asked for, present or not
  std::vector<std::string> warnings_;
};

}  // namespace posenc::gguf_detail
