// A scan's operator written by the user: a diagram of two numbers giving one
// (`diagram lse(a: f32[], b: f32[]) -> c: f32[]`), elaborated to a graph of
// rank-0 elementwise primitives and held by the scan node (Node::combine).
//
// Every stage reads the same graph: the interpreter and the front end's
// associativity check evaluate it here, autodiff inlines it (and its own
// gradient) over arrays, the CUDA writer spells it as a device lambda and the
// cost model counts its operations.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph_builder.h"
#include "ir/ir.h"

namespace llmc {

// Why `f` cannot be a scan's operator ("" when it can): two rank-0 float
// inputs and one rank-0 output of their dtype, every node elementwise
// (Constant, Unary, Binary, Compare, Select, Cast, StopGradient). `where`
// gets the offending node's location, where there is one.
std::string scalarFunctionProblem(const Graph& f, SourceLoc* where = nullptr);

// A unary operation on a number, in double (the front end folds numbers
// with it too; `not` of a number is 1 at 0, else 0).
double applyUnary(UnaryOp op, double x);

// f at (earlier, later), in double (casts to an integer type truncate).
double evaluateScalarFunction(const Graph& f, double earlier, double later);

// The arithmetic operations one evaluation takes (constants and inputs aside).
int scalarFunctionOperations(const Graph& f);

// f's nodes appended to the builder's graph with its inputs bound to
// `args` (arrays, lined up by axis name as elementwise boxes line them up);
// returns the nodes of f's outputs. f is elementwise on numbers (as
// scalarFunctionProblem asks, or its gradient graph: rank-0 sums,
// broadcasts and transposes are no-ops).
std::vector<NodeId> inlineScalarFunction(GraphBuilder& b, const Graph& f, const std::vector<NodeId>& args);

// The partial derivatives of f by its earlier and its later input, at the
// arrays `earlier` and `later` (elementwise), appended to the builder's graph.
std::pair<NodeId, NodeId> inlineScalarPartials(GraphBuilder& b, const Graph& f, NodeId earlier, NodeId later);

// Three numbers at which f(f(a, b), c) and f(a, f(b, c)) differ by more
// than a rounding's worth, from a fixed set of samples; nullopt when none
// does (or f is undefined at them all). A blocked scan regroups its terms,
// so an operator that is not associative has no scan.
struct NotAssociative {
  double a = 0, b = 0, c = 0, left = 0, right = 0;
};
std::optional<NotAssociative> associativityCounterexample(const Graph& f);

}  // namespace llmc
