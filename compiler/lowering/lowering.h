// The lowering stage: which engine each planned kernel runs on, decided by
// the emitter's planners (a tensor-core GEMM or stream for sm_90a or sm_80,
// with staging copies where an operand's rows are not aligned; else the CUDA
// cores, with the reason each tensor-core engine refused), and the kernel
// priced on that engine, helper launches included. The partition search
// (planKernels) assumes tensor cores wherever the target has them; here a
// kernel that stays on the CUDA cores is partitioned and priced again at the
// FMA units' rate, so that `--emit perf` prices exactly the launches `--emit
// cuda` writes.
//
// Fusion is a priced decision too: a stream that chains contractions (a
// per-position product feeding a longer contraction, as a chain of matmuls
// fuses) but cannot run on the tensor cores is tried again as separate
// kernels, and the cheaper graph of kernels is kept.
#pragma once

#include <vector>

#include "planning/cost_model.h"
#include "codegen/emit_cuda.h"
#include "ir/ir.h"
#include "report/pseudocode.h"
#include "planning/target.h"

namespace llmc {

// The kernels of `graph`, fused, partitioned, lowered as `emit` will write
// them and priced accordingly (KernelCost::engine, helperLaunches).
std::vector<PlannedKernel> lowerKernels(const Graph& graph, const Target& target, const CostOptions& cost,
                                        const EmitOptions& emit);

// The storage the cost options describe (2 bytes: bf16, else f32).
EmitOptions emitOptionsFor(const CostOptions& cost);

}  // namespace llmc
