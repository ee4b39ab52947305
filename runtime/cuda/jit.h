// The JIT: many kernels compiled at once by NVRTC on a pool of threads, each
// taken from the kernel cache when it holds it.
#pragma once

#include <string>
#include <vector>

#include "kernel_cache.h"
#include "nvrtc_compiler.h"

namespace llmc::cuda {

struct JitKernel {
  CompiledKernel compiled = {};
  double seconds = 0;  // compiling it, or reading it from the cache
  bool fromCache = false;
};

struct JitSummary {
  int compiled = 0, fromCache = 0;
  double wallSeconds = 0;
  // "8 kernels: 2 compiled, 6 from the cache, 0.41 s"
  std::string describe() const;
};

struct JitResult {
  std::vector<JitKernel> kernels;  // in the order of the sources
  JitSummary summary;
};

// How compileKernels spreads NVRTC's work.
enum class JitWorkers {
  Threads,    // a pool of threads in this process
  Processes,  // forked processes, each compiling into the cache, read back here: for when NVRTC's
              // threads do not scale (it needs a cache; the children touch nothing but NVRTC and it)
};

// The workers $LLMC_JIT_WORKERS asks for: "processes" or "threads" (the
// default when unset); anything else is an error naming the variable.
JitWorkers jitWorkersFromEnvironment();

// Compiles `kernels` on `workers` threads or processes (0: one per hardware
// thread), looking each up in `cache` first and storing what was compiled
// there; a null cache compiles everything (in threads). When kernels fail to
// compile, all are still tried, then a KernelCompileError naming the first
// failed kernel carries the messages of all failed ones.
JitResult compileKernels(const std::vector<KernelSource>& kernels, const KernelCache* cache, unsigned workers = 0,
                         JitWorkers how = JitWorkers::Threads);

}  // namespace llmc::cuda
