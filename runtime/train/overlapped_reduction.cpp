#include "overlapped_reduction.h"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

namespace llmc {

namespace {

cuda::NcclDataType ncclType(const BufferDesc& b) {
  if (b.dtype == "f32") return cuda::kNcclFloat32;
  if (b.dtype == "bf16") return cuda::kNcclBfloat16;
  throw std::invalid_argument(fmt::format("gradient {} is stored as {}: NCCL averages f32 or bf16 here", b.name, b.dtype));
}

}  // namespace

OverlappedReduction::OverlappedReduction(const cuda::ModuleExecutor& step, const std::set<std::string>& gradientOutputs,
                                         const cuda::NcclCommunicator& communicator, int64_t bucketBytes)
    : communicator_(communicator),
      plan_(planReduction(step.module(), gradientOutputs, bucketBytes)),
      side_(std::make_unique<cuda::Stream>()) {
  for (const ReductionPlan::Bucket& bucket : plan_.buckets) {
    for (int b : bucket.buffers) types_[b] = ncclType(step.module().buffers[static_cast<size_t>(b)]);
    ready_.push_back(std::make_unique<cuda::Event>());
    done_.push_back(std::make_unique<cuda::Event>());
  }
}

void OverlappedReduction::run(cuda::ModuleExecutor& step, CUstream stream) {
  const std::vector<BufferDesc>& buffers = step.module().buffers;
  const size_t launches = step.module().launches.size();
  size_t next = 0;  // the next bucket to start
  for (size_t i = 0; i < launches; ++i) {
    for (int b : plan_.waits[i]) done_[static_cast<size_t>(b)]->makeWait(stream);
    step.runLaunch(i, stream);
    for (; next < plan_.buckets.size() && plan_.buckets[next].afterLaunch == i; ++next) {
      ready_[next]->record(stream);
      ready_[next]->makeWait(side_->get());
      cuda::checkNccl(cuda::nccl().groupStart(), "ncclGroupStart");
      for (int b : plan_.buckets[next].buffers)
        communicator_.allReduce(step.bufferAddress(static_cast<size_t>(b)),
                                static_cast<size_t>(buffers[static_cast<size_t>(b)].elements),
                                types_.at(b), cuda::kNcclAverage, side_->get());
      cuda::checkNccl(cuda::nccl().groupEnd(), "ncclGroupEnd");
      done_[next]->record(side_->get());
    }
  }
  // The step is done when its reductions are.
  for (const std::unique_ptr<cuda::Event>& done : done_) done->makeWait(stream);
}

}  // namespace llmc
