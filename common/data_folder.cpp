#include "data_folder.h"

#include <cstdlib>
#include <stdexcept>

namespace llmc {

namespace fs = std::filesystem;

fs::path executableDirectory() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::path() : exe.parent_path();
}

std::vector<fs::path> dataFolderCandidates(const DataFolder& folder) {
  std::vector<fs::path> candidates;
  const fs::path exeDir = executableDirectory();
  if (!exeDir.empty()) candidates.push_back((exeDir / ".." / "share" / "llmc" / folder.installed).lexically_normal());
  if (!folder.sourceTree.empty()) candidates.push_back(folder.sourceTree);
  for (fs::path dir = exeDir; !dir.empty(); dir = dir.parent_path()) {
    candidates.push_back(dir / folder.inRepository);
    if (dir == dir.root_path()) break;
  }
  return candidates;
}

fs::path findDataFolder(const DataFolder& folder) {
  if (const char* given = std::getenv(folder.variable.c_str()); given && *given) {
    if (!fs::is_directory(given))
      throw std::runtime_error(folder.variable + "=" + given + " is not a folder (it should name " + folder.inRepository +
                               " or an installed share/llmc/" + folder.installed + ")");
    return given;
  }
  const std::vector<fs::path> candidates = dataFolderCandidates(folder);
  for (const fs::path& candidate : candidates)
    if (fs::is_directory(candidate)) return candidate;
  std::string tried;
  for (const fs::path& candidate : candidates) tried += "\n  " + candidate.string();
  throw std::runtime_error("llmc's " + folder.inRepository + " folder was not found (set " + folder.variable +
                           " to it); tried:" + tried);
}

}  // namespace llmc
