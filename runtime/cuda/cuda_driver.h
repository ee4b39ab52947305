// The CUDA driver API, opened at run time from libcuda.so.1. cuda.h is
// included for its types and prototypes only: nothing links libcuda, so every
// binary starts, and runs its parts that need no GPU, on a machine without a
// driver. The first use of driver() loads the library; where that fails (no
// driver, no GPU) it throws NoGpuError.
#pragma once

#include <cuda.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "gpu_query.h"  // NoGpuError

namespace llmc::cuda {

using llmc::NoGpuError;

// A driver call that failed. The message names the call and the driver's
// name and description of the error: "cuMemAlloc(64 GiB): CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& message, CUresult result) : std::runtime_error(message), result_(result) {}
  CUresult result() const { return result_; }

 private:
  CUresult result_;
};

// The entry points llmc uses, each of the version that cuda.h (the toolkit
// llmc is built with) declares, as cuGetProcAddress hands them out.
struct DriverApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetName) deviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) devicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) devicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  decltype(&::cuMemAlloc) memAlloc = nullptr;
  decltype(&::cuMemFree) memFree = nullptr;
  decltype(&::cuMemcpyHtoD) memcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) memcpyDtoH = nullptr;
  decltype(&::cuMemsetD8) memsetD8 = nullptr;
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuEventCreate) eventCreate = nullptr;
  decltype(&::cuEventDestroy) eventDestroy = nullptr;
  decltype(&::cuEventRecord) eventRecord = nullptr;
  decltype(&::cuEventSynchronize) eventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime) eventElapsedTime = nullptr;
};

// The driver, loaded and initialised (cuInit) on first use. Throws NoGpuError
// when libcuda.so.1 is absent, lacks an entry point, or cuInit fails (no GPU);
// a later call tries again.
const DriverApi& driver();

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
std::string describeCudaResult(CUresult result);

// Throws CudaError naming `call` unless `result` is CUDA_SUCCESS.
void check(CUresult result, std::string_view call);

}  // namespace llmc::cuda
