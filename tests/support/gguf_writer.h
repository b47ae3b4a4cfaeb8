// tests/support/gguf_writer.h: a small GGUF writer for tests (test-only; shares no code with src/).
//
// Writes the layout of ggml's include/gguf.h: magic, version, tensor_count, metadata_kv_count,
// the key-value pairs, the tensor infos, padding to the alignment, then each tensor's data at
// its offset. Every field can be overridden to build malformed files.
//
//   GgufWriter w;
//   w.kv("general.architecture", GgufWriter::str("llama"));
//   w.kv("llama.context_length", GgufWriter::u32(4096));
//   w.tensor_f32("rope_freqs.weight", {1.0f, 2.0f});
//   std::vector<std::uint8_t> bytes = w.bytes();
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::testing {

class GgufWriter {
 public:
  // One encoded value: its GGUF type and its bytes (without the type tag).
  struct Value {
    std::uint32_t type;
    std::vector<std::uint8_t> bytes;
  };

  static void put(std::vector<std::uint8_t>& out, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  static void put_string(std::vector<std::uint8_t>& out, std::string_view s) {
    put(out, s.size(), 8);
    out.insert(out.end(), s.begin(), s.end());
  }
  static Value scalar(std::uint32_t type, std::uint64_t bits, int n) {
    Value v{type, {}};
    put(v.bytes, bits, n);
    return v;
  }

  static Value u8(std::uint8_t x) { return scalar(0, x, 1); }
  static Value i8(std::int8_t x) { return scalar(1, static_cast<std::uint8_t>(x), 1); }
  static Value u16(std::uint16_t x) { return scalar(2, x, 2); }
  static Value i16(std::int16_t x) { return scalar(3, static_cast<std::uint16_t>(x), 2); }
  static Value u32(std::uint32_t x) { return scalar(4, x, 4); }
  static Value i32(std::int32_t x) { return scalar(5, static_cast<std::uint32_t>(x), 4); }
  static Value f32(float x) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    return scalar(6, bits, 4);
  }
  static Value boolean(bool x) { return scalar(7, x ? 1 : 0, 1); }
  static Value str(std::string_view s) {
    Value v{8, {}};
    put_string(v.bytes, s);
    return v;
  }
  static Value u64(std::uint64_t x) { return scalar(10, x, 8); }
  static Value i64(std::int64_t x) { return scalar(11, static_cast<std::uint64_t>(x), 8); }
  static Value f64(double x) {
    std::uint64_t bits;
    std::memcpy(&bits, &x, 8);
    return scalar(12, bits, 8);
  }
  // An array of `element_type` holding `elements` (each encoded as that type); `count`
  // overrides the count written.
  static Value array(std::uint32_t element_type, const std::vector<Value>& elements,
                     std::optional<std::uint64_t> count = std::nullopt) {
    Value v{9, {}};
    put(v.bytes, element_type, 4);
    put(v.bytes, count.value_or(elements.size()), 8);
    for (const Value& e : elements) v.bytes.insert(v.bytes.end(), e.bytes.begin(), e.bytes.end());
    return v;
  }
  static Value f32_array(const std::vector<float>& xs) {
    std::vector<Value> elements;
    for (float x : xs) elements.push_back(f32(x));
    return array(6, elements);
  }

  explicit GgufWriter(std::uint32_t version = 3) : version_(version) {}

  GgufWriter& kv(std::string_view key, const Value& value) {
    put_string(kvs_, key);
    put(kvs_, value.type, 4);
    kvs_.insert(kvs_.end(), value.bytes.begin(), value.bytes.end());
    ++kv_count_;
    return *this;
  }
  // A pair with any type tag and any bytes after it.
  GgufWriter& raw_kv(std::string_view key, std::uint32_t type,
                     const std::vector<std::uint8_t>& bytes) {
    return kv(key, Value{type, bytes});
  }

  // A tensor; its offset is the next aligned one unless `offset` is given.
  GgufWriter& tensor(std::string_view name, const std::vector<std::uint64_t>& ne,
                     std::uint32_t ggml_type, const std::vector<std::uint8_t>& data,
                     std::optional<std::uint64_t> offset = std::nullopt) {
    tensors_.push_back({std::string(name), ne, ggml_type, data, offset});
    return *this;
  }
  GgufWriter& tensor_f32(std::string_view name, const std::vector<float>& xs) {
    std::vector<std::uint8_t> data;
    for (float x : xs) {
      std::uint32_t bits;
      std::memcpy(&bits, &x, 4);
      put(data, bits, 4);
    }
    return tensor(name, {xs.size()}, 0, data);
  }

  GgufWriter& magic(std::string_view m) {
    magic_ = std::string(m);
    return *this;
  }
  GgufWriter& version(std::uint32_t v) {
    version_ = v;
    return *this;
  }
  GgufWriter& kv_count(std::uint64_t n) {
    kv_count_override_ = n;
    return *this;
  }
  GgufWriter& tensor_count(std::uint64_t n) {
    tensor_count_override_ = n;
    return *this;
  }
  GgufWriter& alignment(std::uint64_t a) {
    alignment_ = a;
    return *this;
  }  // for the padding only

  std::vector<std::uint8_t> bytes() const {
    std::vector<std::uint8_t> out(magic_.begin(), magic_.end());
    put(out, version_, 4);
    put(out, tensor_count_override_.value_or(tensors_.size()), 8);
    put(out, kv_count_override_.value_or(kv_count_), 8);
    out.insert(out.end(), kvs_.begin(), kvs_.end());
    std::uint64_t next = 0;
    std::vector<std::uint64_t> offsets;
    for (const Tensor& t : tensors_) {
      const std::uint64_t offset = t.offset.value_or(next);
      offsets.push_back(offset);
      next = pad(offset + t.data.size());
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      put_string(out, t.name);
      put(out, t.ne.size(), 4);
      for (std::uint64_t n : t.ne) put(out, n, 8);
      put(out, t.ggml_type, 4);
      put(out, offsets[i], 8);
    }
    if (tensors_.empty()) return out;
    out.resize(pad(out.size()), 0);
    const std::size_t data_start = out.size();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].data.empty()) continue;
      const std::size_t at = data_start + offsets[i];
      if (out.size() < at + tensors_[i].data.size()) out.resize(at + tensors_[i].data.size(), 0);
      std::memcpy(out.data() + at, tensors_[i].data.data(), tensors_[i].data.size());
    }
    out.resize(pad(out.size()), 0);
    return out;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t ggml_type;
    std::vector<std::uint8_t> data;
    std::optional<std::uint64_t> offset;
  };

  std::uint64_t pad(std::uint64_t n) const {
    return (n + alignment_ - 1) / alignment_ * alignment_;
  }

  std::string magic_ = "GGUF";
  std::uint32_t version_;
  std::vector<std::uint8_t> kvs_;
  std::uint64_t kv_count_ = 0;
  std::vector<Tensor> tensors_;
  std::optional<std::uint64_t> kv_count_override_;
  std::optional<std::uint64_t> tensor_count_override_;
  std::uint64_t alignment_ = 32;
};

// Llama 3.1 8B as convert_hf_to_gguf.py writes it: no scaling keys, its llama3 scaling as the
// rope_freqs tensor (`rope_freqs`, 64 divisors).
inline GgufWriter llama31_8b_gguf(const std::vector<float>& rope_freqs) {
  using W = GgufWriter;
  GgufWriter w;
  w.kv("general.architecture", W::str("llama"))
      .kv("llama.context_length", W::u32(131072))
      .kv("llama.embedding_length", W::u32(4096))
      .kv("llama.attention.head_count", W::u32(32))
      .kv("llama.rope.dimension_count", W::u32(128))
      .kv("llama.rope.freq_base", W::f32(500000.0f))
      .tensor_f32("rope_freqs.weight", rope_freqs);
  return w;
}

}  // namespace posenc::testing
