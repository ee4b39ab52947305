#include "atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace llmc {

namespace fs = std::filesystem;

namespace {

// The injected failure of testing::failWritesAfter: bytes left before it, or -1.
std::atomic<int64_t> gBytesBeforeFailure = -1;
std::atomic<int> gInjectedError = 0;

// write(2), or the injected failure once its bytes are used up.
ssize_t writeSome(int fd, const char* data, size_t bytes) {
  int64_t left = gBytesBeforeFailure.load();
  if (left >= 0) {
    if (left == 0) {
      errno = gInjectedError.load();
      return -1;
    }
    bytes = std::min<size_t>(bytes, static_cast<size_t>(left));
    gBytesBeforeFailure -= static_cast<int64_t>(bytes);
  }
  return ::write(fd, data, bytes);
}

// The process's umask, read without changing it (umask(2) would, for a moment,
// in every thread).
mode_t currentUmask() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "Umask:") {
      std::string octal;
      status >> octal;
      return static_cast<mode_t>(std::strtoul(octal.c_str(), nullptr, 8));
    }
    status.ignore(1 << 20, '\n');
  }
  return 022;  // no /proc: the usual one
}

std::string describe(int error) { return std::strerror(error); }

// The mkstemp template beside `destination`: ".NAME.XXXXXX", NAME cut short so
// the whole stays within a file name's 255 bytes.
std::string temporaryTemplate(const fs::path& destination) {
  std::string name = destination.filename().string();
  if (name.size() > 200) name.resize(200);
  const fs::path folder = destination.has_parent_path() ? destination.parent_path() : fs::path(".");
  return (folder / ("." + name + ".XXXXXX")).string();
}

// Where the bytes go: the file to replace (or create), or a device, FIFO,
// pipe or terminal to write into (`into`).
struct Resolved {
  fs::path path;
  bool into = false;
};

// Follows the destination's symlinks that this user or root made (a user's
// own link to a file, /dev/stdout); one that another user made is replaced,
// never followed, so a link planted in a shared folder cannot redirect the
// write (in a sticky folder such as /tmp the replacing rename fails).
Resolved resolve(const fs::path& destination, bool followOwnLinks) {
  fs::path p = destination;
  for (int hop = 0; hop < 40; ++hop) {
    struct stat s;
    if (::lstat(p.c_str(), &s) != 0) {
      if (errno == ENOENT) return {p};
      throw FileWriteError(destination.string() + ": cannot write: " + describe(errno));
    }
    if (S_ISREG(s.st_mode)) return {p};
    if (S_ISDIR(s.st_mode)) throw FileWriteError(destination.string() + ": is a folder");
    if (S_ISBLK(s.st_mode)) throw FileWriteError(destination.string() + ": is a block device; not written");
    if (!S_ISLNK(s.st_mode)) return {p, true};  // a character device, FIFO or socket
    if (!followOwnLinks || (s.st_uid != ::geteuid() && s.st_uid != 0)) return {p};
    // A pipe or terminal behind a magic link (/dev/stdout -> /proc/self/fd/1
    // -> pipe:[123]) has no path to follow: it is written into through the link.
    struct stat target;
    if (::stat(p.c_str(), &target) == 0 && !S_ISREG(target.st_mode) && !S_ISDIR(target.st_mode) &&
        !S_ISBLK(target.st_mode))
      return {p, true};
    std::error_code error;
    const fs::path next = fs::read_symlink(p, error);
    if (error) throw FileWriteError(destination.string() + ": cannot read the link: " + error.message());
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  throw FileWriteError(destination.string() + ": too many levels of symbolic links");
}

}  // namespace

AtomicFile::AtomicFile(fs::path destination, AtomicWriteOptions options)
    : destination_(std::move(destination)), options_(options) {
  const std::string path = destination_.string();
  if (destination_.empty() || !destination_.has_filename())
    throw FileWriteError(path + ": not a file name");
  const Resolved target = resolve(destination_, options_.followOwnLinks);
  if (target.into) {
    if (options_.nonRegular == NonRegularDestination::Refuse)
      throw FileWriteError(path + ": is not a regular file (a device, FIFO or socket); not replaced");
    // As `> FILE` would: into the device or FIFO itself, never creating a file.
    fd_ = ::open(target.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) throw FileWriteError(path + ": cannot open for writing: " + describe(errno));
    struct stat s;
    if (::fstat(fd_, &s) != 0 || S_ISREG(s.st_mode) || S_ISBLK(s.st_mode)) {  // changed since: not written
      ::close(fd_);
      fd_ = -1;
      throw FileWriteError(path + ": changed while being opened; not written");
    }
    return;
  }
  target_ = target.path;
  mode_t mode = options_.mode.value_or(0666 & ~currentUmask());
  struct stat existing;
  if (!options_.mode && ::lstat(target_.c_str(), &existing) == 0 && S_ISREG(existing.st_mode))
    mode = existing.st_mode & 0777;  // the replaced file's permissions, without setuid, setgid or sticky
  std::string name = temporaryTemplate(target_);
  std::vector<char> buffer(name.begin(), name.end());
  buffer.push_back('\0');
  fd_ = ::mkostemp(buffer.data(), O_CLOEXEC);  // O_CREAT | O_EXCL, mode 0600
  if (fd_ < 0) throw FileWriteError(path + ": cannot create a temporary file beside it: " + describe(errno));
  temporary_ = buffer.data();
  if (::fchmod(fd_, mode) != 0) fail("cannot set the permissions of its temporary", errno);
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  temporary_.clear();
}

void AtomicFile::fail(const std::string& what, int error) {
  const std::string temporary = temporary_.string();
  discard();
  std::string message = destination_.string() + ": " + what + ": " + describe(error);
  if (!temporary.empty()) message += " (its temporary " + temporary + " was removed)";
  throw FileWriteError(message);
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (fd_ < 0) throw FileWriteError(destination_.string() + ": written after it was committed or failed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = writeSome(fd_, p, bytes);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) fail("write failed", written < 0 ? errno : EIO);
    p += written;
    bytes -= static_cast<size_t>(written);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw FileWriteError(destination_.string() + ": committed twice or after a failure");
  if (temporary_.empty()) {  // a device or FIFO written into: closing is all
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw FileWriteError(destination_.string() + ": write failed: " + describe(errno));
    return;
  }
  // On disk before the rename, or a crash could leave the destination empty.
  if (options_.sync && ::fsync(fd_) != 0) fail("write failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("write failed", errno);
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) fail("cannot rename its temporary into place", errno);
  temporary_.clear();
  if (options_.sync) {  // the rename itself on disk: best effort
    const fs::path folder = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
    const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
}

void writeFileAtomically(const fs::path& destination, std::string_view bytes, AtomicWriteOptions options) {
  AtomicFile file(destination, options);
  file.write(bytes);
  file.commit();
}

namespace testing {

void failWritesAfter(std::optional<uint64_t> bytes, int error) {
  gInjectedError = error;
  gBytesBeforeFailure = bytes ? static_cast<int64_t>(*bytes) : -1;
}

}  // namespace testing

}  // namespace llmc
