// Host values to and from the bytes of a module's buffer, in the dtype the
// buffer stores (f32, bf16 as the upper half of an f32, f64, i32, u16, bool),
// for the programs that fill inputs and read outputs of a generated module
// (the GPU tests, llmc-fuzz).
#pragma once

#include <vector>

#include "codegen/module.h"

namespace llmc::cuda {

// The bytes of `values` (row-major, the buffer's elements) as buffer `b`
// stores them; bf16 values are rounded to nearest, ties to even.
std::vector<unsigned char> bufferBytes(const BufferDesc& b, const std::vector<double>& values);

// The values of the bytes of buffer `b` (b.elements of them).
std::vector<double> bufferValues(const BufferDesc& b, const std::vector<unsigned char>& bytes);

}  // namespace llmc::cuda
