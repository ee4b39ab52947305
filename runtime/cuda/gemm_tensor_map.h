// Host side of the sm_90a GEMM tile (runtime/cuda/device/llmc/gemm_sm90.cuh): the TMA tensor map
// of one bf16 operand. Header-only; the encoder is passed in so that callers that load the driver
// with dlopen/cuGetProcAddress and callers that link libcuda both use it.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace llmc {

// One bf16 GEMM operand as rows of `contiguous` elements (k for a K-major operand, m or n for an
// MN-major one), `rows` of them `ld` elements apart, in batch_outer x batch_inner copies placed at
// outer * batch_outer_stride + inner * batch_inner_stride elements from `base`.
struct GemmOperandMemory {
  const void* base;
  uint64_t contiguous, rows, ld;
  uint64_t batch_inner = 1, batch_outer = 1;
  uint64_t batch_inner_stride = 0, batch_outer_stride = 0;  // elements
};

using TensorMapEncodeTiled = decltype(&cuTensorMapEncodeTiled);

// Encodes the rank-4 map the sm90 tile expects: dims (contiguous, rows, batch inner, batch outer),
// 128-byte swizzle, box {64, box_rows, 1, 1} (box_rows = GemmConfig::kABoxRows / kBBoxRows),
// out-of-bounds elements read as zero. Requires base 16-byte aligned, ld and batch strides
// multiples of 8 elements.
inline CUresult encode_gemm_operand_map(TensorMapEncodeTiled encode, CUtensorMap* map,
                                        const GemmOperandMemory& op, uint32_t box_rows) {
  constexpr uint64_t kElem = 2;
  // Strides of size-1 batch dimensions are never used, but must still be valid (16-byte multiples).
  const uint64_t row_bytes = op.ld * kElem;
  const uint64_t inner_bytes = op.batch_inner > 1 ? op.batch_inner_stride * kElem : row_bytes;
  const uint64_t outer_bytes = op.batch_outer > 1 ? op.batch_outer_stride * kElem : row_bytes;
  const cuuint64_t dims[4] = {op.contiguous, op.rows, op.batch_inner, op.batch_outer};
  const cuuint64_t strides[3] = {row_bytes, inner_bytes, outer_bytes};
  const cuuint32_t box[4] = {64, box_rows, 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(op.base), dims, strides, box,
                element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

}  // namespace llmc
