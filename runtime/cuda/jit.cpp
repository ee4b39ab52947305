#include "jit.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

namespace llmc::cuda {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

JitKernel compileOne(const KernelSource& kernel, const KernelCache* cache) {
  const auto start = std::chrono::steady_clock::now();
  if (cache) {
    if (auto cached = cache->find(kernel))
      return JitKernel{.compiled = std::move(*cached), .seconds = secondsSince(start), .fromCache = true};
  }
  JitKernel result{.compiled = compileWithNvrtc(kernel)};
  result.seconds = secondsSince(start);
  if (cache) cache->store(kernel, result.compiled);
  return result;
}

// Throws what the compiles threw: the messages of all kernels that failed to
// compile together, so one run shows every broken kernel.
void rethrowFailures(const std::vector<std::exception_ptr>& failures) {
  std::string firstKernel, messages;
  int failed = 0;
  for (const std::exception_ptr& failure : failures) {
    if (!failure) continue;
    try {
      std::rethrow_exception(failure);
    } catch (const KernelCompileError& error) {
      if (failed++ == 0) firstKernel = error.kernel();
      messages += error.what();
      if (!messages.ends_with('\n')) messages += '\n';
    }  // anything else (no device headers, out of memory) propagates as it is
  }
  if (failed == 1) throw KernelCompileError(firstKernel, messages);
  if (failed > 1) throw KernelCompileError(firstKernel, fmt::format("{} kernels failed to compile:\n{}", failed, messages));
}

}  // namespace

std::string JitSummary::describe() const {
  return fmt::format("{} kernels: {} compiled, {} from the cache, {:.2f} s", compiled + fromCache, compiled, fromCache,
                     wallSeconds);
}

JitResult compileKernels(const std::vector<KernelSource>& kernels, const KernelCache* cache, unsigned threads) {
  const auto start = std::chrono::steady_clock::now();
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, kernels.size());

  JitResult result;
  result.kernels.resize(kernels.size());
  std::vector<std::exception_ptr> failures(kernels.size());
  std::atomic<size_t> next = 0;
  auto work = [&] {
    for (size_t i = next++; i < kernels.size(); i = next++) {
      try {
        result.kernels[i] = compileOne(kernels[i], cache);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  std::vector<std::jthread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work);
  pool.clear();  // joins

  rethrowFailures(failures);
  for (const JitKernel& kernel : result.kernels) ++(kernel.fromCache ? result.summary.fromCache : result.summary.compiled);
  result.summary.wallSeconds = secondsSince(start);
  return result;
}

}  // namespace llmc::cuda
