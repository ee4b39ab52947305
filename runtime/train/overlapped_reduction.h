// Averaging a training step's gradients over the data-parallel processes
// while its backward pass still runs (ZeRO-0), derived from the step's
// launches rather than from names:
//
//  - a gradient output written by one copy launch from arrays that nothing
//    else reads (the per-layer gradients that autodiff stacks back into an
//    [l, ...] array with a concat) is averaged array by array, each as soon
//    as its last writer has run, so layer l's gradients travel while the
//    layers before it are differentiated; the copy waits for them;
//  - any other gradient output is averaged whole after its last writer.
//
// The arrays go in buckets of at least `bucketBytes` (one NCCL group each)
// on a stream of their own; a launch that touches an array in flight waits
// for its bucket, and the step ends only when every bucket has. Under stream
// capture the buckets become part of the step's CUDA graph.
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

namespace llmc {

// Which arrays are averaged when, and which launches wait for them.
struct ReductionPlan {
  struct Bucket {
    size_t afterLaunch = 0;    // starts once this launch has run
    std::vector<int> buffers;  // indices into CudaModule::buffers
    int64_t bytes = 0;
  };
  std::vector<Bucket> buckets;  // in the order they start
  // Per launch: the buckets it waits for first (those holding an array it
  // reads or writes, started before it).
  std::vector<std::vector<int>> waits;
  int64_t bytes = 0;
  int64_t overlappedBytes = 0;  // in buckets that start before the last launch
};

ReductionPlan planReduction(const CudaModule& step, const std::set<std::string>& gradientOutputs, int64_t bucketBytes);

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
