#include "ir/graph_builder.h"

#include <algorithm>

namespace llmc {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

NodeId GraphBuilder::add(Node n) {
  n.origin = origin_;
  return g_.add(std::move(n));
}

std::vector<Axis> elementwiseAxes(const std::vector<const std::vector<Axis>*>& operands) {
  std::vector<const std::vector<Axis>*> byRank = operands;
  std::stable_sort(byRank.begin(), byRank.end(), [](const auto* a, const auto* b) { return a->size() > b->size(); });
  std::vector<Axis> out;
  for (const auto* axes : byRank)
    for (const auto& a : *axes)
      if (std::none_of(out.begin(), out.end(), [&](const Axis& b) { return b.name == a.name; })) out.push_back(a);
  return out;
}

std::vector<Axis> GraphBuilder::elementwiseAxes(const std::vector<NodeId>& operands) const {
  std::vector<const std::vector<Axis>*> axes;
  for (NodeId o : operands) axes.push_back(&type(o).axes);
  return llmc::elementwiseAxes(axes);
}

NodeId GraphBuilder::constant(double value, DType dtype) {
  Node n;
  n.op = Op::Constant;
  n.value = value;
  n.type.dtype = dtype;
  return add(std::move(n));
}

NodeId GraphBuilder::pos(const Axis& axis) {
  Node n;
  n.op = Op::Pos;
  n.axes = {axis.name};
  n.type = Type{DType::I32, {axis}};
  return add(std::move(n));
}

NodeId GraphBuilder::unary(UnaryOp op, NodeId x) {
  Node n;
  n.op = Op::Unary;
  n.unary = op;
  n.operands = {x};
  n.type = type(x);
  return add(std::move(n));
}

NodeId GraphBuilder::binary(BinaryOp op, NodeId x, NodeId y) {
  Node n;
  n.op = Op::Binary;
  n.binary = op;
  n.operands = {x, y};
  n.type = Type{type(x).dtype, elementwiseAxes({x, y})};
  return add(std::move(n));
}

NodeId GraphBuilder::compare(CompareOp op, NodeId x, NodeId y) {
  Node n;
  n.op = Op::Compare;
  n.compare = op;
  n.operands = {x, y};
  n.type = Type{DType::Bool, elementwiseAxes({x, y})};
  return add(std::move(n));
}

NodeId GraphBuilder::select(NodeId cond, NodeId x, NodeId y) {
  Node n;
  n.op = Op::Select;
  n.operands = {cond, x, y};
  n.type = Type{type(x).dtype, elementwiseAxes({cond, x, y})};
  return add(std::move(n));
}

NodeId GraphBuilder::cast(NodeId x, DType dtype) {
  if (type(x).dtype == dtype) return x;
  Node n;
  n.op = Op::Cast;
  n.operands = {x};
  n.type = Type{dtype, type(x).axes};
  return add(std::move(n));
}

NodeId GraphBuilder::sum(NodeId x, const std::vector<std::string>& axes) {
  if (axes.empty()) return x;
  Node n;
  n.op = Op::Reduce;
  n.reduce = ReduceOp::Sum;
  n.axes = axes;
  n.operands = {x};
  n.type.dtype = type(x).dtype;
  for (const auto& a : type(x).axes)
    if (!contains(axes, a.name)) n.type.axes.push_back(a);
  return add(std::move(n));
}

NodeId GraphBuilder::scan(ReduceOp op, NodeId x, const std::string& axis, const std::string& to, bool exclusive,
                          bool reverse) {
  Node n;
  n.op = Op::Scan;
  n.reduce = op;
  n.axes = {axis};
  n.newAxes = {to};
  n.lo = exclusive ? 1 : 0;
  n.hi = reverse ? 1 : 0;
  n.operands = {x};
  n.type = type(x);
  for (Axis& a : n.type.axes)
    if (a.name == axis) a.name = to;
  return add(std::move(n));
}

NodeId GraphBuilder::linearScan(NodeId coefficient, NodeId x, const std::string& axis, const std::string& to,
                                bool exclusive, bool reverse, bool lagged) {
  const NodeId ordered = transposeTo(coefficient, type(x));
  const NodeId scanned = scan(ReduceOp::Sum, x, axis, to, exclusive, reverse);
  Node& n = g_.node(scanned);
  n.operands.push_back(ordered);
  n.lagged = lagged;
  return scanned;
}

NodeId GraphBuilder::contract(NodeId x, NodeId y, const std::vector<std::string>& axes) {
  return contract(x, y, axes, {});
}

NodeId GraphBuilder::contract(NodeId x, NodeId y, const std::vector<std::string>& axes,
                              const std::vector<Axis>& order) {
  if (axes.empty()) return binary(BinaryOp::Mul, x, y);
  Node n;
  n.op = Op::Contract;
  n.axes = axes;
  n.operands = {x, y};
  DType d = type(x).dtype;
  n.type.dtype = d == DType::F64 ? DType::F64 : isFloat(d) ? DType::F32 : DType::I32;
  for (const auto& a : elementwiseAxes({x, y}))
    if (!contains(axes, a.name)) n.type.axes.push_back(a);
  std::vector<Axis> permuted;
  for (const Axis& a : order)
    if (n.type.has(a.name)) permuted.push_back(*n.type.find(a.name));
  if (permuted.size() == n.type.axes.size()) n.type.axes = std::move(permuted);
  return add(std::move(n));
}

NodeId GraphBuilder::gather(NodeId table, NodeId index, const std::string& axis) {
  Node n;
  n.op = Op::Gather;
  n.axes = {axis};
  n.operands = {table, index};
  n.type = Type{type(table).dtype, type(index).axes};
  for (const auto& a : type(table).axes)
    if (a.name != axis && !type(index).has(a.name)) n.type.axes.push_back(a);
  return add(std::move(n));
}

NodeId GraphBuilder::scatterAdd(NodeId values, NodeId index, const Axis& axis,
                                const std::vector<std::string>& summed) {
  Node n;
  n.op = Op::ScatterAdd;
  n.axes = summed;
  n.newAxes = {axis.name};
  n.operands = {values, index};
  n.type.dtype = type(values).dtype;
  n.type.axes = {axis};
  for (const auto& a : type(values).axes)
    if (!contains(summed, a.name)) n.type.axes.push_back(a);
  return add(std::move(n));
}

NodeId GraphBuilder::split(NodeId x, const std::string& axis, const std::vector<Axis>& parts) {
  Node n;
  n.op = Op::Split;
  n.axes = {axis};
  n.operands = {x};
  n.type.dtype = type(x).dtype;
  for (const auto& p : parts) n.newAxes.push_back(p.name);
  for (const auto& a : type(x).axes) {
    if (a.name == axis) n.type.axes.insert(n.type.axes.end(), parts.begin(), parts.end());
    else n.type.axes.push_back(a);
  }
  return add(std::move(n));
}

NodeId GraphBuilder::merge(NodeId x, const std::vector<std::string>& axes, const std::string& merged) {
  Node n;
  n.op = Op::Merge;
  n.axes = axes;
  n.newAxes = {merged};
  n.operands = {x};
  n.type.dtype = type(x).dtype;
  int64_t size = 1;
  for (const auto& a : axes) size *= type(x).find(a)->size;
  bool placed = false;
  for (const auto& a : type(x).axes) {
    if (!contains(axes, a.name)) {
      n.type.axes.push_back(a);
    } else if (!placed) {
      n.type.axes.push_back({merged, size});
      placed = true;
    }
  }
  return add(std::move(n));
}

NodeId GraphBuilder::rename(NodeId x, const std::string& from, const std::string& to) {
  Node n;
  n.op = Op::Rename;
  n.axes = {from};
  n.newAxes = {to};
  n.operands = {x};
  n.type = type(x);
  for (auto& a : n.type.axes)
    if (a.name == from) a.name = to;
  return add(std::move(n));
}

NodeId GraphBuilder::slice(NodeId x, const std::string& axis, const std::string& to, int64_t lo, int64_t hi) {
  Node n;
  n.op = Op::Slice;
  n.axes = {axis};
  n.newAxes = {to};
  n.lo = lo;
  n.hi = hi;
  n.operands = {x};
  n.type = type(x);
  for (auto& a : n.type.axes)
    if (a.name == axis) a = {to, hi - lo};
  return add(std::move(n));
}

NodeId GraphBuilder::index(NodeId x, const std::string& axis, int64_t position) {
  Node n;
  n.op = Op::Index;
  n.axes = {axis};
  n.lo = position;
  n.operands = {x};
  n.type.dtype = type(x).dtype;
  for (const auto& a : type(x).axes)
    if (a.name != axis) n.type.axes.push_back(a);
  return add(std::move(n));
}

NodeId GraphBuilder::concat(const std::vector<NodeId>& parts, const std::string& axis, const Axis& joined) {
  Node n;
  n.op = Op::Concat;
  n.axes = {axis};
  n.newAxes = {joined.name};
  n.operands = parts;
  n.type = type(parts.at(0));
  for (auto& a : n.type.axes)
    if (a.name == axis) a = joined;
  return add(std::move(n));
}

NodeId GraphBuilder::broadcastTo(NodeId x, const Type& target) {
  std::vector<std::string> missing;
  for (const auto& a : target.axes)
    if (!type(x).has(a.name)) missing.push_back(a.name);
  if (missing.empty()) return transposeTo(x, target);
  // The natural order is x's axes, then the new ones; then the target's.
  Node n;
  n.op = Op::Broadcast;
  n.newAxes = missing;
  n.operands = {x};
  n.type = type(x);
  for (const auto& name : missing) n.type.axes.push_back(*target.find(name));
  return transposeTo(add(std::move(n)), target);
}

NodeId GraphBuilder::transposeTo(NodeId x, const Type& target) {
  if (type(x).axes == target.axes) return x;
  Node n;
  n.op = Op::Transpose;
  n.operands = {x};
  n.type = Type{type(x).dtype, target.axes};
  return add(std::move(n));
}

}  // namespace llmc
