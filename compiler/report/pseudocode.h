// The readable loop form of partitioned kernels (`--emit pseudocode`,
// docs/performance.md "Reading the output"):
// loops labelled with the level they run on, buffers with their level and
// size, explicit transfers, the accumulator's head, body and tail, and the
// memory and transfer figures per level beside them.
#pragma once

#include <string>
#include <vector>

#include "planning/partition.h"

namespace llmc {

std::string printPseudocode(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target);

}  // namespace llmc
