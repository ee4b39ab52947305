// StepEnergy: a step's energy from a counter that moves in jumps longer than
// a step, as NVML's does.
#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>

#include "step_energy.h"

namespace {

// A board drawing `watts` whose counter the driver updates every `period`
// seconds: the energy up to the last update, in millijoules.
uint64_t counterAt(double seconds, double watts, double period) {
  const double updated = static_cast<double>(static_cast<int64_t>(seconds / period)) * period;
  return static_cast<uint64_t>(updated * watts * 1e3);
}

}  // namespace

TEST_CASE("step energy: steps shorter than the counter's jumps average to their energy", "[step_energy]") {
  // 64 ms steps at 700 W (44.8 J each), the counter updated every 100 ms.
  llmc::StepEnergy energy;
  const double step = 0.064, watts = 700, period = 0.1;
  energy.restart(0, 0.0, counterAt(0.0, watts, period));
  int zeros = 0;
  uint64_t previous = counterAt(0.0, watts, period);
  for (int i = 1; i <= 60; ++i) {
    const uint64_t now = counterAt(i * step, watts, period);
    zeros += now == previous;  // a reading around one step alone would say 0 J
    previous = now;
    energy.record(i, i * step, now);
    if (i * step < 1.0) CHECK_FALSE(energy.recentJoulesPerStep(1.0).has_value());
  }
  CHECK(zeros > 10);
  const std::optional<double> recent = energy.recentJoulesPerStep(1.0);
  REQUIRE(recent.has_value());
  // At most one jump (70 J) off at each end over at least 16 steps.
  CHECK(*recent == Approx(44.8).margin(2 * 70.0 / 16));
  const std::optional<double> since = energy.joulesPerStepSince(3, 1.0);
  REQUIRE(since.has_value());
  CHECK(*since == Approx(44.8).margin(2 * 70.0 / 57));
  // Too short a span gives nothing rather than a guess.
  CHECK_FALSE(energy.joulesPerStepSince(50, 1.0).has_value());
}

TEST_CASE("step energy: a lost reading or a counter that went back starts again", "[step_energy]") {
  llmc::StepEnergy energy;
  energy.restart(0, 0.0, 1000);
  energy.record(10, 1.0, 11000);  // 1 J a step
  REQUIRE(energy.recentJoulesPerStep(0.5).has_value());
  CHECK(*energy.recentJoulesPerStep(0.5) == Approx(1.0));
  energy.record(11, 1.1, std::nullopt);
  CHECK_FALSE(energy.recentJoulesPerStep(0.5).has_value());
  energy.record(12, 1.2, 500);
  energy.record(22, 2.2, 20500);  // 2 J a step since the gap
  CHECK(*energy.recentJoulesPerStep(0.5) == Approx(2.0));
  energy.record(23, 2.3, 100);  // went back: the driver reloaded
  CHECK_FALSE(energy.recentJoulesPerStep(0.05).has_value());
  // Other work between steps (restart) is in no window.
  energy.restart(30, 5.0, 1000000);
  energy.record(40, 6.0, 1030000);
  CHECK(*energy.joulesPerStepSince(0, 1.0) == Approx(3.0));
}
