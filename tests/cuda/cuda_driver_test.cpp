// Without a CUDA driver (as on the CI machines), the GPU runtime says so with
// NoGpuError rather than failing to start or crashing.
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include "cuda_context.h"
#include "device_buffer.h"

using llmc::cuda::Context;
using llmc::cuda::NoGpuError;

TEST_CASE("without a driver, a context or an allocation throws NoGpuError", "[driver]") {
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(driver);
    SUCCEED("a CUDA driver is installed here; jit_gpu_test covers the driver");
    return;
  }
  CHECK_THROWS_AS(Context(0), NoGpuError);
  CHECK_THROWS_WITH(Context(0), Catch::Matchers::Contains("no CUDA driver: libcuda.so.1"));
  CHECK_THROWS_AS(llmc::cuda::DeviceBuffer(1024), NoGpuError);
}
