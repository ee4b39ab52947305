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

namespace {

// Layer `layer`'s copy of a kernel: the names numbered after its nodes.
KernelSource layerCopy(int layer) {
  const int node = 200 + 72 * layer;
  const std::string name = fmt::format("k{}_y", 3 + 12 * layer);
  return {.name = name,
          .source = fmt::format("// layer {2}: y = 2 x\n"
                                "extern \"C\" __global__ void {0}(float* y_{1}, const float* x_{3}, int n) {{\n"
                                "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                "  if (i < n) y_{1}[i] = 2.0f * x_{3}[i];\n"
                                "}}\n",
                                name, node, layer, node - 1),
          .arch = "sm_90a",
          .launchSignature = "float written; float read;"};
}

}  // namespace

TEST_CASE("copies of a kernel are compiled once and run its entry point", "[jit]") {
  const std::vector<KernelSource> kernels = {layerCopy(0), layerCopy(1), layerCopy(2)};
  for (auto how : {llmc::cuda::JitWorkers::Threads, llmc::cuda::JitWorkers::Processes}) {
    CacheTempDir dir("jit_classes");
    const KernelCache cache(dir.path);
    const auto result = compileKernels(kernels, &cache, 2, how);
    CHECK(result.summary.compiled == 1);
    CHECK(result.summary.shared == 2);
    CHECK_THAT(result.summary.describe(), Contains("3 kernels: 1 compiled, 0 from the cache, 2 shared, "));
    for (size_t k = 0; k < kernels.size(); ++k) {
      CHECK(result.kernels[k].name == kernels[k].name);
      CHECK(result.kernels[k].compiled == result.kernels[0].compiled);  // one compilation, shared
      CHECK(result.kernels[k].shared == (k > 0));
    }
    CHECK(result.kernels[0].compiled->name == "k3_y");
    CHECK_THAT(result.kernels[0].compiled->ptx, Contains(".entry k3_y("));
    // One cache entry, which a later copy alone finds: under the first one's entry point.
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path), std::filesystem::directory_iterator()) == 1);
    const auto warm = compileKernels({layerCopy(5)}, &cache, 1, how);
    CHECK(warm.summary.fromCache == 1);
    CHECK(warm.kernels[0].name == "k63_y");
    CHECK(warm.kernels[0].compiled->name == "k3_y");
  }
}

TEST_CASE("copies launched with different arguments, arch or options are compiled apart", "[jit]") {
  std::vector<KernelSource> kernels = {layerCopy(0), layerCopy(1), layerCopy(2), layerCopy(3)};
  kernels[1].launchSignature = "float written; float written;";
  kernels[2].arch = "sm_80";
  kernels[3].options = {"-DUNUSED=1"};
  const auto result = compileKernels(kernels, nullptr, 2);
  CHECK(result.summary.compiled == 4);
  CHECK(result.summary.shared == 0);
  for (size_t k = 0; k < kernels.size(); ++k) CHECK(result.kernels[k].compiled->name == kernels[k].name);
}
