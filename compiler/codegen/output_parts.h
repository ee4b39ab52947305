// Graph outputs made of parts that lie where the output has them: a
// concatenation along the output's first (outermost) axis of stored arrays,
// each read by nothing else, is no array of its own and needs no copy. Each
// part is written by its own launch straight into its block of the output's
// buffer (BufferDesc::within): a training step's gradient of a parameter
// stacked over the layers, each layer's written by that layer's backward.
// Concatenation along an inner axis interleaves the parts and is copied
// (launch_list.cpp, outputCopies).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

struct OutputPart {
  NodeId array = -1;           // the stored array that holds the part
  int64_t offsetElements = 0;  // where it starts in the output, row-major
};

// The parts of `output` in order, or none where it is not such a
// concatenation: its parts must each be a stored array (not an input, not
// another output, not `excluded`: arrays that must keep their own storage),
// seen through views that keep every element where the array has it, with
// the output's other axes in the output's order; nothing else may read the
// output, the arrays or the views; each part must start on a multiple of 8
// elements (16 bytes of bf16: the kernels' vector accesses). `readers[id]`:
// how many nodes take `id` as an operand.
std::vector<OutputPart> partsInPlace(const Graph& graph, NodeId output, const std::set<NodeId>& stored,
                                     const std::set<NodeId>& excluded, const std::vector<int>& readers);

}  // namespace llmc
