#include "nccl_communicator.h"

#include <fmt/format.h>

#include <stdexcept>

namespace llmc::cuda {

size_t ncclElementBytes(NcclDataType type) {
  switch (type) {
    case kNcclFloat32: return 4;
    case kNcclBfloat16: return 2;
  }
  throw std::invalid_argument(fmt::format("NCCL data type {} has no size here", static_cast<int>(type)));
}

NcclUniqueId NcclCommunicator::newUniqueId() {
  NcclUniqueId id{};
  checkNccl(nccl().getUniqueId(&id), "ncclGetUniqueId");
  return id;
}

NcclCommunicator::NcclCommunicator(const NcclUniqueId& id, int rank, int size) : rank_(rank), size_(size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument(fmt::format("NCCL rank {} of {}: no such rank", rank, size));
  checkNccl(nccl().commInitRank(&comm_, size, id, rank), fmt::format("ncclCommInitRank(rank {} of {})", rank, size).c_str());
}

NcclCommunicator::~NcclCommunicator() {
  // ncclCommDestroy waits for the communicator's pending work; its error, if
  // any, cannot be reported from a destructor.
  if (comm_) nccl().commDestroy(comm_);
}

void NcclCommunicator::allReduce(CUdeviceptr data, size_t count, NcclDataType type, NcclReduction op,
                                 CUstream stream) const {
  void* p = reinterpret_cast<void*>(data);
  checkNccl(nccl().allReduce(p, p, count, type, op, comm_, stream), "ncclAllReduce");
}

void NcclCommunicator::reduceScatter(CUdeviceptr data, CUdeviceptr shard, size_t shardCount, NcclDataType type,
                                     NcclReduction op, CUstream stream) const {
  checkNccl(nccl().reduceScatter(reinterpret_cast<void*>(data), reinterpret_cast<void*>(shard), shardCount, type, op,
                                 comm_, stream),
            "ncclReduceScatter");
}

void NcclCommunicator::allGather(CUdeviceptr shard, CUdeviceptr gathered, size_t shardCount, NcclDataType type,
                                 CUstream stream) const {
  checkNccl(nccl().allGather(reinterpret_cast<void*>(shard), reinterpret_cast<void*>(gathered), shardCount, type,
                             comm_, stream),
            "ncclAllGather");
}

CUdeviceptr NcclCommunicator::shardOf(CUdeviceptr data, size_t shardCount, NcclDataType type) const {
  return data + static_cast<CUdeviceptr>(static_cast<size_t>(rank_) * shardCount * ncclElementBytes(type));
}

}  // namespace llmc::cuda
