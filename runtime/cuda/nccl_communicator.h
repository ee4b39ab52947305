// A communicator of NCCL ranks (runtime/cuda/nccl_library.h loads NCCL): one
// process per GPU, each holding one, all made from the same unique id. Its
// collectives are enqueued on a stream of the current context and run in
// order with the kernels there.
#pragma once

#include <cuda.h>

#include <cstddef>

#include "nccl_library.h"

namespace llmc::cuda {

class NcclCommunicator {
 public:
  // A new id for the ranks of one communicator; rank 0 makes it and hands it
  // to the others (runtime/train/process_group.h).
  static NcclUniqueId newUniqueId();

  // Joins rank `rank` of `size` on the GPU of the current context; returns
  // when every rank has joined (NCCL's initialisation is collective).
  NcclCommunicator(const NcclUniqueId& id, int rank, int size);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // `count` elements of `data`, replaced by their sum or mean over the ranks.
  void allReduce(CUdeviceptr data, size_t count, NcclDataType type, NcclReduction op, CUstream stream) const;
  // `data` holds size() shards of `shardCount` elements; `shard` receives the
  // sum or mean over the ranks of this rank's one. In place where `shard` is
  // data + rank() * shardCount elements.
  void reduceScatter(CUdeviceptr data, CUdeviceptr shard, size_t shardCount, NcclDataType type, NcclReduction op,
                     CUstream stream) const;
  // Every rank's `shard` of `shardCount` elements, in rank order, into
  // `gathered`. In place where `shard` is gathered + rank() * shardCount.
  void allGather(CUdeviceptr shard, CUdeviceptr gathered, size_t shardCount, NcclDataType type, CUstream stream) const;
  // Where this rank's shard of `shardCount` elements of `type` starts in `data`.
  CUdeviceptr shardOf(CUdeviceptr data, size_t shardCount, NcclDataType type) const;

 private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

// Bytes of one element of `type`.
size_t ncclElementBytes(NcclDataType type);

}  // namespace llmc::cuda
