#include "ir/masked_sums.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ir/rewrite.h"

namespace llmc {

namespace {

// sum over `summed` of where(cond, value, 0), or of where(cond, 0, value) (negated).
struct MaskedSum {
  NodeId cond = -1, value = -1;
  bool negated = false;
  std::vector<std::string> contracted;  // the summed axes the condition has
  std::vector<std::string> summedFirst; // the summed axes only the value has
};

class MaskedSums {
 public:
  MaskedSums(const Graph& g, const Target& t, const CostOptions& o) : g_(g), target_(t), options_(o) {}

  Graph run() {
    return rewriteNodes(g_, [&](const Node& n, GraphBuilder& b, const CopiedNode& copied) -> std::optional<NodeId> {
      const std::optional<MaskedSum> m = match(n);
      if (!m) return std::nullopt;
      NodeId mask = copied(m->cond);
      if (m->negated) mask = b.unary(UnaryOp::Not, mask);
      mask = b.cast(mask, type(m->value).dtype);
      const NodeId value = b.sum(copied(m->value), m->summedFirst);
      // A contraction sums in f32 (GraphBuilder): back to the sum's dtype (a bf16 diagram's).
      return b.transposeTo(b.cast(b.contract(mask, value, m->contracted, n.type.axes), n.type.dtype), n.type);
    });
  }

 private:
  const Type& type(NodeId id) const { return g_.node(id).type; }

  bool isZero(NodeId id) const {
    const Node& n = g_.node(id);
    return n.op == Op::Constant && n.value == 0;
  }

  std::optional<MaskedSum> match(const Node& n) const {
    if (n.op != Op::Reduce || n.reduce != ReduceOp::Sum || !isFloat(n.type.dtype) || n.axes.empty())
      return std::nullopt;
    const Node& select = g_.node(n.operands[0]);
    if (select.op != Op::Select) return std::nullopt;
    MaskedSum m;
    m.cond = select.operands[0];
    if (isZero(select.operands[2])) m.value = select.operands[1];
    else if (isZero(select.operands[1])) m.value = select.operands[2], m.negated = true;
    else return std::nullopt;
    const Type& cond = type(m.cond);
    const Type& value = type(m.value);
    if (!isFloat(value.dtype)) return std::nullopt;
    for (const std::string& a : n.axes) {
      if (!value.has(a)) return std::nullopt;  // a sum of copies: a count, not a contraction
      (cond.has(a) ? m.contracted : m.summedFirst).push_back(a);
    }
    // The condition must add axes of its own (rows of the contraction) and
    // share one that is summed (its inner dimension).
    const bool ownAxes = std::any_of(cond.axes.begin(), cond.axes.end(), [&](const Axis& a) { return !value.has(a.name); });
    if (!ownAxes || m.contracted.empty() || !contractionIsCheaper(n, select, m)) return std::nullopt;
    return m;
  }

  // The reduction visits every point of the selection on the CUDA cores;
  // the contraction does a multiply-add at each on the tensor cores, and
  // its value operand is written and read once more.
  bool contractionIsCheaper(const Node& sum, const Node& select, const MaskedSum& m) const {
    const NodeWork reduced = nodeWork(g_, sum, target_, options_);
    const double asIs = reduced.operations / target_.unit(reduced.unit).attainable;
    const double points = static_cast<double>(select.type.elementCount());
    return stagedTensorContractionSeconds(2 * points, storedBytes(type(m.value), options_), target_, options_) < asIs;
  }

  const Graph& g_;
  const Target& target_;
  const CostOptions& options_;
};

}  // namespace

Graph maskedSums(const Graph& graph, const Target& target, const CostOptions& options) {
  return MaskedSums(graph, target, options).run();
}

}  // namespace llmc
