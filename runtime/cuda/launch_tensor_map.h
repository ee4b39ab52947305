// The TMA tensor maps of a launch description (compiler/codegen/module.h,
// TensorMapParam), encoded with the driver's cuTensorMapEncodeTiled for the
// buffer the runtime allocated.
#pragma once

#include "codegen/module.h"
#include "cuda_driver.h"

namespace llmc::cuda {

// `buffer`: the device address of the buffer the map names. Throws CudaError
// when the driver refuses the description (a misaligned address or stride).
CUtensorMap encodeTensorMap(const TensorMapParam& map, CUdeviceptr buffer);

}  // namespace llmc::cuda
