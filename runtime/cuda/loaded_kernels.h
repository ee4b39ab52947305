// Compiled kernels loaded into the current context, each found by its name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda_module.h"
#include "jit.h"

namespace llmc::cuda {

class LoadedKernels {
 public:
  // Loads each compilation of `kernels` into the current context, once where
  // kernels share it (jit.h): its CUBIN when the GPU can run it, else its PTX,
  // which the driver compiles for the GPU. Its entry point is the function
  // named compiled->name.
  explicit LoadedKernels(const std::vector<JitKernel>& kernels);

  // The kernel named `name` (JitKernel::name); kernels of one class are one
  // Kernel, whose name() is the entry point's. Throws std::out_of_range
  // listing the loaded ones when there is none.
  Kernel& operator[](const std::string& name);

 private:
  std::vector<Module> modules_;
  // One per module: shared by the kernels of a class, so that the shared
  // memory a launch opted into (Kernel::setMaxDynamicSharedMemory) is known
  // to the next launch of the same function under another name.
  std::vector<std::unique_ptr<Kernel>> functions_;
  std::map<std::string, Kernel*> kernels_;
};

}  // namespace llmc::cuda
