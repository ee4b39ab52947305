// What the CUDA driver reports about a GPU, read through libcuda.so.1 opened at
// run time: llmc needs no CUDA to build, and runs without a GPU.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace llmc {

// No driver, or the driver sees no GPU.
class NoGpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct GpuProperties {
  std::string name;  // as the driver gives it: "NVIDIA H200"
  int computeCapabilityMajor = 0, computeCapabilityMinor = 0;
  int smCount = 0;
  int64_t memoryBytes = 0;
  // The rest are 0 where the driver does not report them.
  double clockHz = 0;          // SM clock
  double memoryBandwidth = 0;  // bytes/s, nominal: memory clock x bus width, double data rate
  int64_t l2Bytes = 0;
  int64_t smemBytesPerSM = 0;
  int64_t smemBytesPerBlock = 0;  // with the opt-in (cudaFuncAttributeMaxDynamicSharedMemorySize)
  int registersPerSM = 0;
  int registersPerBlock = 0;
  int warpSize = 0;
  int maxThreadsPerBlock = 0;
  int maxThreadsPerSM = 0;
  int maxBlocksPerSM = 0;
};

// The properties of GPU `ordinal` (in CUDA's numbering). Throws NoGpuError
// when the driver cannot be loaded or initialised or has no such GPU, and
// std::runtime_error when a query of a present GPU fails.
GpuProperties queryGpu(int ordinal = 0);

}  // namespace llmc
