// Where the tools find the files they read at run time: the target
// descriptions (compiler/targets), the diagrams llmc-train compiles
// (diagrams/) and the device headers NVRTC includes (runtime/cuda/device).
//
// The same binary runs from three places, so each folder is looked for in
// order:
//
//  1. $VARIABLE, where set: an override, never needed;
//  2. installed: <prefix>/share/llmc/<name> beside <prefix>/bin, the folder of
//     the running executable (/proc/self/exe), as `cmake --install` lays it
//     out, so an installed llmc runs from anywhere;
//  3. the source tree the build was configured from (a build tree);
//  4. a copy of the repository above the executable (build/bin carried to
//     another machine beside the sources, as the GPU checks do).
//
// A folder set by the variable must exist; otherwise the first that exists
// wins, and none existing is an error listing every place looked at.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace llmc {

struct DataFolder {
  std::string variable;                // "LLMC_TARGETS"
  std::string installed;               // "targets": <exe>/../share/llmc/targets
  std::filesystem::path sourceTree;    // the folder in the configured source tree
  std::string inRepository;            // "compiler/targets": looked for above the executable
};

// The folder of the running executable (empty where /proc/self/exe cannot be read).
std::filesystem::path executableDirectory();

// Every candidate for `folder` in the order above, the variable's left out.
std::vector<std::filesystem::path> dataFolderCandidates(const DataFolder& folder);

// The folder to read. Throws std::runtime_error naming the variable when it
// names no folder, or every candidate when none exists.
std::filesystem::path findDataFolder(const DataFolder& folder);

}  // namespace llmc
