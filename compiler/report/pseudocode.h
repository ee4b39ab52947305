// The readable loop form of partitioned kernels (DESIGN.md §2 "Pseudocode"):
// loops labelled with the level they run on, buffers with their level and
// size, explicit transfers, the accumulator's head, body and tail, and the
// memory and transfer figures per level beside them.
#pragma once

#include <string>
#include <vector>

#include "planning/cost_model.h"
#include "planning/fusion.h"

namespace llmc {

struct PlannedKernel {
  Kernel kernel;
  KernelShape shape;
  Partition partition;
  KernelCost cost;
};

// Fuses the graph into kernels and partitions each for the target, as if
// every contraction ran on the tensor cores where the target has them; the
// lowering stage (lowering.h, lowerKernels) prices the engines chosen.
std::vector<PlannedKernel> planKernels(const Graph& graph, const Target& target, const CostOptions& options,
                                       const FusionOptions& fusion = {});

std::string printPseudocode(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target);

}  // namespace llmc
