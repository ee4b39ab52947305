// A GPU's primary context, made current on the thread that creates it: the
// context the CUDA runtime and libraries such as cuBLAS and NCCL share.
#pragma once

#include <optional>
#include <string>

#include "cuda_driver.h"

namespace llmc::cuda {

class Context {
 public:
  // Retains GPU `ordinal`'s primary context and makes it current on this
  // thread. Throws NoGpuError when there is no driver or no such GPU.
  explicit Context(int ordinal = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Makes the context current on the calling thread (another thread than the
  // one that created it).
  void makeCurrent() const;
  // Waits until all work submitted to the context has finished.
  void synchronize() const;

  int ordinal() const { return ordinal_; }
  CUdevice device() const { return device_; }
  const std::string& name() const { return name_; }
  // 90 for compute capability 9.0.
  int computeCapability() const { return computeCapability_; }
  // The architecture NVRTC should compile for: "sm_90a" from Hopper on (wgmma
  // and setmaxnreg exist only in the arch-specific target), "sm_80" before.
  std::string arch() const;
  // The most dynamic shared memory one block can opt in to, in bytes.
  int maxDynamicSharedMemoryPerBlock() const { return maxDynamicSharedMemoryPerBlock_; }

 private:
  int ordinal_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string name_;
  int computeCapability_ = 0;
  int maxDynamicSharedMemoryPerBlock_ = 0;
};

// GPU 0's context for a GPU test or benchmark; where there is none, prints
// "skipped: WHY" and returns nothing: the caller then exits with 77, the code
// ctest reports as skipped (never as passed).
std::optional<Context> contextOrSkip();

}  // namespace llmc::cuda
