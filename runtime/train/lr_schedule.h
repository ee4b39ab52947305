// The learning rate at each optimizer step, by llm.c's schedulers
// (llmc/schedulers.h): -k picks the shape, -l the peak, -u the warmup and
// -q the fraction of the peak the decay ends at.
#pragma once

#include <cstdint>
#include <string>

namespace llmc {

enum class LrScheduleKind {
  Cosine,    // warmup, then a cosine from the peak down to peak*finalFraction
  Linear,    // warmup, then a straight line down to peak*finalFraction
  Constant,  // the peak at every step: llm.c's "constant" ignores warmup and -q
  Wsd,       // warmup-stable-decay: warmup, the peak until 80% of the steps, then 1-sqrt down to peak*finalFraction
};

// "cosine", "linear", "constant", "wsd" (llm.c's -k names). Throws
// std::invalid_argument naming the accepted ones for anything else.
LrScheduleKind parseLrScheduleKind(const std::string& name);
const char* lrScheduleName(LrScheduleKind kind);

struct LrSchedule {
  double peak = 3e-4;
  int64_t warmupSteps = 0;
  int64_t totalSteps = 1;      // the decay reaches its end at the last step
  double finalFraction = 1.0;  // 1: no decay after warmup
  LrScheduleKind kind = LrScheduleKind::Cosine;

  // step counts from 0, as llm.c's does.
  double at(int64_t step) const;
};

}  // namespace llmc
