#include "cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace llmc::cuda {

namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

template <typename F>
void lookUp(GetProcAddress getProcAddress, const char* name, F& entry) {
  void* address = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  const CUresult result = getProcAddress(name, &address, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  if (result != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || !address)
    throw NoGpuError(fmt::format("the CUDA driver has no {} of CUDA {}.{} (status {}): update the driver", name,
                                 CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, static_cast<int>(status)));
  entry = reinterpret_cast<F>(address);
}

DriverApi loadDriver() {
  // The library stays loaded: unloading the driver while CUDA objects may
  // still exist is unsafe.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) throw NoGpuError(fmt::format("no CUDA driver: {}", dlerror()));
  // cuGetProcAddress (rather than dlsym) gives each entry point in the version
  // that matches cuda.h's prototype: cuMemAlloc is cuMemAlloc_v2, and so on.
  auto getProcAddress = reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  if (!getProcAddress) throw NoGpuError("the CUDA driver is older than CUDA 12 (no cuGetProcAddress_v2)");

  DriverApi api;
  lookUp(getProcAddress, "cuInit", api.init);
  lookUp(getProcAddress, "cuGetErrorName", api.getErrorName);
  lookUp(getProcAddress, "cuGetErrorString", api.getErrorString);
  lookUp(getProcAddress, "cuDeviceGetCount", api.deviceGetCount);
  lookUp(getProcAddress, "cuDeviceGet", api.deviceGet);
  lookUp(getProcAddress, "cuDeviceGetName", api.deviceGetName);
  lookUp(getProcAddress, "cuDeviceGetAttribute", api.deviceGetAttribute);
  lookUp(getProcAddress, "cuDevicePrimaryCtxRetain", api.devicePrimaryCtxRetain);
  lookUp(getProcAddress, "cuDevicePrimaryCtxRelease", api.devicePrimaryCtxRelease);
  lookUp(getProcAddress, "cuCtxSetCurrent", api.ctxSetCurrent);
  lookUp(getProcAddress, "cuCtxSynchronize", api.ctxSynchronize);
  lookUp(getProcAddress, "cuMemAlloc", api.memAlloc);
  lookUp(getProcAddress, "cuMemFree", api.memFree);
  lookUp(getProcAddress, "cuMemcpyHtoD", api.memcpyHtoD);
  lookUp(getProcAddress, "cuMemcpyDtoH", api.memcpyDtoH);
  lookUp(getProcAddress, "cuMemsetD8", api.memsetD8);
  lookUp(getProcAddress, "cuModuleLoadDataEx", api.moduleLoadDataEx);
  lookUp(getProcAddress, "cuModuleUnload", api.moduleUnload);
  lookUp(getProcAddress, "cuModuleGetFunction", api.moduleGetFunction);
  lookUp(getProcAddress, "cuFuncSetAttribute", api.funcSetAttribute);
  lookUp(getProcAddress, "cuLaunchKernel", api.launchKernel);
  lookUp(getProcAddress, "cuEventCreate", api.eventCreate);
  lookUp(getProcAddress, "cuEventDestroy", api.eventDestroy);
  lookUp(getProcAddress, "cuEventRecord", api.eventRecord);
  lookUp(getProcAddress, "cuEventSynchronize", api.eventSynchronize);
  lookUp(getProcAddress, "cuEventElapsedTime", api.eventElapsedTime);

  if (CUresult result = api.init(0); result != CUDA_SUCCESS) {
    // Error names come from the driver, which is loaded by now.
    const char* name = nullptr;
    api.getErrorName(result, &name);
    throw NoGpuError(fmt::format("cuInit: {} ({}): the driver sees no usable GPU", name ? name : "error",
                                 static_cast<int>(result)));
  }
  return api;
}

}  // namespace

const DriverApi& driver() {
  // A static's initialisation is thread-safe, and is tried again after it threw.
  static const DriverApi api = loadDriver();
  return api;
}

std::string describeCudaResult(CUresult result) {
  const char* name = nullptr;
  const char* description = nullptr;
  driver().getErrorName(result, &name);
  driver().getErrorString(result, &description);
  return fmt::format("{} ({}): {}", name ? name : "unknown CUDA error", static_cast<int>(result),
                     description ? description : "no description");
}

void check(CUresult result, std::string_view call) {
  if (result != CUDA_SUCCESS) throw CudaError(fmt::format("{}: {}", call, describeCudaResult(result)), result);
}

}  // namespace llmc::cuda
