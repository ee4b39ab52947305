// NCCL opened at run time (runtime/cuda/nccl_library.h): found where it is
// installed, with NVLink multicast off, and a clear message naming the places
// looked at when it is not there. Each test case runs in its own process
// (ctest), so the library's one-time load starts fresh in each.
#include "nccl_library.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

using Catch::Matchers::Contains;

TEST_CASE("NCCL that is not where LLMC_NCCL_LIBRARY points is a clear error", "[nccl]") {
  setenv("LLMC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  REQUIRE(llmc::cuda::ncclCandidates() == std::vector<std::string>{"/nonexistent/libnccl.so.2"});
  try {
    llmc::cuda::nccl();
    FAIL("NCCL loaded from a path that does not exist");
  } catch (const llmc::cuda::NcclUnavailable& e) {
    CHECK_THAT(e.what(), Contains("NCCL not found; looked for it at:"));
    CHECK_THAT(e.what(), Contains("/nonexistent/libnccl.so.2"));
    CHECK_THAT(e.what(), Contains("LLMC_NCCL_LIBRARY"));
  }
  unsetenv("LLMC_NCCL_LIBRARY");
}

TEST_CASE("NCCL loads from the system or a Python wheel, NVLink multicast off", "[nccl]") {
  unsetenv("LLMC_NCCL_LIBRARY");
  unsetenv("NCCL_NVLS_ENABLE");
  const std::vector<std::string> candidates = llmc::cuda::ncclCandidates();
  REQUIRE(!candidates.empty());
  CHECK(candidates.front() == "libnccl.so.2");
  try {
    const llmc::cuda::NcclApi& api = llmc::cuda::nccl();
    const std::string version = api.version();  // needs no GPU
    INFO("NCCL " << version << " from " << api.path);
    CHECK(std::regex_match(version, std::regex(R"(([2-9]|[1-9][0-9])\.[0-9]+\.[0-9]+)")));
  } catch (const llmc::cuda::NcclUnavailable& e) {
    // A machine without NCCL: the message must say where it looked.
    WARN("NCCL is not installed here: " << e.what());
    CHECK_THAT(e.what(), Contains("libnccl.so.2"));
  }
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  REQUIRE(nvls != nullptr);
  CHECK(std::string(nvls) == "0");
}

namespace {

// A folder for one test, removed afterwards.
struct TempFolder {
  std::filesystem::path path;
  explicit TempFolder(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempFolder() { std::filesystem::remove_all(path); }
};

void writeText(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("NCCL's wheel is found in an environment on PATH without running Python", "[nccl]") {
  unsetenv("LLMC_NCCL_LIBRARY");
  TempFolder dir("llmc_nccl_wheel");
  namespace fs = std::filesystem;
  const fs::path marker = dir.path / "python-ran";
  // An environment whose python3 would leave a marker if it ran, with a wheel.
  const fs::path env = dir.path / "venv";
  writeText(env / "bin/python3", "#!/bin/sh\ntouch " + marker.string() + "\n");
  fs::permissions(env / "bin/python3", fs::perms::owner_all);
  const fs::path library = env / "lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2";
  writeText(library, "not really a library");
  // pyenv: a shims folder on PATH, the environments under versions/.
  const fs::path pyenv = dir.path / "pyenv";
  writeText(pyenv / "shims/python3", "#!/bin/sh\ntouch " + marker.string() + "\n");
  fs::permissions(pyenv / "shims/python3", fs::perms::owner_all);
  const fs::path pyenvLibrary = pyenv / "versions/3.12.1/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2";
  writeText(pyenvLibrary, "not really a library either");
  // The current folder holds a package that would run if python3 imported nvidia.nccl here.
  const fs::path planted = dir.path / "cwd";
  writeText(planted / "nvidia/__init__.py", "open('" + marker.string() + "', 'w')\n");
  writeText(planted / "nvidia/nccl/__init__.py", "__path__ = ['/tmp/evil']\n");
  const fs::path savedCwd = fs::current_path();
  const std::string savedPath = std::getenv("PATH") ? std::getenv("PATH") : "";
  fs::current_path(planted);
  setenv("PATH", (env.string() + "/bin:.:" + pyenv.string() + "/shims:" + savedPath).c_str(), 1);
  const std::vector<std::string> candidates = llmc::cuda::ncclCandidates();
  setenv("PATH", savedPath.c_str(), 1);
  fs::current_path(savedCwd);
  CHECK_FALSE(fs::exists(marker));
  CHECK(candidates.front() == "libnccl.so.2");
  CHECK(std::find(candidates.begin(), candidates.end(), library.string()) != candidates.end());
  CHECK(std::find(candidates.begin(), candidates.end(), pyenvLibrary.string()) != candidates.end());
  for (const std::string& candidate : candidates) CHECK(candidate.find("/tmp/evil") == std::string::npos);
}
