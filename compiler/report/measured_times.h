// Measured kernel times read back to stand beside the performance model:
// `step_kernels_bench --json FILE` times every launch of a module on the GPU;
// `llmc-compile --emit perf --measured FILE` sets those times next to the
// predictions of the same plan, on any machine (docs/performance.md).
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "planning/partition.h"

namespace llmc {

// A measurement file that cannot be read, or that is not of this plan. The
// message names the file, and the row and field at fault.
class MeasurementError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Seconds per planned kernel (PlannedKernel::kernel.id): the sum of its
// launches' medians (a kernel's helper launches, such as the zeroing before
// atomic adds, count with it). Throws MeasurementError where a launch's
// kernel is not in `kernels`, or a tile launch is named for another kernel
// than its id's (the file was measured from another plan).
std::map<int, double> readMeasuredKernelSeconds(const std::string& path, const std::vector<PlannedKernel>& kernels);

}  // namespace llmc
