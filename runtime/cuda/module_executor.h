// Runs an emitted module (compiler/codegen/module.h) on the GPU: its launches in
// order on a stream, every array where the memory plan puts it. The caller
// places the arrays it owns (parameters, gradients, token batches) by binding
// graph inputs and outputs to its own device memory; everything else lives in
// an arena the caller provides, so that modules that never run at the same
// time (the training step, the validation loss, the sampler) share one.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/module.h"
#include "jit.h"
#include "loaded_kernels.h"
#include "planning/memory_plan.h"

namespace llmc::cuda {

// One translation unit per launch, for compileKernels, with what the launch
// passes it (KernelSource::launchSignature).
std::vector<KernelSource> kernelSources(const CudaModule& module, const std::string& arch);

// Every launch of `module` compiled for `arch` (NVRTC; no GPU needed) through
// the disk cache the tools share, KernelCache::defaultDirectory(): what
// llmc-run and libllmc compile a module with.
JitResult compileModuleKernels(const CudaModule& module, const std::string& arch,
                               JitWorkers how = JitWorkers::Processes);

class ModuleExecutor {
 public:
  // `bindings`: a graph input's or output's name -> the device address the
  // caller keeps it at (at least the buffer's bytes, 16-byte aligned). A name
  // the module does not have is an error (a typo would otherwise leave an
  // input unset).
  ModuleExecutor(CudaModule module, std::map<std::string, CUdeviceptr> bindings);

  const CudaModule& module() const { return module_; }
  const MemoryPlan& memoryPlan() const { return plan_; }

  // The compiled launches, in the order of kernelSources(module()).
  void load(const std::vector<JitKernel>& compiled);
  // Where the unbound arrays live: at least memoryPlan().arenaBytes. Fixes
  // every launch's arguments (tensor maps included) for run().
  void setArena(CUdeviceptr arena, size_t bytes);

  // Moves a binding made at construction to another address (ping-pong
  // arrays); the launches' arguments follow.
  void rebind(const std::string& name, CUdeviceptr address);
  // Moves several at once, the launches' arguments made again once (a
  // library that runs the module on its caller's arrays, a call at a time).
  void rebind(const std::map<std::string, CUdeviceptr>& addresses);

  // Enqueues every launch on `stream`; or the i-th alone (to time it).
  void run(CUstream stream);
  void runLaunch(size_t i, CUstream stream);

  // Where a graph input or output is: its binding, or its place in the arena.
  CUdeviceptr address(const std::string& name) const;
  // Where buffer `b` of module().buffers is (after setArena()).
  CUdeviceptr bufferAddress(size_t b) const;

 private:
  int bufferIndex(const std::string& name) const;  // -1 if none

  struct LaunchArguments {
    std::vector<CUtensorMap> maps;
    std::vector<CUdeviceptr> pointers;
    std::vector<void*> args;
    LaunchConfig config;
  };

  CudaModule module_;
  std::vector<CUdeviceptr> bound_;  // per buffer; 0 where the arena holds it
  MemoryPlan plan_;
  std::unique_ptr<LoadedKernels> kernels_;
  std::vector<Kernel*> launchKernels_;
  std::vector<LaunchArguments> arguments_;
  std::vector<CUdeviceptr> addresses_;  // per buffer, once the arena is set
  CUdeviceptr arena_ = 0;
  size_t arenaBytes_ = 0;
};

}  // namespace llmc::cuda
