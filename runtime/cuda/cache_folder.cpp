#include "cache_folder.h"

#include <fmt/format.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <stdexcept>

#include "private_folder.h"

namespace llmc::cuda {

void cacheWarning(const std::string& message) {
  const std::string line = "llmc: warning: " + message + "\n";
  std::fputs(line.c_str(), stderr);
}

bool openCacheFolder(const std::filesystem::path& folder, const std::string& what) {
  std::string why;
  try {
    createPrivateFolder(folder);
    if (auto problem = whyNotPrivate(folder)) why = "it " + *problem;
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (why.empty()) return true;
  // Every cache object made on the folder would say the same: once is enough.
  static std::mutex mutex;
  static std::set<std::string> warned;
  const std::lock_guard lock(mutex);
  if (warned.insert(folder.string()).second)
    cacheWarning(fmt::format("not using the {} {}: {}; working without it", what, folder.string(), why));
  return false;
}

}  // namespace llmc::cuda
