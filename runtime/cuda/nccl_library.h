// NCCL, the collective library data-parallel training uses, opened at run
// time where it lives: $LLMC_NCCL_LIBRARY, the system's library path
// (libnccl.so.2, as the CUDA toolkit or a distribution installs it), or a
// Python environment's `nvidia-nccl` wheel (site-packages/nvidia/nccl/lib, as
// on the GPU machine), found by looking at the environments' folders, never
// by running Python (site_packages.h). Nothing links it, so llmc builds and runs without it;
// asking for it then gives NcclUnavailable naming every place looked at.
//
// The few types llmc uses are declared here with NCCL's layout (nccl.h is not
// needed to build): an opaque communicator, the 128-byte unique id, the
// result, data-type and reduction-op enumerations.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmc::cuda {

class NcclUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NcclComm;
using ncclComm_t = NcclComm*;
struct NcclUniqueId {
  char internal[128];
};
enum NcclResult : int { kNcclSuccess = 0 };
enum NcclDataType : int { kNcclFloat32 = 7, kNcclBfloat16 = 9 };
enum NcclReduction : int { kNcclSum = 0, kNcclAverage = 4 };

struct NcclApi {
  std::string path;  // the library file opened
  NcclResult (*getVersion)(int*) = nullptr;
  const char* (*getErrorString)(NcclResult) = nullptr;
  NcclResult (*getUniqueId)(NcclUniqueId*) = nullptr;
  NcclResult (*commInitRank)(ncclComm_t*, int, NcclUniqueId, int) = nullptr;
  NcclResult (*commDestroy)(ncclComm_t) = nullptr;
  NcclResult (*allReduce)(const void*, void*, size_t, NcclDataType, NcclReduction, ncclComm_t, CUstream) = nullptr;
  NcclResult (*reduceScatter)(const void*, void*, size_t, NcclDataType, NcclReduction, ncclComm_t, CUstream) = nullptr;
  NcclResult (*allGather)(const void*, void*, size_t, NcclDataType, ncclComm_t, CUstream) = nullptr;
  NcclResult (*groupStart)() = nullptr;
  NcclResult (*groupEnd)() = nullptr;

  // "2.27.3" from ncclGetVersion's 22703.
  std::string version() const;
};

// Where NCCL is looked for, in order (for messages and tests).
std::vector<std::string> ncclCandidates();

// NCCL, loaded on first use; NVLink multicast (NVLS) is switched off in the
// environment first (NCCL_NVLS_ENABLE=0, unless set). Throws NcclUnavailable
// listing the candidates and why each failed; a later call tries again.
const NcclApi& nccl();

// Throws std::runtime_error naming `call` and NCCL's description unless
// `result` is success.
void checkNccl(NcclResult result, const char* call);

}  // namespace llmc::cuda
