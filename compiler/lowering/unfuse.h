// The unfuse stage: fusion as a priced decision. A stream that chains
// contractions (a per-position product feeding a longer contraction, as a
// chain of matmuls fuses) but cannot run on the tensor cores is tried again
// as separate kernels, its contractions then tensor-core GEMMs of their own;
// a contraction's operand a CUDA-core kernel remakes itself (a prologue) is
// tried stored instead; then the tensor-core streams bound by their blocks'
// steps (small grids), all together; and, unless asked otherwise
// (CostOptions::rowProducts, rowProductsWhereCheaper), the kernels fused
// with row products (planning/row_products.h) where fusion makes any. The
// cheaper graph of kernels is kept. It runs after
// the lowering stage (lowering.h), which tells which kernels stay off the
// tensor cores, and fuses, partitions and lowers each trial again.
#pragma once

#include <vector>

#include "codegen/module.h"
#include "ir/ir.h"
#include "planning/cost_model.h"
#include "planning/partition.h"
#include "planning/target.h"

namespace llmc {

// `kernels`: fusion's kernels with no FusionOptions, lowered (chooseEngines).
std::vector<PlannedKernel> unfuseOffTensorCores(const Graph& graph, std::vector<PlannedKernel> kernels,
                                                const Target& target, const CostOptions& cost,
                                                const EmitOptions& emit);
// The same, every trial partitioned through `memo` (its graph and target).
std::vector<PlannedKernel> unfuseOffTensorCores(std::vector<PlannedKernel> kernels, const CostOptions& cost,
                                                const EmitOptions& emit, PartitionMemo& memo);

}  // namespace llmc
