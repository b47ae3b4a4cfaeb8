// Loading a llama2.ts "v1" model file (../shared/models/stories260K/README.md), checked field by
// field: every error names the file, the byte offset and what was expected.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "posenc/core/error.h"
#include "posenc/llama/llama.h"
#include "rope/kernels/half.h"
#include "util/file_bytes.h"
#include "util/format.h"

namespace posenc::llama {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the v1 format is little-endian; add byte swaps");

constexpr std::uint8_t kFormatVersion = 1;
// Version 2 is version 1 with every weight stored as IEEE float16 (docs/eval.md, "The file
// format"): half the bytes, for models committed to the repository.
constexpr std::uint8_t kFormatVersionF16 = 2;
constexpr std::int64_t kVocabularyOffset = 256;  // the header is zero-padded up to here
constexpr std::int64_t kMaxModelTypeLength = 64;
// Far above any model this format carries, low enough that every product below fits in int64.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 20;

class Reader {
 public:
  Reader(std::span<const unsigned char> bytes, const std::string& name)
      : bytes_(bytes), name_(name) {}

  [[noreturn]] void fail(std::int64_t offset, const std::string& what) const {
    throw Error("model file " + name_ + ": byte " + std::to_string(offset) + ": " + what);
  }
  std::int64_t size() const { return static_cast<std::int64_t>(bytes_.size()); }
  std::int64_t offset() const { return offset_; }
  void seek(std::int64_t offset) { offset_ = offset; }

  void need(std::int64_t count, const std::string& field) const {
    if (count > size() - offset_) {
      fail(offset_, field + " needs " + std::to_string(count) +
                        " bytes but the file ends at byte " + std::to_string(size()) +
                        " (truncated?)");
    }
  }
  std::uint8_t u8(const std::string& field) {
    need(1, field);
    return bytes_[static_cast<std::size_t>(offset_++)];
  }
  std::int32_t i32(const std::string& field) {
    need(4, field);
    std::int32_t v;
    std::memcpy(&v, bytes_.data() + offset_, 4);
    offset_ += 4;
    return v;
  }
  float f32(const std::string& field) {
    need(4, field);
    float v;
    std::memcpy(&v, bytes_.data() + offset_, 4);
    offset_ += 4;
    return v;
  }
  std::string bytes(std::int64_t count, const std::string& field) {
    need(count, field);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + offset_),
                  static_cast<std::size_t>(count));
    offset_ += count;
    return s;
  }
  // `count` float32 values, or float16 values widened to float32 (exactly).
  std::vector<float> floats(std::int64_t count, const std::string& field, bool float16 = false) {
    const std::int64_t size = float16 ? 2 : 4;
    need(count * size, field);
    std::vector<float> v(static_cast<std::size_t>(count));
    if (float16) {
      for (std::int64_t i = 0; i < count; ++i) {
        std::uint16_t h;
        std::memcpy(&h, bytes_.data() + offset_ + 2 * i, 2);
        v[static_cast<std::size_t>(i)] = posenc::detail::f32_from_f16(h);
      }
    } else {
      std::memcpy(v.data(), bytes_.data() + offset_, static_cast<std::size_t>(count) * 4);
    }
    offset_ += count * size;
    return v;
  }

 private:
  std::span<const unsigned char> bytes_;
  std::string name_;
  std::int64_t offset_ = 0;
};

// Byte 0: what eval and generate read, and what the file is instead when it is not.
void check_version(const Reader& r, std::span<const unsigned char> start) {
  if (start.empty() || start[0] == kFormatVersion || start[0] == kFormatVersionF16) return;
  const std::string looks = posenc::detail::foreign_format(
      start.first(std::min(start.size(), posenc::detail::kStartBytes)));
  r.fail(0, "format version (" + std::to_string(start[0]) + ") must be " +
                std::to_string(kFormatVersion) + " (float32 weights) or " +
                std::to_string(kFormatVersionF16) + " (float16 weights): " +
                (looks.empty() ? "this is not" : "this is " + looks + ", not") +
                " a llama2.c / llama2.ts v1 model file, the format eval and generate read (as "
                "../shared/models/stories260K/tinystories_260k_v1.bin)");
}

