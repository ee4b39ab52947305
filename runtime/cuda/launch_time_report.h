// Measured launch times (launch_timing.h) beside the cost model's
// predictions: the table step_kernels_bench and llmc-run --bench print, and
// the file they write, which `llmc-compile --emit perf --measured FILE` reads
// (compiler/report/measured_times.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "codegen/module.h"
#include "launch_timing.h"
#include "planning/partition.h"

namespace llmc::cuda {

// One launch, measured and predicted. A kernel's prediction includes its
// helper launches' (staging copies, output copies): each helper's row shows
// its own, the tile launch's the rest.
struct LaunchTimeRow {
  std::string name, role, bound, kind;  // kind: tensor-core GEMM, tensor-core stream, elementwise, ...
  int kernel = -1;                      // the planned kernel's id (-1: a launch made for none)
  double measured = 0, predicted = -1;  // microseconds; predicted -1 where there is none
  double inGraph = 0;                   // its gap in the graph with event nodes, before any timing again
  bool tensorCores = false, repeated = false;
};

// The module's launches in order, their times from `times`, their predictions
// from `planned` (the kernels the module was emitted from).
std::vector<LaunchTimeRow> launchTimeRows(const CudaModule& module, const std::vector<PlannedKernel>& planned,
                                          const LaunchTimes& times);

// How the launches were timed, the `top` slowest (all where top < 0) with
// their predictions, the totals (predicted against measured, the kernels
// within 2x of their prediction) and the totals by kind: several lines.
std::string describeLaunchTimes(const std::vector<LaunchTimeRow>& rows, const std::vector<PlannedKernel>& planned,
                                const LaunchTimes& times, int top);

// Every row as the measurement file's JSON array (launch, role, kind, kernel,
// tensor_cores, measured_us, predicted_us, bound, timed).
nlohmann::json launchTimesJson(const std::vector<LaunchTimeRow>& rows, const LaunchTimes& times);

}  // namespace llmc::cuda
