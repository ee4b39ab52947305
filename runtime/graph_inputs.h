// Values for a graph's inputs, for programs that run a diagram on made-up or
// given data (llmc-run, step_kernels_bench): random ones, or arrays read
// from .npy files checked against the input's declared type.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ir/ir.h"
#include "npy_file.h"
#include "tensor.h"

namespace llmc {

// An array that does not fit the input it was given for; the message starts
// with the file's path and names the input and its declared type.
class InputFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The extent an integer input indexes where a gather or a scatter-add takes
// it as its index (a token id into the vocabulary); 0 where none does.
int64_t indexBound(const Graph& graph, NodeId input);

// Seeded random values for graph input `input`: floats normal N(0, 1),
// integers uniform over the extent they index (indexBound; 0 where they
// index nothing), bools 0 or 1. The same seed gives the same values.
HostTensor randomInput(const Graph& graph, NodeId input, uint64_t seed);

// Graph input `input` from an array read from `path`. The array's shape must
// be the input's axes' sizes in their declared order; a float input takes
// float32 or float64 elements, an integer or bool input int32 or int64 ones
// that its dtype holds (bool: 0 or 1) and, where it indexes an axis, within
// it. Throws InputFileError otherwise.
HostTensor inputFromNpy(const Graph& graph, NodeId input, const NpyArray& array, const std::string& path);

// The values as the GPU holds them: floats rounded to bf16 under bf16
// storage, f32 ones to f32 under f32 storage, bf16 ones to bf16 always; so
// that the interpreter and the GPU start from the same numbers.
void roundAsStored(HostTensor& values, bool bf16Storage);

}  // namespace llmc
