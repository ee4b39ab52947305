#include "outlier_detector.h"

#include <fmt/format.h>

#include <cmath>

namespace llmc {

double OutlierDetector::update(double value) {
  if (count_ < kWindow) {
    window_[static_cast<size_t>(count_++)] = value;
    sum_ += value;
    sumOfSquares_ += value * value;
    return NAN;
  }
  const double oldest = window_[static_cast<size_t>(next_)];
  sum_ -= oldest;
  sumOfSquares_ -= oldest * oldest;
  sum_ += value;
  sumOfSquares_ += value * value;
  window_[static_cast<size_t>(next_)] = value;
  next_ = (next_ + 1) % kWindow;
  const double mean = sum_ / kWindow;
  const double variance = sumOfSquares_ / kWindow - mean * mean;
  // Rounding can leave a tiny negative variance for a window of equal values.
  if (!(variance > 0)) return 0.0;
  return (value - mean) / std::sqrt(variance);
}

std::optional<std::string> skipUpdateReason(double lossZ, double gradZ, double lossLimit, double gradLimit) {
  if (std::isfinite(lossZ) && lossLimit != 0 && lossZ > lossLimit)
    return fmt::format("skipping update due to loss z-score of {:.6f}", lossZ);
  if (std::isfinite(gradZ) && gradLimit != 0 && gradZ > gradLimit)
    return fmt::format("skipping update due to grad z-score of {:.6f}", gradZ);
  return std::nullopt;
}

}  // namespace llmc
