#include "lr_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace llmc {

LrScheduleKind parseLrScheduleKind(const std::string& name) {
  if (name == "cosine") return LrScheduleKind::Cosine;
  if (name == "linear") return LrScheduleKind::Linear;
  if (name == "constant") return LrScheduleKind::Constant;
  if (name == "wsd") return LrScheduleKind::Wsd;
  throw std::invalid_argument(
      fmt::format("unknown learning rate schedule '{}': expected cosine, linear, constant or wsd", name));
}

const char* lrScheduleName(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::Cosine: return "cosine";
    case LrScheduleKind::Linear: return "linear";
    case LrScheduleKind::Constant: return "constant";
    case LrScheduleKind::Wsd: return "wsd";
  }
  return "?";
}

namespace {

// How far step is along a decay that runs from `start` to the last step, in
// [0, 1]. llm.c divides by (total - start) unguarded; a run with no steps
// after its warmup would divide by zero there, here it is simply at the end.
double decayProgress(int64_t step, int64_t start, int64_t total) {
  const int64_t length = std::max<int64_t>(1, total - start);
  return std::clamp(static_cast<double>(step - start) / static_cast<double>(length), 0.0, 1.0);
}

}  // namespace

double LrSchedule::at(int64_t step) const {
  if (kind == LrScheduleKind::Constant) return peak;
  if (step < warmupSteps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmupSteps);
  const double floor = peak * finalFraction;
  switch (kind) {
    case LrScheduleKind::Cosine: {
      const double p = decayProgress(step, warmupSteps, totalSteps);
      return floor + 0.5 * (1.0 + std::cos(std::numbers::pi * p)) * (peak - floor);
    }
    case LrScheduleKind::Linear:
      return peak - decayProgress(step, warmupSteps, totalSteps) * (peak - floor);
    case LrScheduleKind::Wsd: {
      // llm.c truncates 0.8 * steps to a whole step (in float; the same for
      // any step count below 2^24).
      const auto decayStart = static_cast<int64_t>(0.8 * static_cast<double>(totalSteps));
      if (step < decayStart) return peak;
      return floor + (1.0 - std::sqrt(decayProgress(step, decayStart, totalSteps))) * (peak - floor);
    }
    case LrScheduleKind::Constant: break;
  }
  return peak;
}

}  // namespace llmc
