#include "launch_energy.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "cuda_event.h"

namespace llmc::cuda {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A batch of replays lasts about this long: long enough that the host's
// turn between batches costs nothing, short enough to stop near `seconds`.
constexpr double kBatchMs = 50;

}  // namespace

EnergyMeasurement measureRepeatedEnergy(const PowerMeter& meter, CUstream stream,
                                        const std::function<void()>& queueOnce, const EnergyOptions& options) {
  Event before, after;
  queueOnce();  // the first call may upload or set things up
  before.record(stream);
  queueOnce();
  after.record(stream);
  const double onceMs = std::max(1e-3, static_cast<double>(Event::elapsedMilliseconds(before, after)));
  const int batch = static_cast<int>(std::clamp(std::ceil(kBatchMs / onceMs), 1.0, 100000.0));

  // Two batches always queued: batch k is recorded by done[k % 2], and the
  // host waits for batch k - 1 only once batch k is behind it.
  Event done[2];
  long k = 0;
  auto queueBatch = [&] {
    for (int j = 0; j < batch; ++j) queueOnce();
    done[k % 2].record(stream);
    ++k;
  };
  auto waitForPrevious = [&] { done[k % 2].synchronize(); };  // batch k - 2's event, the one before the last queued

  queueBatch();
  for (const Clock::time_point warm = Clock::now(); secondsSince(warm) < options.warmSeconds;) {
    queueBatch();
    waitForPrevious();
  }
  EnergyMeasurement out;
  std::vector<unsigned> clocks;
  int atCap = 0;
  // From here each batch that completes is counted, the one running now first.
  const uint64_t startMj = meter.millijoules();
  const Clock::time_point start = Clock::now();
  do {
    queueBatch();
    waitForPrevious();
    out.repeats += batch;
    clocks.push_back(meter.smClockMhz());
    atCap += meter.atPowerCap() ? 1 : 0;
  } while (secondsSince(start) < options.seconds);
  const uint64_t endMj = meter.millijoules();
  out.seconds = secondsSince(start);
  done[(k - 1) % 2].synchronize();
  out.joules = static_cast<double>(endMj - startMj) / 1e3;
  std::nth_element(clocks.begin(), clocks.begin() + clocks.size() / 2, clocks.end());
  out.smClockMhz = clocks[clocks.size() / 2];
  out.atPowerCapShare = static_cast<double>(atCap) / clocks.size();
  return out;
}

std::vector<GroupEnergy> measureGroupEnergy(ModuleExecutor& executor, const Stream& stream, const PowerMeter& meter,
                                            const std::vector<LaunchGroup>& groups, const EnergyOptions& options) {
  std::vector<GroupEnergy> out;
  for (const LaunchGroup& group : groups) {
    if (group.launches.empty()) continue;
    const CapturedGraph graph(stream, [&](CUstream s) {
      for (size_t i : group.launches) executor.runLaunch(i, s);
    });
    out.push_back({group.name, group.launches.size(),
                   measureRepeatedEnergy(meter, stream.get(), [&] { graph.launch(stream); }, options)});
  }
  return out;
}

double idleWatts(const PowerMeter& meter, double seconds) {
  const uint64_t startMj = meter.millijoules();
  const Clock::time_point start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return (meter.millijoules() - startMj) / 1e3 / secondsSince(start);
}

std::string describeGroupEnergy(const std::vector<GroupEnergy>& groups, const EnergyOptions& options,
                                double idleWatts, double powerLimitWatts) {
  std::string out = fmt::format(
      "energy: each group's launches replayed as one CUDA graph, back to back, for {:.0f} s after {:.0f} s of warm-up; "
      "the board's energy counter (NVML) read around them; power limit {:.0f} W, {:.0f} W idle\n",
      options.seconds, options.warmSeconds, powerLimitWatts, idleWatts);
  out += fmt::format("{:<28} {:>8} {:>8} {:>12} {:>7} {:>7} {:>7} {:>11} {:>8}\n", "group", "launches", "replays",
                     "ms a replay", "W", "SM MHz", "at cap", "J a replay", "share");
  const double whole = groups.empty() ? 0 : groups.front().energy.joulesEach();
  for (const GroupEnergy& g : groups) {
    const EnergyMeasurement& e = g.energy;
    out += fmt::format("{:<28} {:>8} {:>8} {:>12.3f} {:>7.0f} {:>7} {:>6.0f}% {:>11.3f} {:>7.1f}%\n", g.name,
                       g.launches, e.repeats, e.msEach(), e.watts(), e.smClockMhz, 100 * e.atPowerCapShare,
                       e.joulesEach(), whole > 0 ? 100 * e.joulesEach() / whole : 0);
  }
  return out;
}

}  // namespace llmc::cuda
