// How often the CUDA-core code of a kernel computes each of its values, per
// point of the value. The CUDA writer (codegen/cuda_writer.cpp) computes a
// value where the loops binding its axes are open, and caches it there: a
// reduction's operand that has a reduced axis is computed inside the
// reduction's loops, again for each position of the reduction's own axes it
// lacks (a reduction over the kernel's stream axis is the exception: its
// slots take each position's operands once). A chain of contractions held in one kernel (out = a·b·c·d) is
// written as nested loops that redo each inner contraction for every point
// of the outer ones: thousands of times the products the IR counts. The
// cost model multiplies a node's work by this factor when it prices the
// CUDA cores (CostOptions::tensorCores false), so that such a kernel is
// priced as written, and the lowering's unfusion takes its parts apart.
#pragma once

#include <map>

#include "ir/ir.h"
#include "planning/fusion.h"

namespace llmc {

// Per node of `kernel`: how many times the CUDA-core code computes each of
// its points (1: once).
std::map<NodeId, double> recomputationFactors(const Graph& graph, const Kernel& kernel);

}  // namespace llmc
