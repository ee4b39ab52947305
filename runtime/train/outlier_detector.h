// llm.c's outlier detector (llmc/outlier_detector.h) for -sl and -sg: the
// z-score of each new loss or gradient norm against a window of the last 128
// values, the new one included. Until the window is full there is no z-score
// (NaN), so the first 128 steps of a run (a resumed one too: the window is
// not checkpointed, as in llm.c) are never skipped.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace llmc {

class OutlierDetector {
 public:
  static constexpr int kWindow = 128;

  // Adds value to the window; returns its z-score, NaN while the window is
  // filling, 0 when the window's values are all equal.
  double update(double value);

 private:
  std::array<double, kWindow> window_{};
  int count_ = 0;
  int next_ = 0;  // the oldest value once the window is full
  // Running sums in double, as llm.c, so that the mean and variance do not
  // drift over a long run.
  double sum_ = 0, sumOfSquares_ = 0;
};

// Why a step's update is skipped, llm.c's way: the loss's z-score above
// lossLimit, else the gradient norm's above gradLimit (a limit of 0 is off; a
// NaN z-score never skips). None: apply the update.
std::optional<std::string> skipUpdateReason(double lossZ, double gradZ, double lossLimit, double gradLimit);

}  // namespace llmc
