// What the threads of a CUDA-core launch keep in flight, and the memory
// latency term of the performance model (cost_model.h) that follows from it:
// lane streams (a warp a row), streams dealt to slices of a block's threads,
// tiles whose threads take one or 8 points. Mirrors how codegen/cuda_writer*
// writes those launches.
#pragma once

#include <cstdint>

#include "planning/cost_model.h"

namespace llmc {

// How the CUDA-core code walks a lane stream (codegen/cuda_writer_stream.cpp,
// laneAxis, lanesPerPoint, streamLanes): a stream whose slots are scalars per
// point (a softmax's max and sum over a row) gives each point a warp, its
// lanes along the stream, 8 positions a lane in flight (one 16-byte load of
// bf16, or 8 loads the lanes' count apart), fewer where the row is shorter;
// fewer lanes for a short row of bf16, several warps where the grid's
// blocks leave the device's threads idle. `lanes` 0: not a lane stream.
struct LaneStream {
  int lanes = 0;
  int64_t threads = 0;       // a block's
  double bytesInFlight = 0;  // a thread's
};

LaneStream laneStream(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, const Target& t,
                      const CostOptions& o, int64_t blocks);

// What evaluate() has counted that the latency term reads.
struct LoadsCounted {
  double loaded = 0;     // bytes read from GMEM
  double loads = 0;      // a block's 16-byte (or one-value) loads of its largest input share
  double loadBytes = 0;  // bytes a load
  const KernelCost& cost;  // its work and blocks
  int threads = 256;       // a block's
};

// Seconds the launch's loads take when bound by the memory's latency
// (Little's law); 0 where it has tensor-core work or reads nothing.
double latencySeconds(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, const Target& t,
                      const CostOptions& o, const LaneStream& lanes, const LoadsCounted& in);

}  // namespace llmc
