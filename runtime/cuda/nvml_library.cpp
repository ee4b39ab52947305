#include "nvml_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include "cuda_driver.h"

namespace llmc::cuda {

namespace {

// NVML's C API as llmc uses it (nvml.h is not needed to build): every call
// returns an int, 0 for success.
struct NvmlApi {
  int (*init)() = nullptr;
  const char* (*errorString)(int) = nullptr;
  int (*handleByPciBusId)(const char*, void**) = nullptr;
  int (*totalEnergy)(void*, unsigned long long*) = nullptr;
  int (*clockInfo)(void*, int, unsigned*) = nullptr;
  int (*enforcedPowerLimit)(void*, unsigned*) = nullptr;
  int (*throttleReasons)(void*, unsigned long long*) = nullptr;
};

constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM
// nvmlClocksThrottleReasonSwPowerCap and ...HwPowerBrakeSlowdown.
constexpr unsigned long long kPowerCapReasons = 0x4ull | 0x80ull;

template <typename F>
void symbol(void* library, const char* name, F& entry) {
  entry = reinterpret_cast<F>(dlsym(library, name));
  if (!entry) throw NvmlUnavailable(fmt::format("libnvidia-ml.so.1 has no {}", name));
}

const NvmlApi& nvml() {
  static const NvmlApi api = [] {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library)
      throw NvmlUnavailable(fmt::format("NVML not found (libnvidia-ml.so.1, installed with the NVIDIA driver): {}",
                                        dlerror()));
    NvmlApi a;
    symbol(library, "nvmlInit_v2", a.init);
    symbol(library, "nvmlErrorString", a.errorString);
    symbol(library, "nvmlDeviceGetHandleByPciBusId_v2", a.handleByPciBusId);
    symbol(library, "nvmlDeviceGetTotalEnergyConsumption", a.totalEnergy);
    symbol(library, "nvmlDeviceGetClockInfo", a.clockInfo);
    symbol(library, "nvmlDeviceGetEnforcedPowerLimit", a.enforcedPowerLimit);
    symbol(library, "nvmlDeviceGetCurrentClocksThrottleReasons", a.throttleReasons);
    if (const int status = a.init(); status != 0)
      throw NvmlUnavailable(fmt::format("nvmlInit failed: {}", a.errorString(status)));
    return a;
  }();
  return api;
}

void checkNvml(int status, const char* what) {
  if (status != 0) throw NvmlUnavailable(fmt::format("{} failed: {}", what, nvml().errorString(status)));
}

int attribute(CUdevice device, CUdevice_attribute which) {
  int value = 0;
  check(driver().deviceGetAttribute(&value, which, device), "cuDeviceGetAttribute");
  return value;
}

}  // namespace

PowerMeter::PowerMeter(CUdevice device) {
  const std::string bus =
      fmt::format("{:08x}:{:02x}:{:02x}.0", attribute(device, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
                  attribute(device, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID), attribute(device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
  checkNvml(nvml().handleByPciBusId(bus.c_str(), &device_), "nvmlDeviceGetHandleByPciBusId");
  millijoules();  // a board without the counter says so now
}

uint64_t PowerMeter::millijoules() const {
  unsigned long long mj = 0;
  checkNvml(nvml().totalEnergy(device_, &mj), "nvmlDeviceGetTotalEnergyConsumption");
  return mj;
}

unsigned PowerMeter::smClockMhz() const {
  unsigned mhz = 0;
  checkNvml(nvml().clockInfo(device_, kNvmlClockSm, &mhz), "nvmlDeviceGetClockInfo");
  return mhz;
}

double PowerMeter::powerLimitWatts() const {
  unsigned mw = 0;
  checkNvml(nvml().enforcedPowerLimit(device_, &mw), "nvmlDeviceGetEnforcedPowerLimit");
  return mw / 1000.0;
}

bool PowerMeter::atPowerCap() const {
  unsigned long long reasons = 0;
  checkNvml(nvml().throttleReasons(device_, &reasons), "nvmlDeviceGetCurrentClocksThrottleReasons");
  return (reasons & kPowerCapReasons) != 0;
}

}  // namespace llmc::cuda
