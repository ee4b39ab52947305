// The learning rate at each optimizer step: linear warmup, then cosine decay
// to a final fraction of the peak (llm.c's schedule).
#pragma once

#include <cstdint>

namespace llmc {

struct LrSchedule {
  double peak = 3e-4;
  int64_t warmupSteps = 0;
  int64_t totalSteps = 1;      // the decay reaches its end at the last step
  double finalFraction = 1.0;  // 1: constant after warmup

  // step counts from 0.
  double at(int64_t step) const;
};

}  // namespace llmc
