// Fusion: the graph cut into kernels. A kernel is a set of nodes run as one
// GPU launch; the values crossing kernel boundaries are stored in GMEM.
//
// Anchors are the nodes that reduce (contraction, sum, max, gather,
// scatter-add). Elementwise and axis boxes join the kernel that consumes them
// (a prologue, recomputed there) or the kernel that produces their operand (an
// epilogue). Reductions over the same axis merge with the kernel that produces
// what they reduce when the union streams over that axis (streamability.h):
// that is how a softmax and the contraction after it become one kernel.
#pragma once

#include <string>
#include <vector>

#include "ir.h"

namespace llmc {

struct Kernel {
  int id = 0;
  std::string name;               // from the nodes it holds
  std::vector<NodeId> nodes;      // in graph order
  std::vector<NodeId> inputs;     // values read from GMEM: graph inputs, other kernels' outputs
  std::vector<NodeId> outputs;    // values written to GMEM: read by other kernels, or graph outputs
  std::string streamAxis;         // the axis streamed with an accumulator; empty: none
  std::vector<std::string> innerAxes;  // other reduced axes, consumed whole within a chunk
};

std::vector<Kernel> formKernels(const Graph& graph);

}  // namespace llmc
