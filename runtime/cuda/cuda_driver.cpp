#include "cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace llmc::cuda {

namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

template <typename F>
void lookUp(GetProcAddress getProcAddress, const char* name, int version, F& entry) {
  void* address = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  const CUresult result = getProcAddress(name, &address, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  if (result != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || !address)
    throw NoGpuError(fmt::format("the CUDA driver has no {} of CUDA {}.{} (status {}): update the driver", name,
                                 version / 1000, version % 1000 / 10, static_cast<int>(status)));
  entry = reinterpret_cast<F>(address);
}

DriverApi loadDriver() {
  // The library stays loaded: unloading the driver while CUDA objects may
  // still exist is unsafe.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) throw NoGpuError(fmt::format("no CUDA driver: {}", dlerror()));
  // cuGetProcAddress (rather than dlsym) hands out each entry point in the
  // version asked for: cuMemAlloc of 3.2 is the symbol cuMemAlloc_v2, and so on.
  auto getProcAddress = reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  if (!getProcAddress) throw NoGpuError("the CUDA driver is older than CUDA 12 (no cuGetProcAddress_v2)");

  DriverApi api;
#define LLMC_LOOK_UP_DRIVER_ENTRY(member, symbol, version) lookUp(getProcAddress, #symbol, version, api.member);
  LLMC_CUDA_DRIVER_ENTRIES(LLMC_LOOK_UP_DRIVER_ENTRY)
#undef LLMC_LOOK_UP_DRIVER_ENTRY

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
