// The CUDA driver API, opened at run time from libcuda.so.1. cuda.h and
// cudaTypedefs.h are included for their types only: nothing links libcuda, so every
// binary starts, and runs its parts that need no GPU, on a machine without a
// driver. The first use of driver() loads the library; where that fails (no
// driver, no GPU) it throws NoGpuError.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "planning/gpu_query.h"  // NoGpuError

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

// The entry points llmc uses: (member, symbol, version). Each is asked of
// the driver in the version whose prototype cudaTypedefs.h names
// PFN_<symbol>_v<version>: a newer version can take other arguments
// (cuCtxSynchronize of CUDA 13 takes a context), so the version is fixed here
// rather than taken from CUDA_VERSION.
#define LLMC_CUDA_DRIVER_ENTRIES(X)                          \
  X(init, cuInit, 2000)                                      \
  X(getErrorName, cuGetErrorName, 6000)                      \
  X(getErrorString, cuGetErrorString, 6000)                  \
  X(deviceGetCount, cuDeviceGetCount, 2000)                  \
  X(deviceGet, cuDeviceGet, 2000)                            \
  X(deviceGetName, cuDeviceGetName, 2000)                    \
  X(deviceGetAttribute, cuDeviceGetAttribute, 2000)          \
  X(devicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000)  \
  X(devicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 11000) \
  X(ctxSetCurrent, cuCtxSetCurrent, 4000)                    \
  X(ctxSynchronize, cuCtxSynchronize, 2000)                  \
  X(ctxGetCurrent, cuCtxGetCurrent, 4000)                    \
  X(memAlloc, cuMemAlloc, 3020)                              \
  X(memFree, cuMemFree, 3020)                                \
  X(memcpyHtoD, cuMemcpyHtoD, 3020)                          \
  X(memcpyDtoH, cuMemcpyDtoH, 3020)                          \
  X(memsetD8, cuMemsetD8, 3020)                              \
  X(memGetInfo, cuMemGetInfo, 3020)                          \
  X(memcpyHtoDAsync, cuMemcpyHtoDAsync, 3020)                \
  X(memcpyDtoHAsync, cuMemcpyDtoHAsync, 3020)                \
  X(memsetD8Async, cuMemsetD8Async, 3020)                    \
  X(memcpyDtoDAsync, cuMemcpyDtoDAsync, 3020)                \
  X(streamCreate, cuStreamCreate, 2000)                      \
  X(streamDestroy, cuStreamDestroy, 4000)                    \
  X(streamSynchronize, cuStreamSynchronize, 2000)            \
  X(streamBeginCapture, cuStreamBeginCapture, 10010)         \
  X(streamEndCapture, cuStreamEndCapture, 10000)             \
  X(graphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040) \
  X(graphLaunch, cuGraphLaunch, 10000)                       \
  X(graphExecDestroy, cuGraphExecDestroy, 10000)             \
  X(graphDestroy, cuGraphDestroy, 10000)                     \
  X(moduleLoadDataEx, cuModuleLoadDataEx, 2010)              \
  X(moduleUnload, cuModuleUnload, 2000)                      \
  X(moduleGetFunction, cuModuleGetFunction, 2000)            \
  X(funcSetAttribute, cuFuncSetAttribute, 9000)              \
  X(funcGetAttribute, cuFuncGetAttribute, 2020)              \
  X(occupancyMaxActiveClusters, cuOccupancyMaxActiveClusters, 11070) \
  X(launchKernel, cuLaunchKernel, 4000)                      \
  X(eventCreate, cuEventCreate, 2000)                        \
  X(eventDestroy, cuEventDestroy, 4000)                      \
  X(eventRecord, cuEventRecord, 2000)                        \
  X(eventRecordWithFlags, cuEventRecordWithFlags, 11010)     \
  X(eventSynchronize, cuEventSynchronize, 2000)              \
  X(streamWaitEvent, cuStreamWaitEvent, 3020)                \
  X(eventElapsedTime, cuEventElapsedTime, 12080)              \
  X(tensorMapEncodeTiled, cuTensorMapEncodeTiled, 12000)

struct DriverApi {
#define LLMC_DECLARE_DRIVER_ENTRY(member, symbol, version) PFN_##symbol##_v##version member = nullptr;
  LLMC_CUDA_DRIVER_ENTRIES(LLMC_DECLARE_DRIVER_ENTRY)
#undef LLMC_DECLARE_DRIVER_ENTRY
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
