// GGUF reader (gguf.h), written from the format's public description: ggml's include/gguf.h
// and docs/gguf.md. Facts from ggml's sources are cited where used; no code is shared.
//
// Every read goes through Reader, which checks the bytes left first. Counts are checked
// against the bytes left times the smallest encoding of one element before anything is
// reserved, so allocation is bounded by the file size.
#include "posenc/io/gguf.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "io/gguf_internal.h"
#include "posenc/core/error.h"
#include "util/file_bytes.h"
namespace posenc {
namespace {

using namespace gguf_detail;

constexpr std::uint32_t kMaxDims = 4;            // GGML_MAX_DIMS (ggml.h)
constexpr std::uint64_t kDefaultAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT (gguf.h)

// The smallest encodings, for the count checks: a key-value pair is a key of at least one
// byte (u64 length + 1), its u32 type and a value of at least one byte; a tensor info is an
// empty name (u64), n_dims (u32), ggml_type (u32) and offset (u64).
constexpr std::uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

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
    r.fail_at(4,
              "version (1) is unsupported: GGUF version 1 used 32-bit counts and lengths; "
              "this reader reads versions 2 and 3 (convert the file again)");
  }
  if (f.version != 2 && f.version != 3) {
    const bool swapped = (f.version & 0xFFFFu) == 0;
    r.fail_at(4, "version (" + std::to_string(f.version) +
                     ") is unsupported: this reader reads "
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
      r.fail_at(r.pos(), "general.alignment (" + a->describe() + ") must be a u32 power of two");
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
    constexpr auto kMaxElements =
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t ne_at = r.pos();
      const std::string dim = field + ": ne[" + std::to_string(d) + "]";
      const std::uint64_t ne = r.u64(dim);
      if (ne > kMaxElements)
        r.fail_at(ne_at, dim + " (" + std::to_string(ne) + ") is above 2^63 - 1");
      t.ne.push_back(ne);
      if (ne != 0 && elements > kMaxElements / ne) {
        std::string shape;
        for (std::uint64_t x : t.ne) shape += (shape.empty() ? "" : ", ") + std::to_string(x);
        r.fail_at(ne_at,
                  field + ": the element count of shape (" + shape + ", ...) overflows 2^63 - 1");
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
                             std::string(gt->name) + " block size (" + std::to_string(gt->block) +
                             ")");
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
  const detail::FileBytes file(
      path,
      {kMaxStreamedGgufBytes, false, "a GGUF file", [&source](std::span<const std::uint8_t> start) {
         if (start.size() >= 4 && std::memcmp(start.data(), "GGUF", 4) != 0)
           parse_gguf(start, source);  // throws: the magic
       }});
  return parse_gguf(file.bytes(), path.string());
}

}  // namespace posenc
