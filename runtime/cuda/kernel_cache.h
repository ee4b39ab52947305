// The disk cache of compiled kernels: the second start of a program finds its
// kernels here instead of compiling them again.
//
// An entry is one file, <directory>/<key as 16 hex digits>.kernel, keyed by a
// hash of everything that determines NVRTC's output (see kernelCacheKey). It
// starts with a header (magic, format version, key, the payload's field sizes
// and a SHA-256 of the whole entry), so a truncated, corrupt, altered or stale
// entry is detected, reported as a one-line warning on stderr and compiled
// anew (and rewritten): never trusted. The folder is used only when it is
// private to this user (cache_folder.h): else a warning, and every kernel is
// compiled without the cache. Entries are written to a fresh temporary in the
// same folder and renamed into place (common/atomic_file.h), so readers see a
// whole entry or none, and concurrent writers of one entry (threads or
// processes) are safe: the last rename wins, with the same bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "nvrtc_compiler.h"

namespace llmc::cuda {

// The hash of the kernel's source in its canonical form (compiledSourceForm:
// kernels that differ only in the names the emitter numbers share an entry,
// whose CompiledKernel::name is then the entry point of the one compiled),
// arch and options, the language standard, NVRTC's version and the contents
// of llmc's device headers.
uint64_t kernelCacheKey(const KernelSource& kernel);

class KernelCache {
 public:
  // The folder is created if missing (mode 0700). One that cannot be created,
  // or is not private to this user, makes an unusable cache (with a warning):
  // it finds nothing and stores nothing.
  explicit KernelCache(std::filesystem::path directory);

  // $LLMC_CACHE_DIR, else $XDG_CACHE_HOME/llmc/kernels, else ~/.cache/llmc/kernels.
  static std::filesystem::path defaultDirectory();

  const std::filesystem::path& directory() const { return directory_; }
  bool usable() const { return usable_; }
  std::filesystem::path entryPath(const KernelSource& kernel) const;

  // The cached compilation of `kernel`, or nothing when there is no sound entry
  // (a broken one is reported on stderr).
  std::optional<CompiledKernel> find(const KernelSource& kernel) const;

  // Stores `compiled` as the entry of `kernel`. A failure to write is reported
  // on stderr, not thrown: the cache only saves time.
  void store(const KernelSource& kernel, const CompiledKernel& compiled) const;

 private:
  std::filesystem::path entryPath(uint64_t key) const;

  std::filesystem::path directory_;
  bool usable_;
};

}  // namespace llmc::cuda
