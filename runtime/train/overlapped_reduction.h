// Averaging a training step's gradients over the data-parallel processes
// while its backward pass still runs (ZeRO-0), as reduction_plan.h plans it:
// each bucket of arrays is one NCCL group, on a stream of its own; a launch
// that touches an array in flight waits for its bucket, and the step ends
// only when every bucket has. Under stream capture the buckets become part of
// the step's CUDA graph.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cuda_event.h"
#include "cuda_stream.h"
#include "module_executor.h"
#include "nccl_communicator.h"
#include "reduction_plan.h"

namespace llmc {

class OverlappedReduction {
 public:
  OverlappedReduction(const cuda::ModuleExecutor& step, const std::set<std::string>& gradientOutputs,
                      const cuda::NcclCommunicator& communicator, int64_t bucketBytes = 32 << 20);

  // The step's launches on `stream`, the reductions beside them.
  void run(cuda::ModuleExecutor& step, CUstream stream);

  const ReductionPlan& plan() const { return plan_; }

 private:
  const cuda::NcclCommunicator& communicator_;
  ReductionPlan plan_;
  std::map<int, cuda::NcclDataType> types_;  // per buffer averaged: f32 or bf16 (others refused at construction)
  std::unique_ptr<cuda::Stream> side_;
  std::vector<std::unique_ptr<cuda::Event>> ready_, done_;  // per bucket
};

}  // namespace llmc
