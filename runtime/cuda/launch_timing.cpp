#include "launch_timing.h"

#include <algorithm>

#include "cuda_event.h"

namespace llmc::cuda {

namespace {

// The median of `samples` (the upper one of an even count).
double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

LaunchTimes timeLaunches(ModuleExecutor& executor, const Stream& stream, const LaunchTimingOptions& options) {
  const int reps = std::max(1, options.reps);
  for (int warm = 0; warm < 2; ++warm) executor.run(stream.get());
  stream.synchronize();
  const size_t n = executor.module().launches.size();
  std::vector<Event> events(n + 1);  // before each launch, and after the last
  std::vector<std::vector<double>> samples(n);
  auto takeSamples = [&] {
    for (size_t i = 0; i < n; ++i) samples[i].push_back(1e3 * Event::elapsedMilliseconds(events[i], events[i + 1]));
  };
  LaunchTimes times;
  times.options = options;
  times.options.reps = reps;
  if (options.launchByLaunch) {
    for (int r = 0; r < reps; ++r) {
      for (size_t i = 0; i < n; ++i) {
        events[i].record(stream.get());
        executor.runLaunch(i, stream.get());
      }
      events[n].record(stream.get());
      takeSamples();
    }
  } else {
    const CapturedGraph timed(stream, [&](CUstream s) {
      for (size_t i = 0; i < n; ++i) {
        events[i].recordInGraph(s);
        executor.runLaunch(i, s);
      }
      events[n].recordInGraph(s);
    });
    const CapturedGraph plain(stream, [&](CUstream s) { executor.run(s); });
    Event start, end;
    std::vector<double> plainSamples;
    // The two graphs alternate, queued back to back: both see the GPU in the
    // same state (clocks, temperature), and `start` fires as the timed graph
    // ends, with the plain one already queued, so no host launch latency is
    // counted, as in training where the host runs ahead. The first two rounds
    // are warm-ups.
    for (int r = -2; r < reps; ++r) {
      timed.launch(stream);
      start.record(stream.get());
      plain.launch(stream);
      end.record(stream.get());
      if (r < 0) continue;
      plainSamples.push_back(1e3 * Event::elapsedMilliseconds(start, end));
      takeSamples();
    }
    times.graphUs = median(plainSamples);
  }
  // An event node costs a few microseconds (the replay's total grows by ~4 us
  // a launch with them: measured on the H200, 2026-11-30), as much as a small
  // kernel: a launch whose gap is under kShortLaunchUs is timed again as a
  // graph of kShortLaunchCopies copies of it alone, back to back as graph
  // nodes; its inputs are a few MB at most, in L2 in training too, just
  // written by their producer.
  times.repeated.assign(n, false);
  for (size_t i = 0; i < n; ++i) times.inGraphUs.push_back(median(samples[i]));
  if (!options.launchByLaunch)
    for (size_t i = 0; i < n; ++i) {
      if (times.inGraphUs[i] >= kShortLaunchUs) continue;
      const CapturedGraph copies(stream, [&](CUstream s) {
        for (int c = 0; c < kShortLaunchCopies; ++c) executor.runLaunch(i, s);
      });
      Event start, end;
      std::vector<double> perCopy;
      // Queued behind a replay already running, so that `start` fires with the next one queued.
      copies.launch(stream);
      for (int r = 0; r < reps; ++r) {
        start.record(stream.get());
        copies.launch(stream);
        end.record(stream.get());
        copies.launch(stream);
        end.synchronize();
        perCopy.push_back(1e3 * Event::elapsedMilliseconds(start, end) / kShortLaunchCopies);
      }
      samples[i] = perCopy;
      times.repeated[i] = true;
    }
  stream.synchronize();
  for (size_t i = 0; i < n; ++i) times.us.push_back(median(samples[i]));
  return times;
}

}  // namespace llmc::cuda