// [count, rows, cols] row-major -> [count, cols, rows]: the forward pass reads W^T.
std::vector<float> transpose(const std::vector<float>& w, std::int64_t count, std::int64_t rows,
                             std::int64_t cols) {
  std::vector<float> t(w.size());
  for (std::int64_t c = 0; c < count; ++c) {
    const float* src = w.data() + c * rows * cols;
    float* dst = t.data() + c * rows * cols;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t k = 0; k < cols; ++k) dst[k * rows + r] = src[r * cols + k];
    }
  }
  return t;
}

}  // namespace

Model Model::load(const std::string& path) {
  const posenc::detail::FileBytes file(path, {kMaxModelBytes, true, "a llama2.ts v1 model file",
                                              [&path](std::span<const std::uint8_t> start) {
                                                check_version(Reader(start, path), start);
                                              }});
  return parse(file.bytes(), path);
}

Model Model::parse(std::span<const unsigned char> bytes, const std::string& name) {
  Reader r(bytes, name);
  Model m;
  Config& c = m.config_;

  check_version(r, bytes);
  c.float16_weights = r.u8("format version") == kFormatVersionF16;
  const std::int32_t type_length = r.i32("model type length");
  if (type_length < 1 || type_length > kMaxModelTypeLength) {
    r.fail(1, "model type length (" + std::to_string(type_length) + ") must be in [1, " +
                  std::to_string(kMaxModelTypeLength) + "]");
  }
  const std::string type = r.bytes(type_length, "model type");
  if (type != "llama") r.fail(5, "model type (\"" + type + "\") must be \"llama\"");

  const char* names[] = {
      "hidden size", "intermediate size", "max sequence length", "vocabulary size",
      "layers",      "query heads",       "key/value heads"};
  std::int64_t* fields[] = {&c.dim,    &c.hidden_dim, &c.max_seq_len, &c.vocab_size,
                            &c.layers, &c.heads,      &c.kv_heads};
  for (int i = 0; i < 7; ++i) {
    const std::int64_t at = r.offset();
    const std::int32_t v = r.i32(names[i]);
    if (v < 1 || v > kMaxDim) {
      r.fail(at, std::string(names[i]) + " (" + std::to_string(v) + ") must be in [1, " +
                     std::to_string(kMaxDim) + "]");
    }
    *fields[i] = v;
  }
  const std::int64_t tied_at = r.offset();
  const std::uint8_t tied = r.u8("tied output flag");
  if (tied > 1) r.fail(tied_at, "tied output flag (" + std::to_string(tied) + ") must be 0 or 1");
  c.tied_output = tied == 1;
  if (c.dim % c.heads != 0) {
    r.fail(5 + type_length, "hidden size (" + std::to_string(c.dim) +
                                ") must be divisible by the query heads (" +
                                std::to_string(c.heads) + ")");
  }
  if (c.heads % c.kv_heads != 0) {
    r.fail(5 + type_length + 20, "query heads (" + std::to_string(c.heads) +
                                     ") must be divisible by the key/value heads (" +
                                     std::to_string(c.kv_heads) + ")");
  }
  if (c.head_dim() % 2 != 0) {
    r.fail(5 + type_length, "head dim = hidden size / query heads (" +
                                std::to_string(c.head_dim()) + ") must be even for RoPE");
  }
  if (r.offset() > kVocabularyOffset)
    r.fail(r.offset(), "the header runs past byte 256, where the vocabulary starts");
  for (std::int64_t i = r.offset(); i < kVocabularyOffset; ++i) {
    if (r.u8("header padding") != 0) r.fail(i, "header padding must be zero up to byte 256");
  }

  const std::int64_t H = c.dim, I = c.hidden_dim, V = c.vocab_size, L = c.layers, KV = c.kv_dim();
  // In double first: with every dimension up to 2^20, L * I * H alone reaches 2^60 and the sum
  // would overflow int64; past the cap no file can match it.
  const auto weight_bytes = [&](auto x) {
    using T = decltype(x);
    const T h = static_cast<T>(H), i = static_cast<T>(I), v = static_cast<T>(V),
            l = static_cast<T>(L), kv = static_cast<T>(KV);
    return static_cast<T>(c.float16_weights ? 2 : 4) *
           (v * h + l * h + l * h * h + T{2} * l * kv * h + l * h * h + l * h + T{3} * l * i * h +
            h + (c.tied_output ? T{0} : v * h));
  };
  const double expected_estimate = weight_bytes(0.0);
  if (expected_estimate > static_cast<double>(kMaxModelBytes)) {
    r.fail(kVocabularyOffset, "the weights of this configuration (dim " + std::to_string(H) +
                                  ", hidden " + std::to_string(I) + ", " + std::to_string(L) +
                                  " layers, vocabulary " + std::to_string(V) +
                                  (c.float16_weights ? ", float16" : "") + ") take about " +
                                  posenc::detail::num(expected_estimate) + " bytes, more than " +
                                  posenc::detail::size_text(kMaxModelBytes) +
                                  ", the limit for a model file (kMaxModelBytes)");
  }
  // Each piece takes at least 8 bytes: reserve no more than the file can hold.
  std::vector<std::string> pieces;
  std::vector<float> scores;
  pieces.reserve(static_cast<std::size_t>(std::min(c.vocab_size, (r.size() - r.offset()) / 8)));
  scores.reserve(pieces.capacity());
  for (std::int64_t i = 0; i < c.vocab_size; ++i) {
    const std::string field =
        "vocabulary piece " + std::to_string(i) + " of " + std::to_string(c.vocab_size);
    const std::int64_t at = r.offset();
    const float score = r.f32(field + ": score");
    if (!std::isfinite(score))
      r.fail(at, field + ": score (" + std::to_string(score) + ") must be finite");
    const std::int32_t length = r.i32(field + ": length");
    if (length < 0)
      r.fail(at + 4, field + ": length (" + std::to_string(length) + ") must not be negative");
    pieces.push_back(r.bytes(length, field + ": text"));
    scores.push_back(score);
  }
  m.tokenizer_ = std::make_shared<const Tokenizer>(std::move(pieces), std::move(scores));

  const std::int64_t left = r.size() - r.offset();
  const std::int64_t expected = weight_bytes(std::int64_t{0});
  if (left != expected) {
    r.fail(r.offset(),
           "the weights of this configuration (dim " + std::to_string(H) + ", hidden " +
               std::to_string(I) + ", " + std::to_string(L) + " layers, " +
               std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " heads, vocabulary " +
               std::to_string(V) + (c.tied_output ? ", tied" : "") +
               (c.float16_weights ? ", float16" : "") + ") take " + std::to_string(expected) +
               " bytes from here to the end of the file, but " + std::to_string(left) +
               " bytes are left" + (left < expected ? " (truncated?)" : ""));
  }
  Weights& w = m.weights_;
  const bool f16 = c.float16_weights;
  w.embedding = r.floats(V * H, "embedding", f16);
  w.attention_norm = r.floats(L * H, "attention norms", f16);
  w.wq_t = transpose(r.floats(L * H * H, "wq", f16), L, H, H);
  w.wk_t = transpose(r.floats(L * KV * H, "wk", f16), L, KV, H);
  w.wv_t = transpose(r.floats(L * KV * H, "wv", f16), L, KV, H);
  w.wo_t = transpose(r.floats(L * H * H, "wo", f16), L, H, H);
  w.ffn_norm = r.floats(L * H, "feed-forward norms", f16);
  w.gate_t = transpose(r.floats(L * I * H, "gate", f16), L, I, H);
  w.up_t = transpose(r.floats(L * I * H, "up", f16), L, I, H);
  w.down_t = transpose(r.floats(L * H * I, "down", f16), L, H, I);
  w.final_norm = r.floats(H, "final norm", f16);
  w.embedding_t = transpose(c.tied_output ? w.embedding : r.floats(V * H, "output", f16), 1, V, H);
  return m;
}

RopeSpec Model::rope_spec(std::string_view method, double factor) const {
  return llama::rope_spec(config_, method, factor);
}

RopeSpec rope_spec(const Config& config, std::string_view method, double factor) {
  RopeSpec spec;
  set_method(spec, method, "method");
  spec.head_dim = config.head_dim();
  spec.rotary_dim = config.head_dim();
  spec.layout = Layout::kInterleaved;
  spec.rope_theta = config.rope_theta;
  spec.factor = factor;
  spec.original_max_position_embeddings = config.max_seq_len;
  if (method_reads(spec, kParamMaxContext)) spec.max_position_embeddings = config.max_seq_len;
  validate(spec);
  return spec;
}

}  // namespace posenc::llama
