// Staging copies for tensor-core operands the tile library or a stream's
// tiles cannot read where they lie (tensor_core_gemm.h, GemmStagedSource;
// tensor_core_stream.h, StreamTileStaging): a launch of its own, before the
// GEMM's or the stream's, gathers the operand's rows into a scratch buffer whose
// rows are padded with zeros to a multiple of 64 elements on sm_90a (the
// TMA's 128-byte lines) or 8 on sm_80 (cp.async's 16 bytes), so that the
// GEMM reads aligned rows. An odd size (C = 771), or contracted
// axes in another order than the other operand's (a stack of windows), then
// costs one pass over the operand instead of the whole GEMM on the CUDA cores.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/module.h"
#include "lowering/tensor_core_gemm.h"
#include "planning/target.h"

namespace llmc {

struct StagingCopy {
  std::string name;      // the __global__ function
  int64_t elements = 0;  // the scratch buffer's, padding included
  int64_t grid = 1;
  int block = 256;
  std::string function;  // the kernel's source: (bf16* dst, const bf16* or float* src)
};

// The copy of `operand` (staged) into its scratch buffer, for a GEMM of
// `batchInner` x `batchOuter` batches; `sourceF32`: the array is stored in f32
// (a sum accumulated by atomics), rounded to bf16 as it is copied.
StagingCopy writeStagingCopy(const std::string& name, const GemmOperandPlacement& operand, int batchOuter,
                             int batchInner, const Target& target, bool sourceF32 = false);

// Its predicted time on `target`: the rows read and the padded rows written
// at the GMEM's attainable bandwidth, and a launch.
double stagingSeconds(const GemmOperandPlacement& operand, int64_t batches, const Target& target);

// The staging launches of a module. The same rows staged the same way (a
// gated MLP's x for both of its first GEMMs) are copied once: the values are
// immutable, and the later GEMMs read the first copy.
class StagingCopies {
 public:
  // The scratch buffer `operand` (staged, `batchOuter` x `batchInner`
  // copies) is read from by `reader` (a GEMM's or a stream's launch): on its
  // first use, the buffer and its copy launch (before the reader's, role
  // "stage", its predicted time set; its translation unit `prelude` and the
  // copy) are added to `module`, the copy's function to `source`.
  // `sourceBuffer`: the stored array's buffer; `role` names the copy.
  int stage(CudaModule& module, std::string& source, const KernelLaunch& reader, const GemmOperandPlacement& operand,
            int sourceBuffer, const std::string& role, int batchOuter, int batchInner, const Target& target,
            const std::string& prelude);

 private:
  // The buffer staged from, not the value: a value made twice (launch_list.cpp, mergeTwins) is one buffer.
  // The padded rows' length too: a GEMM's copy and a stream's of the same rows may pad them apart.
  using Key = std::tuple<int, int64_t, std::vector<StridedExtent>, std::vector<StridedExtent>, int64_t, int64_t,
                         int64_t, int64_t, int64_t>;
  std::map<Key, int> buffers_;
};

}  // namespace llmc
