// posenc/io/gguf.h: a model's RoPE from its GGUF file (llama.cpp's format), read defensively.
//
// The format (versions 2 and 3, little-endian; ggml's include/gguf.h and docs/gguf.md):
//
//   byte 0   "GGUF"              magic
//        4   version             u32: 2 or 3 (version 1 stored 32-bit counts; it is refused)
//        8   tensor_count        u64
//       16   metadata_kv_count   u64
//       24   metadata_kv_count x { key: string, value_type: u32, value }
//            tensor_count      x { name: string, n_dims: u32 (<= 4), ne: n_dims x u64,
//                                  ggml_type: u32, offset: u64 (from the data section) }
//            padding up to a multiple of general.alignment (u32, a power of two, default 32)
//            the data section: each tensor at its offset, which is a multiple of the alignment
//
//   string = u64 byte count + the bytes (no terminator)
//   value  = u8 i8 u16 i16 u32 i32 f32 | bool (one byte, 0 or 1) | string
//          | array { element type: u32, count: u64, count elements } | u64 i64 f64
//   value types 0..12 in that order: u8 i8 u16 i16 u32 i32 f32 bool str arr u64 i64 f64;
//   arrays may hold arrays (up to kGgufMaxArrayDepth levels here).
//
// The reader trusts nothing in the file: every read is bounds-checked, every count is checked
// against the bytes left before anything is allocated for it (a count of 2^60 strings in a
// 1 KiB file is refused at once: a string takes at least 8 bytes), every size and offset sum is
// checked for overflow, and tensor data must lie inside the file, aligned. Memory stays within
// a small constant factor of the file size. A malformed file gives an Error naming the file,
// the byte offset, the field and its value, e.g.
//   model.gguf: byte 210: metadata key #3 ("llama.rope.freq_base"): value type (13) is not a
//   GGUF type (0..12)
//
// The mapping to a ModelConfig follows llama.cpp (src/llama-model.cpp load_hparams and
// llama_model_rope_type, src/llama-context.cpp, convert_hf_to_gguf.py): see GgufModel.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/ggml.h"
#include "posenc/io/config.h"

namespace posenc {

// gguf.h's gguf_type.
enum class GgufType : std::uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64".
std::string_view gguf_type_name(GgufType type);

// Arrays nested deeper than this are refused (llama.cpp refuses any nesting; the format allows
// it, and a bound keeps the reader's recursion shallow).
inline constexpr int kGgufMaxArrayDepth = 8;

// ggml_type names ("f32", "f16", "q4_0", ..., "mxfp4"); "" for an id this reader does not know.
std::string_view ggml_type_name(std::uint32_t ggml_type);

// One metadata value, as the file stores it.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  std::uint64_t uint_value = 0;  // u8, u16, u32, u64; bool (0 or 1)
  std::int64_t int_value = 0;    // i8, i16, i32, i64
  double float_value = 0.0;      // f64, and f32 widened exactly
  std::string string_value;      // str
  // Arrays: the element type, the count, and the elements' bytes exactly as in the file
  // (validated when the file was read; the accessors below decode them).
  GgufType element_type = GgufType::kUint8;
  std::uint64_t count = 0;
  std::vector<std::uint8_t> raw;

  bool is_integer() const;  // u8..u64, i8..i64 (scalars)
  bool is_float() const;    // f32, f64 (scalars)
  // The integer of an integer scalar; nullopt for other types or a u64 above INT64_MAX.
  std::optional<std::int64_t> as_integer() const;
  // Element i of an array of integers, floats or bools, as a double; nullopt for other arrays
  // or i >= count.
  std::optional<double> number_at(std::uint64_t i) const;
  // The strings of an array of strings (empty for other values).
  std::vector<std::string> strings() const;
  // The elements of an array of arrays (empty for other values).
  std::vector<GgufValue> arrays() const;
  // For messages: `u32 4096`, `f32 10000`, `str "llama"`, `bool true`, `arr[str] of 32000`.
  std::string describe() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> ne;  // ggml order: ne[0] varies fastest; at most 4 dims
  std::uint32_t ggml_type = 0;
  std::uint64_t offset = 0;  // from the start of the data section
  std::uint64_t n_elements = 0;
  std::uint64_t n_bytes = 0;
  std::uint64_t info_at = 0;  // byte offset of this tensor info in the file (for messages)
};

// The names of the tensors that carry RoPE factors (llama-arch.cpp LLM_TENSOR_NAMES plus the
// ".weight" suffix that convert_hf_to_gguf.py's format_tensor_name adds; llama.cpp looks only
// for these names).
inline constexpr std::string_view kGgufRopeFreqs = "rope_freqs.weight";                 // Llama 3
inline constexpr std::string_view kGgufRopeFactorsLong = "rope_factors_long.weight";    // LongRoPE
inline constexpr std::string_view kGgufRopeFactorsShort = "rope_factors_short.weight";  // LongRoPE

