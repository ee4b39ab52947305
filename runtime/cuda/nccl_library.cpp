#include "nccl_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "site_packages.h"

namespace llmc::cuda {

namespace {

// The libraries of the nvidia-nccl wheels installed in the Python
// environments found (site_packages.h: without running Python).
std::vector<std::string> wheelLibraries() {
  std::vector<std::string> out;
  for (const std::string& folder : pythonSitePackages()) {
    const std::string library = folder + "/nvidia/nccl/lib/libnccl.so.2";
    std::error_code error;
    if (std::filesystem::is_regular_file(library, error)) out.push_back(library);
  }
  return out;
}

template <typename F>
void symbol(void* library, const char* name, F& entry, const std::string& path) {
  entry = reinterpret_cast<F>(dlsym(library, name));
  if (!entry) throw NcclUnavailable(fmt::format("{} has no {}: not an NCCL library", path, name));
}

NcclApi load() {
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  std::string tried;
  for (const std::string& candidate : ncclCandidates()) {
    void* library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      tried += fmt::format("\n  {}: {}", candidate, dlerror());
      continue;
    }
    NcclApi api;
    api.path = candidate;
    symbol(library, "ncclGetVersion", api.getVersion, candidate);
    symbol(library, "ncclGetErrorString", api.getErrorString, candidate);
    symbol(library, "ncclGetUniqueId", api.getUniqueId, candidate);
    symbol(library, "ncclCommInitRank", api.commInitRank, candidate);
    symbol(library, "ncclCommDestroy", api.commDestroy, candidate);
    symbol(library, "ncclAllReduce", api.allReduce, candidate);
    symbol(library, "ncclReduceScatter", api.reduceScatter, candidate);
    symbol(library, "ncclAllGather", api.allGather, candidate);
    symbol(library, "ncclGroupStart", api.groupStart, candidate);
    symbol(library, "ncclGroupEnd", api.groupEnd, candidate);
    return api;
  }
  // The Python environments searched in vain, named too.
  const char* given = std::getenv("LLMC_NCCL_LIBRARY");
  if (!given || !*given)
    for (const std::string& folder : pythonSitePackages())
      if (std::error_code error; !std::filesystem::exists(folder + "/nvidia/nccl/lib/libnccl.so.2", error))
        tried += fmt::format("\n  {}: no nvidia/nccl/lib/libnccl.so.2", folder);
  throw NcclUnavailable(fmt::format(
      "NCCL not found; looked for it at:{}\nInstall it (the CUDA toolkit's libnccl, a distribution's libnccl2, or "
      "pip's nvidia-nccl-cu12/13) or point LLMC_NCCL_LIBRARY at libnccl.so.2",
      tried));
}

}  // namespace

std::vector<std::string> ncclCandidates() {
  if (const char* given = std::getenv("LLMC_NCCL_LIBRARY"); given && *given) return {given};
  std::vector<std::string> out = {"libnccl.so.2"};  // the dynamic linker's search: LD_LIBRARY_PATH, ld.so.cache
  for (const std::string& wheel : wheelLibraries()) out.push_back(wheel);
  return out;
}

const NcclApi& nccl() {
  static const NcclApi api = load();  // tried again after a throw
  return api;
}

std::string NcclApi::version() const {
  int code = 0;
  checkNccl(getVersion(&code), "ncclGetVersion");
  // Since 2.9: major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

void checkNccl(NcclResult result, const char* call) {
  if (result == kNcclSuccess) return;
  const char* text = nccl().getErrorString ? nccl().getErrorString(result) : "unknown";
  throw std::runtime_error(fmt::format("{}: NCCL error {}: {}", call, static_cast<int>(result), text));
}

}  // namespace llmc::cuda
