// Concatenations made where their parts lie: a concatenation of stored
// arrays, each read by nothing else, is no copy of them. Each part is
// written by its own launches straight into its place in the concatenation's
// buffer (BufferDesc::within), at the concatenation's strides.
//
//  - A graph output so made (a training step's gradient of a parameter
//    stacked over the layers, each layer's written by that layer's backward)
//    keeps each part contiguous: joined along its outermost axis, a part is
//    one block of the output, which the data-parallel reduction averages
//    where it lies (launch_list.cpp, placeParts).
//  - A concatenation the step reads (attention's dq, dk and dv joined into
//    the gradient of the fused qkv projection, along an inner axis: the parts
//    interleave) is made by no launch at all: its kernel is planned, then
//    found to be only this, and priced at nothing (launch_list.cpp,
//    assembleConcats; lowering.cpp).
//
// Elsewhere a concatenation is computed by a launch of its own (or copied,
// for an output).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

struct PlacedPart {
  NodeId array = -1;           // the stored array that holds the part
  int64_t offsetElements = 0;  // where its first element lies in the concatenation's buffer
  // Per axis of the array, the distance in elements between neighbours
  // along it in the concatenation's buffer; an axis of one position, 0.
  std::vector<int64_t> strides;
  // Whether the part lies as the array would on its own: row-major, one
  // block from offsetElements on.
  bool contiguous = false;
};

// The parts of the concatenation `concat` in order, or none where it is not
// one whose parts can lie in it. Each part must be a stored array (not an
// input, not a graph output, not one of `excluded`: arrays that must keep
// their own storage) seen through views that only rename or reorder its
// axes, each view and the array read by nothing else (`readers[id]`: how
// many nodes take `id` as an operand). So that the kernels' 16-byte
// accesses along an array's innermost axis stay whole and aligned, each
// array's innermost axis must lie contiguous in the concatenation and its
// first element and its other axes' strides be multiples of 8 elements.
std::vector<PlacedPart> partsInPlace(const Graph& graph, NodeId concat, const std::set<NodeId>& stored,
                                     const std::set<NodeId>& excluded, const std::vector<int>& readers);

}  // namespace llmc
