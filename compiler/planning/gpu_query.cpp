#include "planning/gpu_query.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace llmc {

namespace {

// The driver API as cuda.h (CUDA 13.0) declares it, restated so that no CUDA
// header is needed to build.
using CUresult = int;
using CUdevice = int;
constexpr CUresult CUDA_SUCCESS = 0;
enum class Attribute : int {  // CUdevice_attribute, CU_DEVICE_ATTRIBUTE_...
  MaxThreadsPerBlock = 1,
  WarpSize = 10,
  MaxRegistersPerBlock = 12,
  ClockRate = 13,  // kHz
  MultiprocessorCount = 16,
  MemoryClockRate = 36,       // kHz
  GlobalMemoryBusWidth = 37,  // bits
  L2CacheSize = 38,
  MaxThreadsPerMultiprocessor = 39,
  ComputeCapabilityMajor = 75,
  ComputeCapabilityMinor = 76,
  MaxSharedMemoryPerMultiprocessor = 81,
  MaxRegistersPerMultiprocessor = 82,
  MaxSharedMemoryPerBlockOptin = 97,
  MaxBlocksPerMultiprocessor = 106,
};

// The entry points queryGpu uses, looked up in libcuda.so.1. The library stays
// loaded: unloading the driver while the process may still use CUDA is unsafe.
class Driver {
 public:
  Driver() {
    handle_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw NoGpuError(dlerror());
    init_ = symbol<CUresult (*)(unsigned)>("cuInit");
    deviceGetCount_ = symbol<CUresult (*)(int*)>("cuDeviceGetCount");
    deviceGet_ = symbol<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
    deviceGetName_ = symbol<CUresult (*)(char*, int, CUdevice)>("cuDeviceGetName");
    deviceTotalMem_ = symbol<CUresult (*)(size_t*, CUdevice)>("cuDeviceTotalMem_v2");
    deviceGetAttribute_ = symbol<CUresult (*)(int*, int, CUdevice)>("cuDeviceGetAttribute");
    getErrorName_ = symbol<CUresult (*)(CUresult, const char**)>("cuGetErrorName");
  }

  CUdevice device(int ordinal) const {
    if (CUresult r = init_(0); r != CUDA_SUCCESS) throw NoGpuError("cuInit: " + errorName(r));
    int count = 0;
    if (CUresult r = deviceGetCount_(&count); r != CUDA_SUCCESS)
      throw NoGpuError("cuDeviceGetCount: " + errorName(r));
    if (ordinal >= count) throw NoGpuError(fmt::format("the driver sees {} GPUs, none numbered {}", count, ordinal));
    CUdevice dev = 0;
    check(deviceGet_(&dev, ordinal), "cuDeviceGet");
    return dev;
  }

  std::string name(CUdevice dev) const {
    char name[256] = {};
    check(deviceGetName_(name, sizeof name, dev), "cuDeviceGetName");
    return name;
  }

  int64_t totalMemory(CUdevice dev) const {
    size_t bytes = 0;
    check(deviceTotalMem_(&bytes, dev), "cuDeviceTotalMem");
    return static_cast<int64_t>(bytes);
  }

  // The attribute, or 0 where this driver does not report it.
  int attribute(CUdevice dev, Attribute attribute) const {
    int value = 0;
    return deviceGetAttribute_(&value, static_cast<int>(attribute), dev) == CUDA_SUCCESS ? value : 0;
  }

  int requiredAttribute(CUdevice dev, Attribute attribute) const {
    int value = 0;
    check(deviceGetAttribute_(&value, static_cast<int>(attribute), dev),
          fmt::format("cuDeviceGetAttribute({})", static_cast<int>(attribute)));
    return value;
  }

 private:
  template <typename F>
  F symbol(const char* name) {
    void* f = dlsym(handle_, name);
    if (!f) throw NoGpuError(fmt::format("libcuda.so.1 has no {}", name));
    return reinterpret_cast<F>(f);
  }

  std::string errorName(CUresult r) const {
    const char* name = nullptr;
    return getErrorName_(r, &name) == CUDA_SUCCESS && name ? fmt::format("{} ({})", name, r)
                                                         : fmt::format("error {}", r);
  }

  void check(CUresult r, const std::string& call) const {
    if (r != CUDA_SUCCESS) throw std::runtime_error(fmt::format("{}: {}", call, errorName(r)));
  }

  void* handle_ = nullptr;
  CUresult (*init_)(unsigned) = nullptr;
  CUresult (*deviceGetCount_)(int*) = nullptr;
  CUresult (*deviceGet_)(CUdevice*, int) = nullptr;
  CUresult (*deviceGetName_)(char*, int, CUdevice) = nullptr;
  CUresult (*deviceTotalMem_)(size_t*, CUdevice) = nullptr;
  CUresult (*deviceGetAttribute_)(int*, int, CUdevice) = nullptr;
  CUresult (*getErrorName_)(CUresult, const char**) = nullptr;
};

}  // namespace

GpuProperties queryGpu(int ordinal) {
  const Driver driver;
  const CUdevice dev = driver.device(ordinal);
  GpuProperties p;
  p.name = driver.name(dev);
  p.computeCapabilityMajor = driver.requiredAttribute(dev, Attribute::ComputeCapabilityMajor);
  p.computeCapabilityMinor = driver.requiredAttribute(dev, Attribute::ComputeCapabilityMinor);
  p.smCount = driver.requiredAttribute(dev, Attribute::MultiprocessorCount);
  p.memoryBytes = driver.totalMemory(dev);
  p.clockHz = 1e3 * driver.attribute(dev, Attribute::ClockRate);
  // Two transfers per memory clock (double data rate) over the whole bus.
  p.memoryBandwidth = 2 * 1e3 * driver.attribute(dev, Attribute::MemoryClockRate) *
                      driver.attribute(dev, Attribute::GlobalMemoryBusWidth) / 8.0;
  p.l2Bytes = driver.attribute(dev, Attribute::L2CacheSize);
  p.smemBytesPerSM = driver.attribute(dev, Attribute::MaxSharedMemoryPerMultiprocessor);
  p.smemBytesPerBlock = driver.attribute(dev, Attribute::MaxSharedMemoryPerBlockOptin);
  p.registersPerSM = driver.attribute(dev, Attribute::MaxRegistersPerMultiprocessor);
  p.registersPerBlock = driver.attribute(dev, Attribute::MaxRegistersPerBlock);
  p.warpSize = driver.attribute(dev, Attribute::WarpSize);
  p.maxThreadsPerBlock = driver.attribute(dev, Attribute::MaxThreadsPerBlock);
  p.maxThreadsPerSM = driver.attribute(dev, Attribute::MaxThreadsPerMultiprocessor);
  p.maxBlocksPerSM = driver.attribute(dev, Attribute::MaxBlocksPerMultiprocessor);
  return p;
}

}  // namespace llmc
