#include "file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "posenc/error.h"

namespace posenc::detail {

FileBytes::FileBytes(const std::filesystem::path& path) {
  const auto fail = [this, &path](int err) {
    close_fd();
    throw Error("cannot read " + path.string() + ": " + std::strerror(err));
  };
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail(errno);
  if (S_ISDIR(st.st_mode)) fail(EISDIR);
  if (S_ISREG(st.st_mode)) {
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) fail(errno);
    map_ = static_cast<const std::uint8_t*>(p);
    return;
  }
  std::uint8_t buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(errno);
    if (n == 0) break;
    copy_.insert(copy_.end(), buffer, buffer + n);
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

}  // namespace posenc::detail
