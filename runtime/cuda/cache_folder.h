// The folder of a disk cache (kernels, plans), opened only when it is private
// to this user: what a cache hands back runs on the GPU as it is, so a folder
// that someone else could write into is not used at all.
#pragma once

#include <filesystem>
#include <string>

namespace llmc::cuda {

// Creates `folder` (mode 0700, with its missing parents) and checks that it is
// private (common/private_folder.h). False, after a one-line warning on stderr
// (once per folder and process) naming the folder and why, when it cannot be
// created or is not private: the caller then works without the cache.
bool openCacheFolder(const std::filesystem::path& folder, const std::string& what);

// One line, written at once, so that warnings of parallel compiles do not
// interleave: "llmc: warning: MESSAGE".
void cacheWarning(const std::string& message);

}  // namespace llmc::cuda
