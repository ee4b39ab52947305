// The cross-GPU level of the performance model (docs/performance.md, "Across
// GPUs"): data-parallel
// training over several GPUs of one node, each running the same step on its
// own micro-batch, the gradients combined over the interconnect by NCCL.
//
//   ZeRO-0: a ring all-reduce of the gradients; each GPU sends and receives
//           2(N-1)/N of their bytes.
//   ZeRO-1: the optimizer state sharded: a reduce-scatter of the gradients,
//           each GPU updates its shard, then an all-gather of the updated
//           parameters; (N-1)/N of the gradients' bytes plus (N-1)/N of the
//           parameters' bytes.
//
// Time is the bytes over the interconnect's attainable rate (bandwidth term
// only; NCCL's per-step latency is left out). With ZeRO-0 the runtime
// averages each gradient as soon as the kernel writing it has run, per layer
// where autodiff stacks per-layer gradients with a concat
// (runtime/train/overlapped_reduction.h): the transfers queue on the link in
// that order, and what ends after the step's last kernel is exposed. ZeRO-1
// is exposed whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "planning/partition.h"
#include "planning/target.h"

namespace llmc {

struct DataParallelCost {
  int gpus = 1;
  int zero = 0;                  // ZeRO stage: 0 or 1
  std::string collectives;       // "ring all-reduce" or "reduce-scatter + all-gather"
  int64_t gradientBytes = 0;     // the step's gradients as communicated
  int64_t parameterBytes = 0;    // the parameters as all-gathered (ZeRO-1)
  double bytesPerGpu = 0;        // each GPU sends this much (and receives as much)
  double seconds = 0;            // at the attainable rate
  double backwardSeconds = 0;    // the predicted backward pass
  double exposedSeconds = 0;     // what adds to the step's time
};

// `step`: a training step (--grad: outputs grad_NAME for each parameter).
// Gradients travel as `gradientBytesPerElement` (4: f32), parameters as
// `parameterBytesPerElement` (2: the bf16 copy the step reads).
DataParallelCost dataParallelCost(const Graph& step, const std::vector<PlannedKernel>& kernels, const Target& target,
                                  int gpus, int zero, int gradientBytesPerElement = 4, int parameterBytesPerElement = 2);

std::string describeDataParallel(const DataParallelCost& cost, const Target& target);

}  // namespace llmc
