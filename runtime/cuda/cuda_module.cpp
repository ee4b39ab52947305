#include "cuda_module.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace llmc::cuda {

void Kernel::setMaxDynamicSharedMemory(unsigned bytes) {
  check(driver().funcSetAttribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes)),
        fmt::format("cuFuncSetAttribute({}, max dynamic shared memory = {} bytes)", name_, bytes));
  maxDynamicSharedMemory_ = bytes;
}

unsigned Kernel::residentClusterBlocks(const LaunchConfig& config) {
  if (clusterWidth_ < 0) {
    // Asked of every kernel at its first launch: a driver that cannot say
    // launches it as before (no clusters), rather than failing a launch that
    // never needed the answer.
    int width = 0;
    clusterWidth_ = driver().funcGetAttribute(&width, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, function_) == CUDA_SUCCESS
                        ? width
                        : 1;
  }
  if (clusterWidth_ <= 1) return config.grid.x;
  if (residentBlocks_ == 0 || residentFor_ != config.dynamicSharedMemoryBytes) {
    if (config.dynamicSharedMemoryBytes > maxDynamicSharedMemory_) setMaxDynamicSharedMemory(config.dynamicSharedMemoryBytes);
    CUlaunchConfig asked = {};
    asked.gridDimX = config.grid.x, asked.gridDimY = config.grid.y, asked.gridDimZ = config.grid.z;
    asked.blockDimX = config.block.x, asked.blockDimY = config.block.y, asked.blockDimZ = config.block.z;
    asked.sharedMemBytes = config.dynamicSharedMemoryBytes;
    int clusters = 0;
    check(driver().occupancyMaxActiveClusters(&clusters, function_, &asked),
          fmt::format("cuOccupancyMaxActiveClusters({}, {} bytes dynamic shared memory)", name_,
                      config.dynamicSharedMemoryBytes));
    residentBlocks_ = static_cast<unsigned>(std::max(1, clusters) * clusterWidth_);
    residentFor_ = config.dynamicSharedMemoryBytes;
  }
  return std::min(config.grid.x, residentBlocks_);
}

void Kernel::launch(const LaunchConfig& config, void** args) {
  if (config.dynamicSharedMemoryBytes > maxDynamicSharedMemory_) setMaxDynamicSharedMemory(config.dynamicSharedMemoryBytes);
  Dim3 g = config.grid;
  g.x = residentClusterBlocks(config);
  const Dim3& b = config.block;
  check(driver().launchKernel(function_, g.x, g.y, g.z, b.x, b.y, b.z, config.dynamicSharedMemoryBytes, config.stream,
                              args, nullptr),
        fmt::format("cuLaunchKernel({}, grid {}x{}x{}, block {}x{}x{}, {} bytes dynamic shared memory)", name_, g.x,
                    g.y, g.z, b.x, b.y, b.z, config.dynamicSharedMemoryBytes));
}

Module::Module(const std::string& image, std::string what) : what_(std::move(what)) {
  char errorLog[16384] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  // cuModuleLoadDataEx takes option values as pointers, numbers included.
  void* values[] = {errorLog, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof errorLog))};
  const CUresult result = driver().moduleLoadDataEx(&module_, image.c_str(), 2, options, values);
  if (result != CUDA_SUCCESS) {
    const std::string log = errorLog[0] ? fmt::format("\n{}", errorLog) : "";
    throw CudaError(fmt::format("cuModuleLoadDataEx({}): {}{}", what_, describeCudaResult(result), log), result);
  }
}

Module::~Module() {
  if (module_) driver().moduleUnload(module_);
}

Module::Module(Module&& other) noexcept
    : module_(std::exchange(other.module_, nullptr)), what_(std::move(other.what_)) {}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    if (module_) driver().moduleUnload(module_);
    module_ = std::exchange(other.module_, nullptr);
    what_ = std::move(other.what_);
  }
  return *this;
}

Kernel Module::kernel(const std::string& name) const {
  CUfunction function = nullptr;
  check(driver().moduleGetFunction(&function, module_, name.c_str()),
        fmt::format("cuModuleGetFunction({} in {})", name, what_));
  return Kernel(function, name);
}

}  // namespace llmc::cuda
