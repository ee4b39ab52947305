// Diagrams drawn as Graphviz graphs (`--emit dot`, `--emit dot-plan`): a box
// for every primitive of the inlined graph, a wire from each operand labelled
// with the axes it carries, the inputs and outputs as ovals.
//
// The diagram: each call of a composite is a frame around its boxes, nested
// as the calls are (the graph's nodes keep their call path, Node::origin; a
// call's boxes are the consecutive nodes under one path, so two calls of the
// same composite are two frames).
//
// The plan: each kernel of a target's plan is a frame of its own colour around
// the boxes it computes, labelled with its name, its partition (the tiles
// across the grid, the streamed axis and its chunk, an axis shared out across
// blocks), its predicted time and what bounds it, as `--emit perf` prints
// them; a box that several kernels remake (a mask, a view) is drawn in the
// first, the composite path in every box's tooltip. Graphviz's `dot` lays
// either out (`dot -Tsvg`).
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"
#include "planning/partition.h"

namespace llmc {

// `depth`: composite calls nested deeper than this many frames are drawn as one
// box each, the wires into and out of them kept (GPT-2's whole step at depth 1:
// a box a block); -1 draws every call open.
std::string drawDiagramDot(const Graph& graph, int depth = -1);

// `depth` >= 0: each kernel one box (its label as a frame's), inside frames of
// the first `depth` calls of its composite path, a wire from a kernel to each
// that reads what it makes; inputs and outputs left out (GPT-2's whole step at
// depth 3: a frame a layer, 439 boxes, where the open drawing has 10,000).
std::string drawPlanDot(const Graph& graph, const std::vector<PlannedKernel>& kernels, int depth = -1);

}  // namespace llmc
