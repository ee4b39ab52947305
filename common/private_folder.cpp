#include "private_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace llmc {

namespace fs = std::filesystem;

namespace {

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

std::optional<std::string> whyNotPrivate(const fs::path& folder) {
  std::error_code error;
  const fs::path real = fs::canonical(folder, error);
  if (error) return "cannot be resolved: " + error.message();
  const uid_t user = ::geteuid();
  struct stat s;
  if (::stat(real.c_str(), &s) != 0) return std::string("cannot be examined: ") + std::strerror(errno);
  if (!S_ISDIR(s.st_mode)) return std::string("is not a folder");
  if (s.st_uid != user)
    return "is owned by user " + std::to_string(s.st_uid) + ", not by this user (" + std::to_string(user) + ")";
  if (s.st_mode & (S_IWGRP | S_IWOTH))
    return "is writable by its group or by others (mode " + octal(s.st_mode) + "; chmod go-w fixes it)";
  // The folders above: none may let another user rename or replace it.
  for (fs::path above = real.parent_path(); ; above = above.parent_path()) {
    if (::stat(above.c_str(), &s) != 0) return above.string() + " cannot be examined: " + std::strerror(errno);
    if (s.st_uid != user && s.st_uid != 0)
      return "lies in " + above.string() + ", owned by user " + std::to_string(s.st_uid) +
             " (neither this user nor root)";
    if ((s.st_mode & (S_IWGRP | S_IWOTH)) && !(s.st_mode & S_ISVTX))
      return "lies in " + above.string() + ", writable by its group or by others (mode " + octal(s.st_mode) + ")";
    if (above == above.root_path() || above.empty()) break;
  }
  return std::nullopt;
}

void createPrivateFolder(const fs::path& folder) {
  std::error_code error;
  if (fs::is_directory(folder, error)) return;
  const fs::path parent = folder.parent_path();
  if (!parent.empty() && parent != folder) createPrivateFolder(parent);
  if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error(folder.string() + ": cannot create the folder: " + std::strerror(errno));
}

std::optional<std::string> readRegularFile(const fs::path& path, uint64_t maxBytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    if (errno == ELOOP) throw std::runtime_error("a symbolic link, not a file");
    throw std::runtime_error(std::string("cannot be opened: ") + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat s;
  if (::fstat(fd, &s) != 0) throw std::runtime_error(std::string("cannot be examined: ") + std::strerror(errno));
  if (!S_ISREG(s.st_mode)) throw std::runtime_error("not a regular file");
  if (static_cast<uint64_t>(s.st_size) > maxBytes)
    throw std::runtime_error(std::to_string(s.st_size) + " bytes, more than the " + std::to_string(maxBytes) +
                             " allowed");
  std::string bytes(static_cast<size_t>(s.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw std::runtime_error(std::string("read failed: ") + std::strerror(errno));
    if (got == 0) break;  // shrank while read: what is there
    done += static_cast<size_t>(got);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace llmc
