#include "jit.h"

#include <fmt/format.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "kernel_classes.h"

namespace llmc::cuda {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

JitKernel compileOne(const KernelSource& kernel, const KernelCache* cache) {
  const auto start = std::chrono::steady_clock::now();
  if (cache) {
    if (auto cached = cache->find(kernel))
      return JitKernel{.name = kernel.name, .compiled = std::make_shared<const CompiledKernel>(std::move(*cached)),
                       .seconds = secondsSince(start), .fromCache = true};
  }
  JitKernel result{.name = kernel.name, .compiled = std::make_shared<const CompiledKernel>(compileWithNvrtc(kernel))};
  result.seconds = secondsSince(start);
  if (cache) cache->store(kernel, *result.compiled);
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

// `kernels[i]` for each i of `which`, on `workers` threads, each looked up in
// the cache first (when there is one) and stored there.
void compileInThreads(const std::vector<KernelSource>& kernels, const std::vector<size_t>& which,
                      const KernelCache* cache, unsigned workers, std::vector<JitKernel>& out,
                      std::vector<std::exception_ptr>& failures) {
  std::atomic<size_t> next = 0;
  auto work = [&] {
    for (size_t k = next++; k < which.size(); k = next++) {
      try {
        out[which[k]] = compileOne(kernels[which[k]], cache);
      } catch (...) {
        failures[which[k]] = std::current_exception();
      }
    }
  };
  std::vector<std::jthread> pool;
  for (unsigned t = 0; t < std::min<size_t>(workers, which.size()); ++t) pool.emplace_back(work);
}

// The kernels the cache lacks, compiled by `workers` forked processes that
// take them one by one (a counter in shared memory) and store each in the
// cache; this process then reads them back. Returns those no child stored (a
// kernel that failed to compile, a child that died, a cache that could not be
// written: a full disk), for the threads to compile here, which gives their
// errors. The children run NVRTC and the cache only, and leave by _exit.
std::vector<size_t> compileInProcesses(const std::vector<KernelSource>& kernels, const KernelCache& cache,
                                       unsigned workers, std::vector<JitKernel>& out) {
  // The cache first, looked up on `workers` threads (a warm start reads
  // hundreds of entries: one by one they took half a second).
  std::vector<char> cached(kernels.size(), 0);
  {
    std::atomic<size_t> next = 0;
    auto lookUp = [&] {
      for (size_t i = next++; i < kernels.size(); i = next++) {
        const auto start = std::chrono::steady_clock::now();
        if (auto found = cache.find(kernels[i])) {
          out[i] = JitKernel{.name = kernels[i].name, .compiled = std::make_shared<const CompiledKernel>(std::move(*found)),
                             .seconds = secondsSince(start), .fromCache = true};
          cached[i] = 1;
        }
      }
    };
    std::vector<std::jthread> pool;
    for (unsigned t = 0; t < workers; ++t) pool.emplace_back(lookUp);
  }
  std::vector<size_t> missing;
  for (size_t i = 0; i < kernels.size(); ++i)
    if (!cached[i]) missing.push_back(i);
  if (missing.empty()) return {};

  // Shared with the children: the next missing kernel to take, and each one's compile time.
  using Counter = std::atomic<size_t>;
  static_assert(Counter::is_always_lock_free, "a counter shared between processes must be lock-free");
  const size_t bytes = sizeof(Counter) + missing.size() * sizeof(double);
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw std::runtime_error(fmt::format("JIT: no shared memory for its workers: {}", std::strerror(errno)));
  Counter* next = new (shared) Counter(0);
  double* seconds = reinterpret_cast<double*>(static_cast<char*>(shared) + sizeof(Counter));
  std::fill_n(seconds, missing.size(), 0.0);

  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> children;
  for (unsigned w = 0; w < std::min<size_t>(workers, missing.size()); ++w) {
    const pid_t pid = fork();
    if (pid < 0) break;  // fewer workers; what they leave is compiled below
    if (pid == 0) {
      for (size_t m = (*next)++; m < missing.size(); m = (*next)++) {
        const auto start = std::chrono::steady_clock::now();
        try {
          cache.store(kernels[missing[m]], compileWithNvrtc(kernels[missing[m]]));
          seconds[m] = secondsSince(start);
        } catch (...) {  // compiled again by the parent, for its message
        }
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t child : children) waitpid(child, nullptr, 0);

  std::vector<size_t> left;
  for (size_t m = 0; m < missing.size(); ++m) {
    const size_t i = missing[m];
    if (auto stored = cache.find(kernels[i]))
      out[i] = JitKernel{.name = kernels[i].name, .compiled = std::make_shared<const CompiledKernel>(std::move(*stored)),
                         .seconds = seconds[m], .fromCache = false};
    else left.push_back(i);
  }
  munmap(shared, bytes);
  return left;
}

}  // namespace

std::string JitSummary::describe() const {
  return fmt::format("{} kernels: {} compiled, {} from the cache, {}{:.2f} s", compiled + fromCache + shared, compiled,
                     fromCache, shared ? fmt::format("{} shared, ", shared) : "", wallSeconds);
}

JitWorkers jitWorkersFromEnvironment() {
  const char* value = std::getenv("LLMC_JIT_WORKERS");
  if (!value || !*value || std::string_view(value) == "processes") return JitWorkers::Processes;
  if (std::string_view(value) == "threads") return JitWorkers::Threads;
  throw std::invalid_argument(fmt::format("$LLMC_JIT_WORKERS={}: expected threads or processes", value));
}

JitResult compileKernels(const std::vector<KernelSource>& kernels, const KernelCache* cache, unsigned workers,
                         JitWorkers how) {
  const auto start = std::chrono::steady_clock::now();
  // One kernel of each class is compiled (or read from the cache); the others
  // of the class run its compilation, under its entry point's name.
  const KernelClasses classes = classifyKernels(kernels);
  std::vector<KernelSource> distinct;
  std::vector<size_t> slot(kernels.size());  // kernel -> its class's place in `distinct`
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (classes.representative[i] == i) {
      slot[i] = distinct.size();
      distinct.push_back(kernels[i]);
    } else {
      slot[i] = slot[classes.representative[i]];
    }
  }
  if (workers == 0) workers = std::max(1u, std::thread::hardware_concurrency());
  workers = std::min<unsigned>(workers, distinct.size());
  if (cache && !cache->usable()) cache = nullptr;  // its folder was refused: compile as without one

  std::vector<JitKernel> compiled(distinct.size());
  std::vector<std::exception_ptr> failures(distinct.size());
  std::vector<size_t> left(distinct.size());
  for (size_t i = 0; i < left.size(); ++i) left[i] = i;
  if (how == JitWorkers::Processes && cache) left = compileInProcesses(distinct, *cache, workers, compiled);
  compileInThreads(distinct, left, cache, workers, compiled, failures);
  rethrowFailures(failures);

  JitResult result;
  result.kernels.reserve(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (classes.representative[i] == i) {
      result.kernels.push_back(std::move(compiled[slot[i]]));
      ++(result.kernels.back().fromCache ? result.summary.fromCache : result.summary.compiled);
    } else {
      result.kernels.push_back({.name = kernels[i].name, .compiled = result.kernels[classes.representative[i]].compiled,
                                .shared = true});
      ++result.summary.shared;
    }
  }
  result.summary.wallSeconds = secondsSince(start);
  return result;
}

}  // namespace llmc::cuda
