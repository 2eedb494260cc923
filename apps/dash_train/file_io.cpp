#include "file_io.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace dash_train {
namespace {

// Writes everything, retrying short writes and EINTR; false with errno set on failure.
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const auto written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes) {
  const auto temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TORCH_CHECK(
      fd >= 0, "dash-train: cannot write '", path, "': cannot create '", temporary, "': ", io_error_text(errno));
  const bool written = write_all(fd, bytes.data(), bytes.size()) && ::fsync(fd) == 0;
  const int write_error = errno;
  const bool closed = ::close(fd) == 0;  // NFS reports some write errors only here
  const int close_error = errno;
  if (!written || !closed || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = !written ? write_error : !closed ? close_error : errno;
    ::unlink(temporary.c_str());
    TORCH_CHECK(false, "dash-train: cannot write '", path, "' (", bytes.size(), " bytes): ", io_error_text(error),
        "; the previous file, if any, is unchanged");
  }
  // The rename itself reaches the disk only with the folder's entry.
  auto folder = std::filesystem::path(path).parent_path();
  const int folder_fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder_fd >= 0) {
    (void)::fsync(folder_fd);  // best effort: some file systems refuse fsync on folders
    ::close(folder_fd);
  }
}

std::string io_error_text(int error) { return error != 0 ? std::strerror(error) : "write failed"; }

uint64_t fnv1a(const char* data, size_t size) {
  uint64_t hash = 14695981039346656037ULL;
  for (size_t i = 0; i < size; ++i) {
    hash ^= static_cast<unsigned char>(data[i]);
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace dash_train
