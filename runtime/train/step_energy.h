// The energy of training steps, from readings of the GPU board's energy
// counter (NVML's total energy, in millijoules) taken between steps.
//
// The counter does not move continuously: the driver updates it in jumps of
// its own (about every 100 ms on an H100, seen 2026-12-07), longer than a
// d12 step (64 ms). Two readings around one step then give 0 J or the energy
// of two steps, so a step's energy here is the counter's rise over a run of
// steps divided by their number. The error is at most one jump at each end:
// over a window of S seconds, about 0.1 / S of the result.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace llmc {

class StepEnergy {
 public:
  // The counter read after `stepsDone` steps (0: before the first) at
  // `seconds` on any steady clock; none: the reading was lost. A lost reading,
  // or a counter that went back (the driver reloaded), starts the record
  // again from the next good one: a window never spans a gap.
  void record(int64_t stepsDone, double seconds, std::optional<uint64_t> millijoules);

  // The same after other work than steps (validation, samples, checkpoints):
  // the record starts again here, so that no window holds that work.
  void restart(int64_t stepsDone, double seconds, std::optional<uint64_t> millijoules);

  // Joules a step over the last steps whose readings span at least
  // `minSeconds`; none until the record spans that long.
  std::optional<double> recentJoulesPerStep(double minSeconds) const;

  // Joules a step from the reading after `stepsDone` steps (or the first one
  // after it) to the last; none where fewer than `minSeconds` lie between
  // them (the counter's jumps would be too much of it).
  std::optional<double> joulesPerStepSince(int64_t stepsDone, double minSeconds) const;

 private:
  struct Reading {
    int64_t stepsDone;
    double seconds;
    uint64_t millijoules;
  };
  static double perStep(const Reading& from, const Reading& to);
  std::vector<Reading> readings_;  // since the last gap, in order
};

}  // namespace llmc
