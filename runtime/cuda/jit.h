// The JIT: many kernels compiled at once by NVRTC on a pool of threads, each
// taken from the kernel cache when it holds it. Kernels that are one program
// up to the names the emitter numbers (kernel_classes.h) are compiled once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernel_cache.h"
#include "nvrtc_compiler.h"

namespace llmc::cuda {

struct JitKernel {
  std::string name = {};  // the kernel's own (KernelSource::name): LoadedKernels finds it by it
  // The compilation it runs, shared by the kernels of its class: the entry
  // point is compiled->name, the name of the kernel that was compiled.
  std::shared_ptr<const CompiledKernel> compiled = {};
  double seconds = 0;  // compiling it, or reading it from the cache; 0 where shared
  bool fromCache = false;
  bool shared = false;  // it runs another kernel's compilation (of its class)
};

struct JitSummary {
  int compiled = 0, fromCache = 0, shared = 0;
  double wallSeconds = 0;
  // "8 kernels: 2 compiled, 6 from the cache, 0.41 s", and where kernels
  // share a compilation "600 kernels: 207 compiled, 0 from the cache, 393
  // shared, 9.12 s"
  std::string describe() const;
};

struct JitResult {
  std::vector<JitKernel> kernels;  // in the order of the sources
  JitSummary summary;
};

// How compileKernels spreads NVRTC's work.
// Processes are the default: on the 32-core GPU machine NVRTC in 32 threads
// compiled the d12 training step's 601 kernels in 13.5 s (each kernel ~0.7 s,
// against ~0.14 s alone: NVRTC's threads contend), 32 forked processes in
// 2.7 s (2026-11-29, training_step_compile).
enum class JitWorkers {
  Threads,    // a pool of threads in this process
  Processes,  // forked processes, each compiling into the cache, read back here (it needs a
              // cache; the children touch nothing but NVRTC and it)
};

// The workers $LLMC_JIT_WORKERS asks for: "threads" or "processes" (the
// default when unset); anything else is an error naming the variable.
JitWorkers jitWorkersFromEnvironment();

// Compiles `kernels` on `workers` threads or processes (0: one per hardware
// thread), one kernel of each class (classifyKernels), looking each up in
// `cache` first and storing what was compiled there; a null cache compiles
// everything (in threads). When kernels fail to
// compile, all are still tried, then a KernelCompileError naming the first
// failed kernel carries the messages of all failed ones.
JitResult compileKernels(const std::vector<KernelSource>& kernels, const KernelCache* cache, unsigned workers = 0,
                         JitWorkers how = JitWorkers::Processes);

}  // namespace llmc::cuda
