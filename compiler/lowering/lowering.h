// The lowering stage: which engine each planned kernel runs on, decided by
// the emitter's planners (a tensor-core GEMM or stream for sm_90a or sm_80,
// with staging copies where an operand's rows are not aligned; else the CUDA
// cores, with the reason each tensor-core engine refused), and the kernel
// priced on that engine, helper launches included. The partition search
// (partition.h) assumes tensor cores wherever the target has them; here a
// kernel that stays on the CUDA cores is partitioned and priced again at the
// FMA units' rate, so that `--emit perf` prices exactly the launches `--emit
// cuda` writes.
//
// Fusion is a priced decision too: the stage after this one (unfuse.h) tries
// kernels that stay off the tensor cores again as separate kernels.
#pragma once

#include <vector>

#include "codegen/module.h"
#include "ir/ir.h"
#include "planning/cost_model.h"
#include "planning/partition.h"
#include "planning/target.h"

namespace llmc {

// Sets each kernel's engine (KernelCost::engine, helperLaunches) as `emit`
// writes it, and prices it on that engine.
void chooseEngines(const Graph& graph, std::vector<PlannedKernel>& kernels, const Target& target,
                   const CostOptions& cost, const EmitOptions& emit);
// The same, a kernel kept off the tensor cores partitioned again through
// `memo` (its graph and target).
void chooseEngines(std::vector<PlannedKernel>& kernels, const CostOptions& cost, const EmitOptions& emit,
                   PartitionMemo& memo);

// `cost` with the values the writer stores in f32 under bf16 storage because
// the emit options name them or scatter-adds accumulate into them
// (codegen/launch_list.cpp, storage), so that they are priced as written
// (CostOptions::f32Stored).
CostOptions pricedAsWritten(const Graph& graph, CostOptions cost, const EmitOptions& emit);

// The back end up to the launches: fusion, partition, lowering and unfusion
// (the stages of driver/backend.h that make kernels), for callers that write
// the module themselves.
std::vector<PlannedKernel> lowerKernels(const Graph& graph, const Target& target, const CostOptions& cost,
                                        const EmitOptions& emit);

// Records in each kernel's cost the tile launch `module` makes of it (the
// module the write stage made of these kernels): its grid and, on the
// tensor cores, its dynamic shared memory (KernelCost::launchedBlocks,
// launchedSmemBytes), for the reports to show the launches as written.
void recordLaunches(std::vector<PlannedKernel>& kernels, const CudaModule& module);

// Whether a kernel was priced with work on the tensor cores.
bool pricedOnTensorCores(const KernelCost& cost);

// Whether every output of the kernel is a plain sum over its stream axis:
// what blocks sharing the stream out can add atomically (a tensor-core
// stream's share, a GEMM's split-K along the stream).
bool outputsSumOverStream(const Graph& graph, const PlannedKernel& kernel);

// The storage the cost options describe (2 bytes: bf16, else f32).
EmitOptions emitOptionsFor(const CostOptions& cost);

}  // namespace llmc
