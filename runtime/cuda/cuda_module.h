// A module loaded into the current context (from PTX, which the driver
// compiles for the GPU, or from a CUBIN for it) and the kernels in it.
#pragma once

#include <string>

#include "cuda_driver.h"

namespace llmc::cuda {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid, block;
  unsigned dynamicSharedMemoryBytes = 0;
  CUstream stream = nullptr;  // the context's default stream
};

// A __global__ function of a loaded module; valid while its module is.
class Kernel {
 public:
  Kernel(CUfunction function, std::string name) : function_(function), name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  CUfunction function() const { return function_; }

  // Lets launches use up to `bytes` of dynamic shared memory. Above 48 KiB a
  // kernel must opt in; launch() does so by itself when its config asks for more.
  void setMaxDynamicSharedMemory(unsigned bytes);

  // Launches with args[i] pointing at the i-th parameter's value, as
  // cuLaunchKernel takes them. Asynchronous: errors of the running kernel
  // surface at the next synchronisation. A kernel compiled for clusters
  // (__cluster_dims__: only the tile library's persistent GEMMs, which walk
  // their units gridDim apart) is launched with no more blocks than the GPU
  // holds clusters of at once: the rest would run their whole share after
  // the others (2-block clusters' GEMMs launched as 132 blocks ran at half
  // cuBLAS's speed on an H100, 2026-12-07, likely so).
  void launch(const LaunchConfig& config, void** args);

  // The blocks of a launch like `config` that run at once in whole clusters
  // of this kernel's compile-time width; config.grid.x where it has none.
  unsigned residentClusterBlocks(const LaunchConfig& config);

  // kernel(config, a, b, n): the parameters' values, which must have the
  // types the kernel declares (a CUdeviceptr for a pointer).
  template <typename... Args>
  void operator()(const LaunchConfig& config, const Args&... args) {
    void* pointers[sizeof...(Args) + 1] = {const_cast<void*>(static_cast<const void*>(&args))...};
    launch(config, pointers);
  }

 private:
  CUfunction function_;
  std::string name_;
  unsigned maxDynamicSharedMemory_ = 48 * 1024;  // the default without opting in
  int clusterWidth_ = -1;                         // compile-time cluster width; -1: not asked yet
  unsigned residentBlocks_ = 0, residentFor_ = 0;  // residentClusterBlocks' answer, for this shared memory
};

class Module {
 public:
  // Loads `image`: PTX text or a CUBIN. `what` names the module in errors,
  // which carry the driver's JIT log.
  Module(const std::string& image, std::string what);
  ~Module();
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The kernel named `name` (an extern "C" name, or a mangled one). Throws
  // CudaError naming the module when there is none.
  Kernel kernel(const std::string& name) const;

 private:
  CUmodule module_ = nullptr;
  std::string what_;
};

}  // namespace llmc::cuda
