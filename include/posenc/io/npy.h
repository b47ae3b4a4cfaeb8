// posenc/io/npy.h: NumPy .npy files, so tensors can travel between posenc and Python.
//
// The format (numpy/lib/format.py, NEP 1):
//
//   offset 0   "\x93NUMPY"                 magic, 6 bytes
//          6   major, minor                 1.0, 2.0 or 3.0
//          8   header length                u16 (1.0) or u32 (2.0, 3.0), little-endian
//   8 + 2|4    header                       a Python dict literal, padded with spaces, '\n' last:
//                                 {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//   then       data                         prod(shape) items of descr, C order
//
// Supported dtypes: '<f4' float32, '<f2' float16, '<i4' int32, '<i8' int64, and '<u2' uint16,
// which also carries bfloat16 bits (NumPy has no bfloat16). C order only.
//
// The reader is meant for untrusted input: every malformed file (bad magic or version, a header
// that is not the expected dict, negative or overflowing shapes, data shorter than the shape
// needs) is an Error that names the file and the problem; it never reads past the buffer nor
// allocates more than the file holds. Bytes after the data are tolerated, with a warning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc {

struct NpyArray {
  std::string descr;                  // "<f4", "<f2", "<i4", "<i8" or "<u2"
  std::vector<std::int64_t> shape;    // () for a scalar
  std::vector<std::byte> data;        // prod(shape) items in C order, native byte order
  std::vector<std::string> warnings;  // legal oddities of the file (trailing bytes)

  std::int64_t element_count() const;
};

// Bytes per item of a supported descr; throws Error naming the descr and the supported ones.
std::size_t npy_item_size(std::string_view descr);

// Parses the bytes of a .npy file; `name` (the file name) starts every message.
// Example: parse_npy(bytes, "q.npy").shape == {8, 4, 64}.
NpyArray parse_npy(std::span<const std::byte> bytes, std::string_view name);

// The most read_npy copies from a pipe or device (a regular file is mapped, its data copied
// once): 4 GiB is four times a bf16 [131072 tokens, 32 heads, 128] q tensor.
inline constexpr std::uint64_t kMaxStreamedNpyBytes = std::uint64_t{4} << 30;

// Reads and parses a file; throws Error naming the path when it cannot be read, does not start
// with the .npy magic (checked on the first bytes) or is a pipe of more than kMaxStreamedNpyBytes.
NpyArray read_npy(const std::filesystem::path& path);

// Writes a version 1.0 file as numpy.save does, byte for byte: header padded with spaces (plus
// NumPy's spare room for growing the first axis) so that the data starts at a multiple of 64.
// `data` holds prod(shape) items of `descr` in native byte order. Throws Error naming the path
// on a bad descr, a shape that does not match the data size, or a failed write.
void write_npy(const std::filesystem::path& path, std::string_view descr,
               std::span<const std::int64_t> shape, std::span<const std::byte> data);

// The bytes write_npy would write.
std::vector<std::byte> npy_bytes(std::string_view descr, std::span<const std::int64_t> shape,
                                 std::span<const std::byte> data);

}  // namespace posenc
