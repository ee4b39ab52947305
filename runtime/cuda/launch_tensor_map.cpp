#include "launch_tensor_map.h"

#include <fmt/format.h>

namespace llmc::cuda {

CUtensorMap encodeTensorMap(const TensorMapParam& map, CUdeviceptr buffer) {
  if (map.swizzle != "128B") throw std::invalid_argument(fmt::format("tensor map swizzle '{}' is not 128B", map.swizzle));
  CUtensorMap encoded;
  const cuuint32_t elementStrides[4] = {1, 1, 1, 1};
  void* address = reinterpret_cast<void*>(buffer + static_cast<CUdeviceptr>(map.offsetBytes));
  check(driver().tensorMapEncodeTiled(&encoded, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, address, map.dims.data(),
                                      map.stridesBytes.data(), map.box.data(), elementStrides,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        fmt::format("cuTensorMapEncodeTiled(operand {})", map.operand));
  return encoded;
}

}  // namespace llmc::cuda
