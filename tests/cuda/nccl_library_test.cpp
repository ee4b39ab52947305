// NCCL opened at run time (runtime/cuda/nccl_library.h): found where it is
// installed, with NVLink multicast off, and a clear message naming the places
// looked at when it is not there. Each test case runs in its own process
// (ctest), so the library's one-time load starts fresh in each.
#include "nccl_library.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
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
