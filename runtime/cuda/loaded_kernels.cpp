#include "loaded_kernels.h"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

namespace llmc::cuda {

namespace {

Module loadModule(const CompiledKernel& kernel) {
  if (!kernel.cubin.empty()) {
    try {
      return Module(kernel.cubin, fmt::format("kernel {} (CUBIN for {})", kernel.name, kernel.arch));
    } catch (const CudaError& error) {
      // A CUBIN runs only on its own architecture; the PTX is compiled for any
      // later one.
      if (error.result() != CUDA_ERROR_NO_BINARY_FOR_GPU && error.result() != CUDA_ERROR_INVALID_IMAGE) throw;
    }
  }
  return Module(kernel.ptx, fmt::format("kernel {} (PTX for {})", kernel.name, kernel.arch));
}

}  // namespace

LoadedKernels::LoadedKernels(const std::vector<JitKernel>& kernels) {
  modules_.reserve(kernels.size());
  std::map<const CompiledKernel*, Kernel*> loaded;
  for (const JitKernel& kernel : kernels) {
    if (!kernel.compiled) throw std::invalid_argument(fmt::format("kernel {} was not compiled", kernel.name));
    if (kernels_.contains(kernel.name)) throw std::invalid_argument(fmt::format("two kernels are named {}", kernel.name));
    Kernel*& function = loaded[kernel.compiled.get()];
    if (!function) {
      modules_.push_back(loadModule(*kernel.compiled));
      functions_.push_back(std::make_unique<Kernel>(modules_.back().kernel(kernel.compiled->name)));
      function = functions_.back().get();
    }
    kernels_.emplace(kernel.name, function);
  }
}

Kernel& LoadedKernels::operator[](const std::string& name) {
  const auto found = kernels_.find(name);
  if (found == kernels_.end()) {
    std::string loaded;
    for (const auto& [known, kernel] : kernels_) loaded += (loaded.empty() ? "" : ", ") + known;
    throw std::out_of_range(fmt::format("no kernel {} is loaded (loaded: {})", name, loaded.empty() ? "none" : loaded));
  }
  return *found->second;
}

}  // namespace llmc::cuda
