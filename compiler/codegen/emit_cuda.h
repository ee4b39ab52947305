// The write stage: the launches of a graph (launch_list.h) as CUDA C++
// source, one `extern "C" __global__` function per launch, and a host-side
// description of every launch a runtime needs to run them in order (the
// CudaModule of module.h). Each launch runs on the engine its planners allow:
// the tensor-core tile library (tensor_core_gemm.h), a tensor-core stream
// (tensor_core_stream.h), else the CUDA cores (cuda_kernel_writer.h).
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

#include <vector>

#include "codegen/launch_list.h"
#include "codegen/module.h"
#include "ir/ir.h"
#include "planning/partition.h"
#include "planning/target.h"

namespace llmc {

CudaModule writeModule(const Graph& graph, const LaunchList& launches, const Target& target,
                       const EmitOptions& options);

// The order and write stages in one: writeModule(planLaunches(...)).
CudaModule emitCuda(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                    const EmitOptions& options);

}  // namespace llmc
