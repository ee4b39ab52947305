// NVML, the driver's management library, opened at run time where the driver
// put it (libnvidia-ml.so.1): the board's energy counter, SM clock and power
// limit, for measuring what a launch costs in energy. On the H200 a training
// step runs at the board's power limit (700 W), where the clock falls to what
// that power allows: two kernels of equal energy then take equal time
// whatever their cycle counts, so energy is what a step's speed is made of.
// Nothing links NVML; a machine without it gets NvmlUnavailable.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace llmc::cuda {

class NvmlUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One GPU's counters, found by the PCI address of a CUDA device (NVML numbers
// devices its own way, whatever CUDA_VISIBLE_DEVICES says).
class PowerMeter {
 public:
  explicit PowerMeter(CUdevice device);  // throws NvmlUnavailable

  // The energy the board has used since the driver loaded, in millijoules.
  uint64_t millijoules() const;
  // The SM clock now, in MHz.
  unsigned smClockMhz() const;
  // The power limit the driver enforces, in watts.
  double powerLimitWatts() const;
  // Whether the clock is held down now by the board's power limit (the
  // software power cap or the hardware power brake).
  bool atPowerCap() const;

 private:
  void* device_ = nullptr;  // nvmlDevice_t
};

}  // namespace llmc::cuda
