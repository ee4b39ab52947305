#include "step_energy.h"

namespace llmc {

void StepEnergy::record(int64_t stepsDone, double seconds, std::optional<uint64_t> millijoules) {
  if (!millijoules || (!readings_.empty() && *millijoules < readings_.back().millijoules)) {
    readings_.clear();
    return;
  }
  readings_.push_back({stepsDone, seconds, *millijoules});
}

void StepEnergy::restart(int64_t stepsDone, double seconds, std::optional<uint64_t> millijoules) {
  readings_.clear();
  record(stepsDone, seconds, millijoules);
}

double StepEnergy::perStep(const Reading& from, const Reading& to) {
  return static_cast<double>(to.millijoules - from.millijoules) / 1e3 / static_cast<double>(to.stepsDone - from.stepsDone);
}

std::optional<double> StepEnergy::recentJoulesPerStep(double minSeconds) const {
  if (readings_.size() < 2) return std::nullopt;
  const Reading& last = readings_.back();
  // The latest reading at least minSeconds before the last one.
  for (auto it = readings_.rbegin() + 1; it != readings_.rend(); ++it)
    if (last.seconds - it->seconds >= minSeconds && it->stepsDone < last.stepsDone) return perStep(*it, last);
  return std::nullopt;
}

std::optional<double> StepEnergy::joulesPerStepSince(int64_t stepsDone, double minSeconds) const {
  if (readings_.size() < 2) return std::nullopt;
  const Reading& last = readings_.back();
  for (const Reading& r : readings_)
    if (r.stepsDone >= stepsDone)
      return last.seconds - r.seconds >= minSeconds && r.stepsDone < last.stepsDone ? std::optional(perStep(r, last))
                                                                                     : std::nullopt;
  return std::nullopt;
}

}  // namespace llmc
