// The disk cache of emitted modules: planning a training step (fusion,
// partition search, emission) takes seconds, and the same diagrams with the
// same sizes and options plan the same way, so a second start reads the
// module back instead. With the kernel cache (kernel_cache.h) that makes a
// warm start: no planning, no NVRTC.
//
// An entry is <directory>/<key as 16 hex digits>.module, JSON. The key hashes
// what determines the plan: the diagram files (every .dg under the diagrams
// folder, by content), the entry, sizes and options, the target file, and the
// program that plans (the running executable's path, size and modification
// time: a rebuilt llmc plans anew). An entry's first line holds the SHA-256
// of the JSON after it; one whose digest does not match, or that does not
// parse, is reported on stderr, planned again and rewritten. The folder is
// used only when it is private to this user (cache_folder.h). Entries are
// written to a fresh temporary and renamed (common/atomic_file.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "codegen/module.h"

namespace llmc::cuda {

// The hash of a plan's inputs: `diagramsDir`'s .dg files, `description` (the
// entry, sizes and options, as text), the target file, the executable.
uint64_t moduleCacheKey(const std::filesystem::path& diagramsDir, const std::string& description,
                        const std::string& targetFile);

class ModuleCache {
 public:
  // Created if missing (mode 0700); one that cannot be, or is not private to
  // this user, makes an unusable cache (with a warning): plans are not kept.
  explicit ModuleCache(std::filesystem::path directory);
  bool usable() const { return usable_; }

  // $LLMC_CACHE_DIR/plans, else the kernel cache's default folder's plans.
  static std::filesystem::path defaultDirectory();

  std::optional<CudaModule> find(uint64_t key) const;
  void store(uint64_t key, const CudaModule& module) const;

  // The cached module for `key`, or `plan()`'s, stored for next time.
  // `hit` says which.
  CudaModule findOrPlan(uint64_t key, const std::function<CudaModule()>& plan, bool* hit = nullptr) const;

 private:
  std::filesystem::path path(uint64_t key) const;
  std::filesystem::path directory_;
  bool usable_;
};

// A module as text and back: every field a runtime needs to compile, load
// and run it (not the GEMM plans) as one line of JSON, then the launches'
// sources one after another as they are, their lengths in the JSON — read
// back without unescaping megabytes of CUDA inside JSON strings.
std::string moduleToText(const CudaModule& module);
CudaModule moduleFromText(std::string_view text);  // throws std::runtime_error naming the field

}  // namespace llmc::cuda
