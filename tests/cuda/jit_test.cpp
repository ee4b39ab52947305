// The JIT compiles many kernels in parallel, from the cache where it can, and
// reports every kernel that fails.
#include "jit.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cuda_test_support.h"

using llmc::cuda::compileKernels;
using llmc::cuda::KernelCache;
using llmc::cuda::KernelCompileError;
using llmc::cuda::KernelSource;
using llmc::testing::CacheTempDir;
using Catch::Matchers::Contains;

namespace {

// Eight distinct kernels: axpy with a different constant each.
std::vector<KernelSource> eightKernels() {
  std::vector<KernelSource> kernels;
  for (int k = 0; k < 8; ++k) {
    const std::string name = fmt::format("axpy_{}", k);
    kernels.push_back({.name = name,
                       .source = fmt::format("extern \"C\" __global__ void {}(float* y, const float* x, int n) {{\n"
                                             "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                             "  if (i < n) y[i] += {}.0f * x[i];\n"
                                             "}}\n",
                                             name, k + 2),
                       .arch = k % 2 ? "sm_80" : "sm_90a"});
  }
  return kernels;
}

}  // namespace

TEST_CASE("eight kernels compile in parallel, then come from the cache", "[jit]") {
  CacheTempDir dir("jit_parallel");
  const KernelCache cache(dir.path);
  const auto kernels = eightKernels();
  const auto first = compileKernels(kernels, &cache, 4);
  REQUIRE(first.kernels.size() == 8);
  CHECK(first.summary.compiled == 8);
  CHECK(first.summary.fromCache == 0);
  for (size_t k = 0; k < kernels.size(); ++k) {
    INFO(kernels[k].name);
    CHECK(first.kernels[k].compiled->name == kernels[k].name);  // in the order asked
    CHECK_THAT(first.kernels[k].compiled->ptx, Contains(".entry " + kernels[k].name + "("));
    CHECK_THAT(first.kernels[k].compiled->ptx, Contains(".target " + kernels[k].arch));
    CHECK(first.kernels[k].seconds > 0);
  }
  CHECK_THAT(first.summary.describe(), Contains("8 kernels: 8 compiled, 0 from the cache, "));

  const auto second = compileKernels(kernels, &cache);
  CHECK(second.summary.fromCache == 8);
  for (size_t k = 0; k < kernels.size(); ++k) CHECK(second.kernels[k].compiled->cubin == first.kernels[k].compiled->cubin);
}

TEST_CASE("without a cache every kernel is compiled", "[jit]") {
  const auto kernels = eightKernels();
  const auto result = compileKernels({kernels[0], kernels[1]}, nullptr, 1);
  CHECK(result.summary.compiled == 2);
  CHECK_FALSE(result.kernels[1].fromCache);
}

TEST_CASE("every kernel that fails to compile is reported, with its line", "[jit]") {
  auto kernels = eightKernels();
  kernels[2].source += "this is not CUDA;\n";
  kernels[5].source = "extern \"C\" __global__ void axpy_5(float* y) { y[0] = missing; }\n";
  try {
    compileKernels(kernels, nullptr);
    FAIL("the kernels compiled");
  } catch (const KernelCompileError& error) {
    CHECK(error.kernel() == "axpy_2");
    const std::string message = error.what();
    CHECK_THAT(message, Contains("2 kernels failed to compile:"));
    CHECK_THAT(message, Contains("kernel axpy_2: line 5: error:"));
    CHECK_THAT(message, Contains("  5 | this is not CUDA;"));
    CHECK_THAT(message, Contains("kernel axpy_5: line 1: error: identifier \"missing\" is undefined"));
  }
}

TEST_CASE("forked workers compile into the cache what it lacks, the same code as threads", "[jit]") {
  CacheTempDir threadsDir("jit_threads"), processesDir("jit_processes");
  const KernelCache threadCache(threadsDir.path), processCache(processesDir.path);
  const auto kernels = eightKernels();
  compileKernels({kernels[0], kernels[3]}, &processCache, 2);  // two already in the cache
  const auto byThreads = compileKernels(kernels, &threadCache, 3);
  const auto byProcesses = compileKernels(kernels, &processCache, 3, llmc::cuda::JitWorkers::Processes);
  CHECK(byProcesses.summary.compiled == 6);
  CHECK(byProcesses.summary.fromCache == 2);
  for (size_t k = 0; k < kernels.size(); ++k) {
    INFO(kernels[k].name);
    CHECK(byProcesses.kernels[k].compiled->name == kernels[k].name);
    CHECK(byProcesses.kernels[k].compiled->cubin == byThreads.kernels[k].compiled->cubin);
    if (!byProcesses.kernels[k].fromCache) CHECK(byProcesses.kernels[k].seconds > 0);
  }
}

TEST_CASE("a kernel that fails in a forked worker is reported with its line", "[jit]") {
  CacheTempDir dir("jit_processes_failure");
  const KernelCache cache(dir.path);
  auto kernels = eightKernels();
  kernels[6].source += "this is not CUDA;\n";
  try {
    compileKernels(kernels, &cache, 4, llmc::cuda::JitWorkers::Processes);
    FAIL("the kernels compiled");
  } catch (const KernelCompileError& error) {
    CHECK(error.kernel() == "axpy_6");
    CHECK_THAT(error.what(), Contains("kernel axpy_6: line 5: error:"));
  }
  // The others were compiled and stored all the same.
  CHECK(compileKernels({kernels[1], kernels[7]}, &cache, 1).summary.fromCache == 2);
}

TEST_CASE("LLMC_JIT_WORKERS picks threads or processes, and names itself when wrong", "[jit]") {
  using llmc::cuda::JitWorkers;
  unsetenv("LLMC_JIT_WORKERS");
  CHECK(llmc::cuda::jitWorkersFromEnvironment() == JitWorkers::Processes);
  setenv("LLMC_JIT_WORKERS", "threads", 1);
  CHECK(llmc::cuda::jitWorkersFromEnvironment() == JitWorkers::Threads);
  setenv("LLMC_JIT_WORKERS", "forks", 1);
  CHECK_THROWS_WITH(llmc::cuda::jitWorkersFromEnvironment(), Contains("$LLMC_JIT_WORKERS=forks"));
  unsetenv("LLMC_JIT_WORKERS");
}
