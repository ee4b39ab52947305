// Appends primitive nodes to a graph with their types inferred by the same
// rules as the diagram language. For passes that write IR (autodiff); the
// operands are assumed well-typed (the verifier checks the result).
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

// The axes of an elementwise result, by the language's rule: the operand of
// most axes first (the first of those on a tie), then each other's new ones.
std::vector<Axis> elementwiseAxes(const std::vector<const std::vector<Axis>*>& operands);

class GraphBuilder {
 public:
  // New nodes take `origin` as their composite path.
  GraphBuilder(Graph& graph, std::vector<std::string> origin) : g_(graph), origin_(std::move(origin)) {}

  const Type& type(NodeId id) const { return g_.node(id).type; }

  NodeId constant(double value, DType dtype);
  NodeId pos(const Axis& axis);
  NodeId unary(UnaryOp op, NodeId x);
  NodeId binary(BinaryOp op, NodeId x, NodeId y);
  NodeId compare(CompareOp op, NodeId x, NodeId y);
  NodeId select(NodeId cond, NodeId x, NodeId y);
  NodeId cast(NodeId x, DType dtype);
  // Sums over `axes`; returns x itself when there are none.
  NodeId sum(NodeId x, const std::vector<std::string>& axes);
  // A contraction over `axes` (a product when there are none).
  NodeId contract(NodeId x, NodeId y, const std::vector<std::string>& axes);
  // The same with its result's axes in `order` (a permutation of them): a
  // contraction may write its result in any order, so a consumer's order
  // costs no transposed view.
  NodeId contract(NodeId x, NodeId y, const std::vector<std::string>& axes, const std::vector<Axis>& order);
  // The running `op` of x along `axis`, the result's `to` in its place
  // (Op::Scan): exclusive leaves each position's own element out, reverse
  // runs from the end.
  NodeId scan(ReduceOp op, NodeId x, const std::string& axis, const std::string& to, bool exclusive, bool reverse);
  // The linear recurrence h = coefficient * h + x along `axis` (Op::Scan);
  // the coefficient has x's axes (in any order).
  NodeId linearScan(NodeId coefficient, NodeId x, const std::string& axis, const std::string& to, bool exclusive,
                    bool reverse, bool lagged);
  NodeId gather(NodeId table, NodeId index, const std::string& axis);
  NodeId scatterAdd(NodeId values, NodeId index, const Axis& axis, const std::vector<std::string>& summed);
  NodeId split(NodeId x, const std::string& axis, const std::vector<Axis>& parts);
  NodeId merge(NodeId x, const std::vector<std::string>& axes, const std::string& merged);
  NodeId rename(NodeId x, const std::string& from, const std::string& to);
  NodeId slice(NodeId x, const std::string& axis, const std::string& to, int64_t lo, int64_t hi);
  NodeId index(NodeId x, const std::string& axis, int64_t position);
  // The parts (same types) joined along `axis`, which becomes `joined` with
  // the parts' positions one after another.
  NodeId concat(const std::vector<NodeId>& parts, const std::string& axis, const Axis& joined);
  // x repeated along the axes of `target` it lacks, then laid out as target.
  NodeId broadcastTo(NodeId x, const Type& target);
  // x laid out in target's axis order (x has the same axes).
  NodeId transposeTo(NodeId x, const Type& target);

  // The axes of an elementwise result: those of the operand with the most
  // axes, then any others in operand order.
  std::vector<Axis> elementwiseAxes(const std::vector<NodeId>& operands) const;

 private:
  NodeId add(Node n);

  Graph& g_;
  std::vector<std::string> origin_;
};

}  // namespace llmc
