// Which gradient arrays a data-parallel training step averages when, and
// which of its launches wait for them (ZeRO-0, overlapped_reduction.h runs
// the plan), derived from the step's launches rather than from names:
//
//  - a gradient output made of parts (the per-layer gradients that autodiff
//    stacks back into an [l, ...] array with a concat), each written where it
//    lies in the output (BufferDesc::within) or copied there by one launch
//    from arrays that nothing else reads, is averaged part by part, each as
//    soon as its last writer has run, so layer l's gradients travel while the
//    layers before it are differentiated; a copy waits for them;
//  - any other gradient output is averaged whole after its last writer.
//
// The arrays go in buckets of at least `bucketBytes`, in the order they
// become final. Planning needs no GPU (nor the CUDA toolkit to build).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "codegen/emit_cuda.h"

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

}  // namespace llmc
