// Files that appear whole or not at all. Every file llmc writes (llmc-compile
// -o, token shards, checkpoints, the training state, loss plots, cache
// entries) goes through AtomicFile:
//
// - the bytes go to a temporary that mkstemp creates in the destination's
//   folder (".NAME.XXXXXX": a fresh name no one else can have planted, opened
//   with O_EXCL, so never through a symlink), then it is fsync'd and renamed
//   over the destination: a reader sees the old file or the new one, and a
//   crash leaves no half file under the destination's name;
// - on any failure (a full disk, an I/O error, an exception of the caller
//   before commit) the temporary is removed and the error names the
//   destination: nothing is left behind to keep a disk full;
// - a destination that is a symlink made by this user or root (a user's own
//   link, /dev/stdout) is followed, and the file it leads to replaced the same
//   way; a symlink made by another user is replaced, never followed (in a
//   sticky folder such as /tmp that rename fails), so a link planted in a
//   shared folder cannot redirect the write;
// - a folder or a block device is an error; a character device (/dev/null,
//   /dev/full, a terminal), a FIFO or a pipe is refused, or, with
//   NonRegularDestination::WriteInto, written into directly as a shell
//   redirection would (llmc-compile -o does that): never replaced by a file.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace llmc {

enum class NonRegularDestination { Refuse, WriteInto };

struct AtomicWriteOptions {
  NonRegularDestination nonRegular = NonRegularDestination::Refuse;
  // The new file's permissions: by default those of the file it replaces, else
  // 0666 less the umask (as a plain open() would create it).
  std::optional<mode_t> mode = std::nullopt;
  // fsync the file before the rename and the folder after it. Caches, whose
  // entries are checked when read, skip it to keep a cold start fast.
  bool sync = true;
  // Follow a symlink at the destination that this user or root made. Caches,
  // which never read through a link, replace it instead.
  bool followOwnLinks = true;
};

// A failure to write: the message starts with the destination's path.
class FileWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AtomicFile {
 public:
  // Creates the temporary (or opens a non-regular destination to write into).
  // Throws FileWriteError.
  explicit AtomicFile(std::filesystem::path destination, AtomicWriteOptions options = {});
  ~AtomicFile();  // without commit(): the temporary is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Throw FileWriteError after removing the temporary.
  void write(const void* data, size_t bytes);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Syncs, closes and renames the temporary over the destination.
  void commit();

  const std::filesystem::path& destination() const { return destination_; }
  // The file replaced: the destination, or where its symlinks lead. Empty,
  // as the temporary is, when writing into a device or FIFO directly.
  const std::filesystem::path& target() const { return target_; }
  const std::filesystem::path& temporary() const { return temporary_; }

 private:
  [[noreturn]] void fail(const std::string& what, int error);
  void discard();

  std::filesystem::path destination_, target_, temporary_;
  AtomicWriteOptions options_;
  int fd_ = -1;
};

// The whole file at once.
void writeFileAtomically(const std::filesystem::path& destination, std::string_view bytes,
                         AtomicWriteOptions options = {});

namespace testing {
// Makes AtomicFile's writes fail with `error` (ENOSPC: a full disk) once
// `bytes` more bytes have been written in this process; nullopt turns it off.
void failWritesAfter(std::optional<uint64_t> bytes, int error);
}  // namespace testing

}  // namespace llmc
