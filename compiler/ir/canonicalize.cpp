#include "ir/canonicalize.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <tuple>

namespace llmc {

namespace {

// Everything that makes two nodes compute the same array.
// A user's monoid by its graph's address: scans over one elaborated operator
// are merged, over two copies of it kept apart (harmless).
using NodeKey = std::tuple<Op, std::string, std::vector<NodeId>, int, double, std::vector<std::string>,
                           std::vector<std::string>, int64_t, int64_t, bool, const Graph*>;

NodeKey keyOf(const Node& n, const std::vector<NodeId>& operands) {
  int sub = n.op == Op::Unary     ? static_cast<int>(n.unary)
            : n.op == Op::Binary  ? static_cast<int>(n.binary)
            : n.op == Op::Compare ? static_cast<int>(n.compare)
            : n.op == Op::Reduce || n.op == Op::Scan ? static_cast<int>(n.reduce)
                                  : 0;
  return {n.op, n.type.str(), operands, sub, n.value, n.axes, n.newAxes, n.lo, n.hi, n.lagged, n.combine.get()};
}

// The operand that `n` (remapped operands `operands`, in `out`) equals
// exactly, or -1: x * 1, 1 * x and x / 1, exact in IEEE arithmetic (inf,
// NaN and -0 included) where the product has x's type (autodiff's seed
// times the upstream gradient). A graph output keeps its node.
NodeId identityOperand(const Node& n, const std::vector<NodeId>& operands, const Graph& out) {
  if (n.op != Op::Binary || (n.binary != BinaryOp::Mul && n.binary != BinaryOp::Div)) return -1;
  auto isOne = [&](NodeId id) { return out.node(id).op == Op::Constant && out.node(id).value == 1.0; };
  for (size_t k = 0; k < 2; ++k) {
    const NodeId one = operands[k], other = operands[1 - k];
    if (n.binary == BinaryOp::Div && k == 0) continue;  // 1 / x is no identity
    if (isOne(one) && out.node(other).type.str() == n.type.str()) return other;
  }
  return -1;
}

}  // namespace

Graph canonicalize(const Graph& graph) {
  // Live nodes: reachable backwards from the outputs, plus the inputs.
  std::vector<bool> live(graph.nodes.size(), false);
  for (NodeId id : graph.inputs) live[static_cast<size_t>(id)] = true;
  for (const auto& o : graph.outputs) live[static_cast<size_t>(o.node)] = true;
  for (size_t i = graph.nodes.size(); i-- > 0;)
    if (live[i])
      for (NodeId o : graph.nodes[i].operands) live[static_cast<size_t>(o)] = true;

  std::set<NodeId> outputs;
  for (const auto& o : graph.outputs) outputs.insert(o.node);
  Graph out;
  out.name = graph.name;
  std::vector<NodeId> remap(graph.nodes.size(), -1);
  std::map<NodeKey, NodeId> seen;
  for (const Node& n : graph.nodes) {
    if (!live[static_cast<size_t>(n.id)]) continue;
    std::vector<NodeId> operands;
    for (NodeId o : n.operands) operands.push_back(remap[static_cast<size_t>(o)]);
    if (const NodeId same = identityOperand(n, operands, out); same >= 0 && !outputs.count(n.id)) {
      remap[static_cast<size_t>(n.id)] = same;
      continue;
    }
    if (n.op != Op::Input) {
      auto [it, fresh] = seen.emplace(keyOf(n, operands), -1);
      if (!fresh) {
        remap[static_cast<size_t>(n.id)] = it->second;
        continue;
      }
      Node copy = n;
      copy.operands = operands;
      it->second = out.add(std::move(copy));
      remap[static_cast<size_t>(n.id)] = it->second;
    } else {
      remap[static_cast<size_t>(n.id)] = out.add(n);
    }
  }
  for (NodeId id : graph.inputs) out.inputs.push_back(remap[static_cast<size_t>(id)]);
  for (const auto& o : graph.outputs) out.outputs.push_back({o.name, remap[static_cast<size_t>(o.node)]});
  return out;
}

}  // namespace llmc
