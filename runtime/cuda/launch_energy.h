// What groups of a module's launches cost in energy: each group's launches,
// in the module's order, captured into one CUDA graph and replayed back to
// back for a few seconds while the board's energy counter runs
// (nvml_library.h). At the H200's power limit a step's time is its energy
// divided by 700 W, so a group's joules a replay say what it takes of the
// step's time under the cap, which its time at full clocks does not.
//
// Procedure (measureRepeatedEnergy, for a group: one replay of its graph
// repeated): the work queued for `warmSeconds` (the clock and power settle
// at the level it draws), then for `seconds` with the counter read between
// two batches, two batches always queued so the GPU never idles. A batch is
// about 50 ms of work; the SM clock and the throttle reasons are sampled after
// each. The launches of a group read what the launches before them left in
// the arena (values of the last full run), so the numbers the tensor cores
// multiply are the step's, not zeros (which draw less power).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cuda_stream.h"
#include "module_executor.h"
#include "nvml_library.h"

namespace llmc::cuda {

struct LaunchGroup {
  std::string name;
  std::vector<size_t> launches;  // indices into the module's launches, in order
};

// What a piece of work queued again and again cost.
struct EnergyMeasurement {
  long repeats = 0;            // repeats measured
  double seconds = 0;          // their wall time (the GPU busy throughout)
  double joules = 0;           // their energy
  unsigned smClockMhz = 0;     // median of the samples
  double atPowerCapShare = 0;  // the share of samples with the clock held down by the power limit

  double joulesEach() const { return repeats ? joules / repeats : 0; }
  double msEach() const { return repeats ? 1e3 * seconds / repeats : 0; }
  double watts() const { return seconds > 0 ? joules / seconds : 0; }
};

struct GroupEnergy {
  std::string name;
  size_t launches = 0;
  EnergyMeasurement energy;  // a repeat: one replay of the group's graph
};

struct EnergyOptions {
  double warmSeconds = 2;
  double seconds = 5;
};

// `queueOnce` (work queued on `stream`, the same each call) repeated for
// options.seconds after options.warmSeconds, as the header says.
EnergyMeasurement measureRepeatedEnergy(const PowerMeter& meter, CUstream stream,
                                        const std::function<void()>& queueOnce, const EnergyOptions& options);

// Each group measured in turn (the executor loaded, its arena set and run
// once); returns once the stream is idle.
std::vector<GroupEnergy> measureGroupEnergy(ModuleExecutor& executor, const Stream& stream, const PowerMeter& meter,
                                            const std::vector<LaunchGroup>& groups, const EnergyOptions& options);

// The board's power with nothing running, over `seconds`.
double idleWatts(const PowerMeter& meter, double seconds);

// The groups as a table: launches, replays, ms and joules a replay, watts, SM
// clock, the share of samples at the power cap, and each group's joules as a
// share of the first group's (the whole module, as step_kernels_bench orders them).
std::string describeGroupEnergy(const std::vector<GroupEnergy>& groups, const EnergyOptions& options,
                                double idleWatts, double powerLimitWatts);

}  // namespace llmc::cuda