struct GgufFile {
  std::string source;  // file name, used in messages
  std::uint32_t version = 0;
  std::uint64_t file_size = 0;
  std::uint64_t alignment = 32;   // general.alignment, else GGUF_DEFAULT_ALIGNMENT
  std::uint64_t data_offset = 0;  // where the data section starts (0 when there are no tensors)
  std::map<std::string, GgufValue, std::less<>> metadata;        // by key (keys are unique)
  std::vector<GgufTensorInfo> tensors;                           // in file order
  std::map<std::string, std::size_t, std::less<>> tensor_index;  // name -> index in `tensors`
  // The data of the RoPE factor tensors the file has (kGgufRopeFreqs, ...), f32 only.
  std::map<std::string, std::vector<float>, std::less<>> rope_tensors;

  const GgufValue* find(std::string_view key) const;               // nullptr when absent
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
};

// Parses a whole GGUF file held in memory. `source` names the file in messages. Throws Error
// on anything malformed (see the top of this file); never reads outside `bytes`.
GgufFile parse_gguf(std::span<const std::uint8_t> bytes, std::string_view source = "model.gguf");

// The most read_gguf copies into memory from a pipe or device (a regular file is mapped at any
// size): the parser needs the whole file to check the tensor data, and 4 GiB holds every
// model a pipe is sensibly fed with, while /dev/zero or a runaway pipe stops there.
inline constexpr std::uint64_t kMaxStreamedGgufBytes = std::uint64_t{4} << 30;

// Maps the file read-only and parses it; throws Error when it cannot be read, does not start
// with the magic (checked on the first bytes) or is a pipe of more than kMaxStreamedGgufBytes.
GgufFile read_gguf(const std::filesystem::path& path);

// A GGUF file seen as a Hugging Face config (so every command treats both alike), plus what
// llama.cpp itself hands to ggml_rope_ext for it.
//
// config: model_type = general.architecture (ARCH below); spec from
//   ARCH.rope.dimension_count          rotary_dim (default: head_dim)
//   ARCH.attention.key_length          head_dim, else embedding_length / attention.head_count
//                                      (deepseek2: head_dim = rotary_dim, as its HF config)
//   ARCH.rope.freq_base                rope_theta (default 10000)
//   ARCH.context_length                max_position_embeddings
//   ARCH.rope.scaling.type             none | linear | yarn | longrope (absent: llama.cpp reads
//                                      "linear", which without a factor is no scaling)
//   ARCH.rope.scaling.factor           factor (legacy ARCH.rope.scale_linear)
//   ARCH.rope.scaling.original_context_length   original_max_position_embeddings
//   ARCH.rope.scaling.attn_factor      multiplies the attention factor (LongRoPE: it)
//   ARCH.rope.scaling.yarn_log_multiplier       yarn mscale_all_dim; deepseek2 files store
//                                      0.1 x mscale_all_dim, which llama.cpp divides back
//   ARCH.rope.scaling.yarn_ext_factor / yarn_attn_factor / yarn_beta_fast / yarn_beta_slow
//   tensors rope_factors_short/long    longrope short_factor / long_factor
//   ARCH.rope.dimension_sections       4 i32 (t, h, w, e): ggml.sections, and spec.axis_map =
//                                      ggml_axis_map (rule kGgml, positions [4, tokens])
// layout: llama.cpp's rope type of the architecture (LLAMA_ROPE_TYPE_NORM: interleaved;
// NEOX, MROPE (qwen2vl; glm4 / glm4moe with positive t and h sections) and IMROPE (qwen3vl,
// qwen3vlmoe): half-split, ggml.mode the ggml mode; NONE: refused). A rope_freqs tensor (Llama 3 scaling,
// precomputed by the converter) cannot be turned back into llama3 parameters: the spec keeps
// the method the keys say and carries the tensor as spec.freq_factors (and ggml.freq_factors),
// so every numerics divides by it as llama.cpp does; LongRoPE tensors beside another scaling
// type become freq_factors too (the short ones). Each key must have the one type llama.cpp
// reads (u32 dims and contexts, f32 numbers, str, bool), and the factor tensors the shape
// [n_rot / 2]; anything else is refused, as llama.cpp refuses the file. RoPE keys
// this mapping does not apply are warnings; other keys are listed in config.ignored_keys.
// general.architecture "clip" (llama.cpp's mmproj files) maps the vision tower instead
// (docs/vision-rope.md): clip.projector_type qwen2vl_merger / qwen2.5vl_merger / qwen2.5o /
// qwen3vl_merger give ggml_rope_multi's VISION mode, llama4 build_rope_2d; others are refused.
struct GgufModel {
  ModelConfig config;
  GgmlRopeParams ggml;  // what llama.cpp passes to ggml_rope_ext / _multi at sequence length 0
  std::vector<std::string> notes;  // where each of ggml's parameters came from
};

// Maps a parsed file; throws Error naming the key and value when a RoPE key is invalid.
GgufModel gguf_model(const GgufFile& file);

// read_gguf + gguf_model.
GgufModel load_gguf_model(const std::filesystem::path& path);

}  // namespace posenc
