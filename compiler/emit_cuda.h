// CUDA emission: the planned kernels of a graph (pseudocode.h, planKernels)
// as CUDA C++ source, one `extern "C" __global__` function per launch, and a
// host-side description of every launch a runtime needs to run them in order.
//
// The structure follows each kernel's partition: one thread block per tile of
// the group axes (the GRID), the block's threads over the tile's points, the
// stream axis looped in chunks with the accumulator slots of the stream
// analysis in registers (head, body with the online-softmax rescaling, tail),
// other reduced axes looped whole. Arithmetic is fp32; floats are stored as
// f32 or bf16 (EmitOptions::storage). Views (split, merge, rename, index,
// slice, concat, transpose, broadcast) are index arithmetic on the stored
// arrays. docs/codegen.md describes the generated code.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "instruction_selection.h"
#include "ir.h"
#include "pseudocode.h"
#include "target.h"

namespace llmc {

enum class StorageType { F32, BF16 };

struct EmitOptions {
  StorageType storage = StorageType::BF16;  // how float arrays are stored in GMEM
};

// How one array is held in device memory: a buffer per stored graph value.
struct BufferDesc {
  NodeId node = -1;         // the graph value it holds
  std::string name;         // its printed name (unique), for messages and JSON
  std::string dtype;        // element type in device memory: f32, bf16, f64, i32, u16, or bool (one byte)
  std::string ctype;        // the same as the kernels' C type: float, llmc_bf16, double, int, unsigned short, unsigned char
  std::vector<Axis> axes;   // row-major, last axis innermost (the value's type)
  int64_t elements = 0;
  int64_t bytes = 0;
  bool graphInput = false;  // the runtime fills it before the first launch
  std::vector<std::string> graphOutputs;  // graph outputs it holds (an output may be an input)
};

// One parameter of a launch: a pointer to a buffer.
struct LaunchParam {
  int buffer = -1;     // index into CudaModule::buffers
  bool written = false;  // the launch writes it (its outputs); otherwise reads it
};

struct KernelLaunch {
  std::string name;          // the __global__ function
  int kernel = -1;           // the planned kernel it comes from (PlannedKernel::kernel.id); -1: made by the emitter
  std::string role;          // "tile" (a planned kernel), "scatter" (atomic adds), "clear" (zero a buffer), "copy" (a view as output)
  int64_t grid = 1;          // blocks, one dimension
  int block = 256;           // threads per block, one dimension
  int64_t dynamicSmemBytes = 0;
  std::vector<LaunchParam> params;  // in the function's parameter order
  InstructionChoice instructions;   // what the instruction selection made of it
};

struct CudaModule {
  std::string arch;
  std::string source;                // every kernel, after a self-contained prelude (no #include)
  std::vector<BufferDesc> buffers;   // graph inputs first (signature order), then in order of first write
  std::vector<KernelLaunch> launches;  // to run in this order
};

CudaModule emitCuda(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                    const EmitOptions& options);

// The launch description as JSON (docs/codegen.md, "Launch description").
nlohmann::json launchesToJson(const CudaModule& module);

}  // namespace llmc
