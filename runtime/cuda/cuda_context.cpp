#include "cuda_context.h"

#include <fmt/format.h>

namespace llmc::cuda {

namespace {

int attribute(CUdevice device, CUdevice_attribute which, const char* what) {
  int value = 0;
  check(driver().deviceGetAttribute(&value, which, device), fmt::format("cuDeviceGetAttribute({})", what));
  return value;
}

}  // namespace

Context::Context(int ordinal) : ordinal_(ordinal) {
  const DriverApi& api = driver();
  int count = 0;
  check(api.deviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    throw NoGpuError(fmt::format("the driver sees {} GPU(s), none numbered {}", count, ordinal));
  check(api.deviceGet(&device_, ordinal), fmt::format("cuDeviceGet({})", ordinal));
  char name[256] = {};
  check(api.deviceGetName(name, sizeof name, device_), "cuDeviceGetName");
  name_ = name;
  computeCapability_ =
      10 * attribute(device_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major") +
      attribute(device_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
  maxDynamicSharedMemoryPerBlock_ = attribute(device_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                              "max shared memory per block (opt-in)");
  check(api.devicePrimaryCtxRetain(&context_, device_), fmt::format("cuDevicePrimaryCtxRetain(GPU {})", ordinal));
  try {
    makeCurrent();
  } catch (...) {
    api.devicePrimaryCtxRelease(device_);
    throw;
  }
}

Context::~Context() {
  // Errors here cannot be reported (a destructor must not throw); the driver
  // frees the context's resources when the last retain is released.
  driver().devicePrimaryCtxRelease(device_);
}

void Context::makeCurrent() const { check(driver().ctxSetCurrent(context_), "cuCtxSetCurrent"); }

void Context::synchronize() const { check(driver().ctxSynchronize(), "cuCtxSynchronize"); }

std::string Context::arch() const {
  return fmt::format("sm_{}{}", computeCapability_, computeCapability_ >= 90 ? "a" : "");
}

std::optional<Context> contextOrSkip() {
  try {
    return std::optional<Context>(std::in_place, 0);  // made in place: a Context neither copies nor moves
  } catch (const NoGpuError& e) {
    fmt::print("skipped: {}\n", e.what());
    return std::nullopt;
  }
}

}  // namespace llmc::cuda
