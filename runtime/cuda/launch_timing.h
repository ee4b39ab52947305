// Every launch of a module timed on the GPU, as step_kernels_bench and
// llmc-run --bench time them.
//
// The whole module runs twice launch by launch first (warm-up; kernels opt in
// to their shared memory then, as in llmc-train's first step). Then it is
// timed with an event before each launch and one after the last; a launch's
// time is the median over `reps` repetitions of the gap from its event to the
// next.
//
// By default the launches are timed as llmc-train runs them: captured in order
// into one CUDA graph, each event an event-record node between two kernel
// nodes (recorded with CU_EVENT_RECORD_EXTERNAL; a plain record under capture
// makes no node). The graph is replayed twice, then `reps` times. A kernel in
// a graph costs about 1 us of launch overhead, the cost model's price, where
// launched alone it costs about 4 (`launchByLaunch` times it so: an event
// recorded on the stream before each launch). The event nodes themselves add
// a little, so the same launches captured without them are timed too (median
// of `reps` replays): the step's time as training sees it. An event node
// costs a few microseconds, as much as a small kernel, so a launch under
// kShortLaunchUs there is timed again alone, as a graph of
// kShortLaunchCopies copies of it.
#pragma once

#include <vector>

#include "cuda_stream.h"
#include "module_executor.h"

namespace llmc::cuda {

// A launch whose gap in the graph is under this is timed again as a graph of
// kShortLaunchCopies copies of it alone. The gap holds an event node's few
// microseconds besides the launch (the replay's total grows by about 4 us a
// launch with them, H200, 2026-11-30): at 10 us a convolution's 6.7 us window
// stack read 10.2 in its backward's graph; under 30 us the node's share is
// more than a tenth.
constexpr double kShortLaunchUs = 30;
constexpr int kShortLaunchCopies = 100;

struct LaunchTimingOptions {
  bool launchByLaunch = false;  // an event recorded on the stream before each launch, no graph
  int reps = 10;
};

struct LaunchTimes {
  std::vector<double> us;      // per launch of the module: the median, in microseconds
  std::vector<bool> repeated;  // per launch: timed again as a graph of copies of it
  std::vector<double> inGraphUs;  // per launch: its gap in the graph with event nodes (launchByLaunch: its gap)
  double graphUs = 0;          // the graph without event nodes, as llmc-train replays it (not launchByLaunch)
  LaunchTimingOptions options;
};

// Times every launch of the executor's module (loaded, its arena set, its
// inputs in place) on `stream`; returns once the stream is idle.
LaunchTimes timeLaunches(ModuleExecutor& executor, const Stream& stream, const LaunchTimingOptions& options);

}  // namespace llmc::cuda
