// Compiled kernels loaded into the current context, each found by its name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cuda_module.h"
#include "jit.h"

namespace llmc::cuda {

class LoadedKernels {
 public:
  // Loads each kernel's module into the current context: its CUBIN when the
  // GPU can run it, else its PTX, which the driver compiles for the GPU. The
  // entry point of each module is the function named like the kernel.
  explicit LoadedKernels(const std::vector<JitKernel>& kernels);

  // The kernel named `name`; throws std::out_of_range listing the loaded ones
  // when there is none.
  Kernel& operator[](const std::string& name);

 private:
  std::vector<Module> modules_;
  std::map<std::string, Kernel> kernels_;
};

}  // namespace llmc::cuda
