// src/file_bytes.h: a whole file as read-only bytes (internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace posenc::detail {

// A read-only view of a whole file: mmap for regular files (a model file can be many GiB while
// a reader needs its first bytes and a few small tensors), read() into memory for anything
// else (a pipe). Throws Error "cannot read PATH: REASON".
class FileBytes {
 public:
  explicit FileBytes(const std::filesystem::path& path);
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

}  // namespace posenc::detail
