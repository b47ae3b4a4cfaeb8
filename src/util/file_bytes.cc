#include "util/file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "posenc/core/error.h"

namespace posenc::detail {

FileBytes::FileBytes(const std::filesystem::path& path, const FileLimit& limit) {
  const auto fail_with = [this, &path](const std::string& reason) {
    close_fd();
    throw Error("cannot read " + path.string() + ": " + reason);
  };
  const auto fail = [&fail_with](int err) { fail_with(std::strerror(err)); };
  const auto too_big = [&](bool regular) {
    fail_with(std::string(regular ? "it is larger than " : "more than ") +
              size_text(limit.max_bytes) + (regular ? "" : " from a pipe or device") +
              ", the limit for " + std::string(limit.what) +
              (limit.regular_files_too
                   ? ""
                   : " read into memory (give the file itself: files are mapped at any size)"));
  };
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail(errno);
  if (S_ISDIR(st.st_mode)) fail(EISDIR);
  if (S_ISREG(st.st_mode)) {
    size_ = static_cast<std::size_t>(st.st_size);
    if (limit.regular_files_too && static_cast<std::uint64_t>(st.st_size) > limit.max_bytes)
      too_big(true);
    if (size_ == 0) {
      if (limit.check_start) limit.check_start({});
      return;
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) fail(errno);
    map_ = static_cast<const std::uint8_t*>(p);
    if (limit.check_start) {
      try {
        limit.check_start(std::span<const std::uint8_t>(map_, std::min(size_, kStartBytes)));
      } catch (...) {
        ::munmap(const_cast<std::uint8_t*>(map_), size_);
        map_ = nullptr;
        close_fd();
        throw;
      }
    }
    return;
  }
  bool checked = !limit.check_start;
  std::uint8_t buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(errno);
    if (n > 0 && copy_.size() + static_cast<std::size_t>(n) > limit.max_bytes) too_big(false);
    copy_.insert(copy_.end(), buffer, buffer + n);
    if (!checked && (n == 0 || copy_.size() >= kStartBytes)) {
      checked = true;
      try {
        limit.check_start(
            std::span<const std::uint8_t>(copy_).first(std::min(copy_.size(), kStartBytes)));
      } catch (...) {
        close_fd();
        throw;
      }
    }
    if (n == 0) break;
  }
}

FileBytes::~FileBytes() {
  if (map_) ::munmap(const_cast<std::uint8_t*>(map_), size_);
  close_fd();
}

void FileBytes::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::span<const std::uint8_t> FileBytes::bytes() const {
  return map_ ? std::span<const std::uint8_t>(map_, size_) : std::span<const std::uint8_t>(copy_);
}

std::string size_text(std::uint64_t bytes) {
  if (bytes >= kGiB && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + " GiB";
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

std::string foreign_format(std::span<const std::uint8_t> start) {
  const std::string_view s(reinterpret_cast<const char*>(start.data()), start.size());
  if (s.starts_with("GGUF")) return "a GGUF file";
  if (s.starts_with("\x93NUMPY")) return "a NumPy .npy file";
  // v1: version byte 1, i32 length 5, "llama".
  if (s.size() >= 10 && s[0] == 1 && s.substr(1, 4) == std::string_view("\x05\0\0\0", 4) &&
      s.substr(5, 5) == "llama") {
    return "a llama2.c / llama2.ts v1 model file";
  }
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (s[first] == '{' || s[first] == '['))
    return "JSON text (a config.json?)";
  return "";
}

}  // namespace posenc::detail
