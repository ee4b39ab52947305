// Reverse-mode automatic differentiation on the IR: from a graph with a scalar
// loss, the graph that also computes the loss's gradient with respect to chosen
// inputs, built from one rule per primitive (contraction -> contractions,
// sum -> broadcast, max -> mask, gather -> scatter-add, ...).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

struct GradientOptions {
  std::string loss;              // the output to differentiate; empty: the only output
  std::vector<std::string> wrt;  // inputs to differentiate against; empty: every param
};

// The gradient of input `x` is the output named gradientName(x).
std::string gradientName(const std::string& input);

// The outputs of `graph` that are gradients of its inputs (named so), which
// a trainer keeps in f32 for its f32 master weights (EmitOptions::f32Values).
std::set<std::string> gradientOutputs(const Graph& graph);

// Returns a graph with the same inputs whose outputs are the loss, then the
// gradient of each input in `wrt` (in input order), each with its input's type.
// Throws CompileError when the loss is not a scalar float or a name is unknown.
Graph differentiate(const Graph& forward, const GradientOptions& options = {});

}  // namespace llmc
