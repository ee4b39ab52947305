#include "ir/one_hot_gathers.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ir/rewrite.h"

namespace llmc {

namespace {

// One contraction operand to rewrite: contract(other, gather(table, index, axis), axes).
struct Rewrite {
  int side = 0;           // which operand of the contraction is the gather
  NodeId other = -1, table = -1, index = -1;
  std::string axis;       // the gathered axis of the table
};

class OneHotGathers {
 public:
  OneHotGathers(const Graph& g, const Target& t, const CostOptions& o) : g_(g), target_(t), options_(o) {}

  Graph run() {
    return rewriteNodes(g_, [&](const Node& n, GraphBuilder& b, const CopiedNode& copied) -> std::optional<NodeId> {
      const std::optional<Rewrite> r = match(n);
      if (!r) return std::nullopt;
      return rewrite(b, n, *r, copied);
    });
  }

 private:
  const Type& type(NodeId id) const { return g_.node(id).type; }

  std::optional<Rewrite> match(const Node& n) const {
    if (n.op != Op::Contract || !isFloat(n.type.dtype) || n.axes.empty()) return std::nullopt;
    for (int side : {0, 1}) {
      const Node& gathered = g_.node(n.operands[side]);
      if (gathered.op != Op::Gather || !isFloat(gathered.type.dtype)) continue;
      Rewrite r{side, n.operands[1 - side], gathered.operands[0], gathered.operands[1], gathered.axes[0]};
      if (!isFloat(type(r.other).dtype)) continue;
      if (denseIsCheaper(n, r)) return r;
    }
    return std::nullopt;
  }

  // The contraction as it is (on the CUDA cores: each index reads its own
  // block of the table) against the dense form: |axis| times the products on
  // the tensor cores, plus writing and reading the one-hot operand.
  bool denseIsCheaper(const Node& n, const Rewrite& r) const {
    CostOptions cudaCores = options_;
    cudaCores.tensorCores = false;
    const NodeWork gathered = nodeWork(g_, n, target_, cudaCores);
    const double asIs = gathered.operations / target_.unit(gathered.unit).attainable;
    const double rows = static_cast<double>(type(r.table).find(r.axis)->size);
    const double operandBytes = storedBytes(Type{DType::F32, oneHotOperandAxes(n, r)}, options_);
    return stagedTensorContractionSeconds(rows * gathered.operations, operandBytes, target_, options_) < asIs;
  }

  // The axes of sum over D∖T of (other · onehot): the other operand's and the
  // index's with the table's axis, less the contracted axes the table lacks
  // (sizes only: the one-hot's axis may take another name).
  std::vector<Axis> oneHotOperandAxes(const Node& n, const Rewrite& r) const {
    std::vector<Axis> axes;
    auto add = [&](const Axis& a) {
      const bool summedHere = contains(n.axes, a.name) && !type(r.table).has(a.name);
      if (!summedHere && std::none_of(axes.begin(), axes.end(), [&](const Axis& b) { return b.name == a.name; }))
        axes.push_back(a);
    };
    for (const Axis& a : type(r.other).axes) add(a);
    for (const Axis& a : type(r.index).axes) add(a);
    Axis gatheredAxis = *type(r.table).find(r.axis);
    gatheredAxis.name = oneHotAxis(r);
    add(gatheredAxis);
    return axes;
  }

  // The one-hot's axis: the table's gathered axis, under a name the other
  // operand does not use (it may have an axis of that name: after the gather
  // the name is free), so that the plan does not depend on the names.
  std::string oneHotAxis(const Rewrite& r) const {
    std::string name = r.axis;
    auto taken = [&](const std::string& a) {
      return type(r.other).has(a) || type(r.index).has(a) || (a != r.axis && type(r.table).has(a));
    };
    for (int k = 1; taken(name); ++k)
      name = r.axis + "_" + std::to_string(k);
    return name;
  }

  NodeId rewrite(GraphBuilder& b, const Node& n, const Rewrite& r, const CopiedNode& mapped) const {
    const std::string name = oneHotAxis(r);
    NodeId table = name == r.axis ? mapped(r.table) : b.rename(mapped(r.table), r.axis, name);
    Axis axis = *type(r.table).find(r.axis);
    axis.name = name;
    NodeId oneHot = b.compare(CompareOp::Eq, b.cast(mapped(r.index), DType::I32), b.pos(axis));
    oneHot = b.cast(oneHot, type(r.other).dtype);
    std::vector<std::string> summedFirst, contracted{name};
    for (const std::string& a : n.axes) (type(r.table).has(a) ? contracted : summedFirst).push_back(a);
    NodeId operand = b.sum(b.binary(BinaryOp::Mul, mapped(r.other), oneHot), summedFirst);
    NodeId made = r.side == 0 ? b.contract(table, operand, contracted) : b.contract(operand, table, contracted);
    return b.transposeTo(b.cast(made, n.type.dtype), n.type);
  }

  static bool contains(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  }

  const Graph& g_;
  const Target& target_;
  const CostOptions& options_;
};

}  // namespace

Graph oneHotGathers(const Graph& graph, const Target& target, const CostOptions& options) {
  return OneHotGathers(graph, target, options).run();
}

}  // namespace llmc
