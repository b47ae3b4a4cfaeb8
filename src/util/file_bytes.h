// src/util/file_bytes.h: a whole file as read-only bytes (internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::detail {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// How much of a file a reader may take, and what it checks before taking the rest.
struct FileLimit {
  std::uint64_t max_bytes = 0;
  // false: regular files are mapped at any size (a GGUF can be many GiB; only its first bytes
  // and a few small tensors are touched) and the cap applies to pipes and devices only, whose
  // bytes are copied into memory.
  bool regular_files_too = true;
  std::string_view what;  // "a config.json", in the error
  // Called with the first bytes (up to kStartBytes, fewer if the file is shorter) before the
  // rest is read: a reader throws here when the file is not its format, so that /dev/zero or a
  // pipe of the wrong thing is refused after one read, not after the cap.
  std::function<void(std::span<const std::uint8_t>)> check_start;
};

inline constexpr std::size_t kStartBytes = 4096;

// A read-only view of a whole file: mmap for regular files, read() into memory for anything
// else (a pipe). Throws Error "cannot read PATH: REASON" (a directory, a missing or unreadable
// file, more than limit.max_bytes).
class FileBytes {
 public:
  FileBytes(const std::filesystem::path& path, const FileLimit& limit);
  ~FileBytes();
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  std::span<const std::uint8_t> bytes() const;

 private:
  void close_fd();

  int fd_ = -1;
  const std::uint8_t* map_ = nullptr;
  std::size_t size_ = 0;
  std::vector<std::uint8_t> copy_;
};

// "64 MiB", "2 GiB", "1000 bytes": a cap for people.
std::string size_text(std::uint64_t bytes);

// What a file that starts with these bytes looks like, for messages about a file given to the
// wrong reader: "a GGUF file", "a NumPy .npy file", "a llama2.c / llama2.ts v1 model file",
// "JSON text (a config.json?)"; "" when none of these.
std::string foreign_format(std::span<const std::uint8_t> start);

}  // namespace posenc::detail
