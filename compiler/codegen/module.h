// A CUDA module as the code generator hands it to a runtime: the CUDA C++
// source of every launch, the buffers (one per stored array) and every
// launch's description (grid, block, parameters, tensor maps), in the order
// they run. emit_cuda.h writes it; docs/codegen.md describes it.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/ir.h"
#include "lowering/instruction_selection.h"
#include "lowering/tensor_core_gemm.h"
#include "lowering/tensor_core_stream.h"

namespace llmc {

enum class StorageType { F32, BF16 };

struct EmitOptions {
  StorageType storage = StorageType::BF16;  // how float arrays are stored in GMEM
  // Under bf16 storage, graph inputs and outputs named here are stored as f32
  // (mixed precision: a training step writes its gradients in f32 for the
  // optimizer's f32 master weights). Scalars are always f32: a loss in bf16
  // would keep two decimal digits, and a scalar costs nothing to keep whole.
  std::set<std::string> f32Values = {};
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
  // A part of another buffer's array (codegen/concat_parts.h): its elements
  // lie in buffer `within` (of this one's element type) from element
  // `withinOffset` on, where the launches that write this one write them; it
  // has no memory of its own. -1: a buffer of its own. `withinStrides`: per
  // axis, the distance in `within`'s elements between neighbours along it
  // (a part interleaved with others); empty: the part lies row-major, one
  // block of `elements`.
  int within = -1;
  int64_t withinOffset = 0;
  std::vector<int64_t> withinStrides;
};

// One parameter of a launch: a pointer into a buffer.
struct LaunchParam {
  int buffer = -1;     // index into CudaModule::buffers
  bool written = false;  // the launch writes it (its outputs); otherwise reads it
  // The pointer passed is the buffer's address plus this many elements: the
  // launch reads one position of the buffer's first axis, always the same (a
  // layer's slice of a stacked parameter), and its code indexes from there
  // (codegen/constant_bases.h), so that the layers' launches are one source.
  int64_t offsetElements = 0;
};

// A TMA tensor map a launch takes by value (a 128-byte CUtensorMap, as a
// __grid_constant__ parameter), described so that a runtime can build it with
// cuTensorMapEncodeTiled: data type bf16, rank 4, no interleave, element
// strides 1, L2 promotion 256B, out-of-bounds elements read as zero.
struct TensorMapParam {
  std::string operand;  // "A" or "B" of the GEMM
  int buffer = -1;      // index into CudaModule::buffers
  int64_t offsetBytes = 0;              // globalAddress = the buffer's address + offsetBytes
  std::array<uint64_t, 4> dims{};       // globalDim, innermost first (contiguous, rows, batch inner, batch outer)
  std::array<uint64_t, 3> stridesBytes{};  // globalStrides of dims 1..3
  std::array<uint32_t, 4> box{};        // boxDim
  std::string swizzle = "128B";
};

struct KernelLaunch {
  std::string name;          // the __global__ function
  int kernel = -1;           // the planned kernel it comes from (PlannedKernel::kernel.id); -1: made by the emitter
  std::string role;          // "tile" (a planned kernel), "scatter" (atomic adds), "clear" (zero a buffer), "copy" (a view as output)
  std::array<int64_t, 3> grid = {1, 1, 1};  // blocks
  int block = 256;           // threads per block, one dimension
  int64_t dynamicSmemBytes = 0;
  std::vector<TensorMapParam> tensorMaps;  // the function's first parameters, in this order
  std::vector<LaunchParam> params;  // then these pointers, in the function's parameter order
  // (output buffer, input buffer) pairs the launch can run in place: the same
  // type, each output element made only from the input's element at its own
  // position (elementwise work), so a thread reads it before it writes there
  // and no other thread touches it; no other output of the launch made from
  // the input (its own loop would read the input after this one's stores). Where the input's last use is this
  // launch, the memory plan lets the output take its bytes.
  std::vector<std::pair<int, int>> inPlace;
  InstructionChoice instructions;   // what the instruction selection made of it
  // A helper launch made for a planned kernel's (a staging copy): its
  // predicted time, which the lowering stage adds to the kernel's. 0: none.
  double predictedSeconds = 0;
  std::optional<TensorCoreGemm> gemm;  // set where it runs on the tensor-core tile library
  std::optional<TensorCoreStream> stream;  // set where it runs as a tensor-core stream
  // The launch's function alone, with the prelude and what it includes: a
  // translation unit of its own, so that a JIT compiles launches in parallel
  // and caches each one.
  std::string source;
};

struct CudaModule {
  std::string arch;
  std::string source;                // every kernel, after a prelude; includes llmc's device headers (runtime/cuda/device) where a launch uses the tile library
  std::vector<BufferDesc> buffers;   // graph inputs first (signature order), then in order of first write
  std::vector<KernelLaunch> launches;  // to run in this order
};

// The launch description as JSON (docs/codegen.md, "Launch description").
nlohmann::json launchesToJson(const CudaModule& module);

}  // namespace llmc
