#include "ir/masked_sums.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ir/rewrite.h"
#include "planning/scan_layout.h"

namespace llmc {

namespace {

// A running sum: a sum over s of where(pos(s) REL pos(t), value, 0) (or
// its negation), value along s and not t, s and t of one extent; a running
// maximum the same with max and -inf. The relation of s to t gives the
// scan's form: s <= t inclusive, s < t exclusive, s >= t and s > t the same
// from the end.
struct RunningSum {
  ReduceOp op = ReduceOp::Sum;
  NodeId value = -1;
  std::string along, to;  // s, t
  bool exclusive = false, reverse = false;
};

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
      const std::optional<RunningSum> running = matchRunningSum(n);
      const std::optional<MaskedSum> m = match(n);
      if (running && (options_.scansAlways || scanIsCheapest(n, *running, m.has_value()))) {
        const NodeId scanned = b.scan(running->op, copied(running->value), running->along, running->to,
                                      running->exclusive, running->reverse);
        return b.transposeTo(b.cast(scanned, n.type.dtype), n.type);
      }
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

  // What a reduction of `op` leaves unchanged: 0 for a sum, -inf for a max.
  bool isIdentity(NodeId id, ReduceOp op) const {
    const Node& n = g_.node(id);
    return n.op == Op::Constant && (op == ReduceOp::Sum ? n.value == 0 : std::isinf(n.value) && n.value < 0);
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

  // Positions compared: the relation of pos(s) to pos(t) (either written
  // first), or nothing.
  std::optional<CompareOp> positionRelation(const Node& cond, const std::string& s, const std::string& t) const {
    if (cond.op != Op::Compare || cond.operands.size() != 2) return std::nullopt;
    const Node& a = g_.node(cond.operands[0]);
    const Node& b = g_.node(cond.operands[1]);
    if (a.op != Op::Pos || b.op != Op::Pos) return std::nullopt;
    auto flipped = [](CompareOp op) {
      switch (op) {
        case CompareOp::Lt: return CompareOp::Gt;
        case CompareOp::Le: return CompareOp::Ge;
        case CompareOp::Gt: return CompareOp::Lt;
        case CompareOp::Ge: return CompareOp::Le;
        default: return op;
      }
    };
    if (a.axes[0] == s && b.axes[0] == t) return cond.compare;
    if (a.axes[0] == t && b.axes[0] == s) return flipped(cond.compare);
    return std::nullopt;
  }

  std::optional<RunningSum> matchRunningSum(const Node& n) const {
    if (n.op != Op::Reduce || !isFloat(n.type.dtype) || n.axes.size() != 1) return std::nullopt;
    const Node& select = g_.node(n.operands[0]);
    if (select.op != Op::Select) return std::nullopt;
    RunningSum r;
    r.op = n.reduce;
    bool negated = false;
    if (isIdentity(select.operands[2], r.op)) r.value = select.operands[1];
    else if (isIdentity(select.operands[1], r.op)) r.value = select.operands[2], negated = true;
    else return std::nullopt;
    const Type& value = type(r.value);
    const Type& cond = type(select.operands[0]);
    r.along = n.axes[0];
    if (!isFloat(value.dtype) || value.dtype != n.type.dtype || !value.has(r.along) || cond.axes.size() != 2)
      return std::nullopt;
    for (const Axis& a : cond.axes)
      if (a.name != r.along) r.to = a.name;
    const Axis* t = cond.find(r.to);
    if (r.to.empty() || value.has(r.to) || !t || t->size != value.find(r.along)->size) return std::nullopt;
    std::optional<CompareOp> rel = positionRelation(g_.node(select.operands[0]), r.along, r.to);
    if (!rel) return std::nullopt;
    if (negated)  // where(s REL t, 0, x): x where the complement holds
      switch (*rel) {
        case CompareOp::Lt: rel = CompareOp::Ge; break;
        case CompareOp::Le: rel = CompareOp::Gt; break;
        case CompareOp::Gt: rel = CompareOp::Le; break;
        case CompareOp::Ge: rel = CompareOp::Lt; break;
        default: return std::nullopt;
      }
    switch (*rel) {
      case CompareOp::Le: break;
      case CompareOp::Lt: r.exclusive = true; break;
      case CompareOp::Ge: r.reverse = true; break;
      case CompareOp::Gt: r.exclusive = r.reverse = true; break;
      default: return std::nullopt;
    }
    return r;
  }

  // The scan reads the value and writes the sum (maximum) once (planning/scan_layout.h);
  // the masked reduction visits every pair of positions, the contraction
  // makes a multiply-add at each on the tensor cores (where it matched), in
  // a tile-library GEMM that first fills its tiles. Each priced with its
  // launch, as the scan's price is.
  bool scanIsCheapest(const Node& sum, const RunningSum& r, bool contractionMatched) const {
    const Type& value = type(r.value);
    const double scan = scanSeconds(value, sum.type, scanLayout(value, sum.type, r.to, target_, options_), target_, options_);
    const NodeWork reduced = nodeWork(g_, sum, target_, options_);
    double best = reduced.operations / target_.unit(reduced.unit).attainable + target_.graphLaunchOverhead;
    if (contractionMatched) {
      const double points = static_cast<double>(g_.node(sum.operands[0]).type.elementCount());
      best = std::min(best, stagedTensorContractionSeconds(2 * points, storedBytes(value, options_), target_, options_) +
                                target_.graphLaunchOverhead + target_.tileFillSeconds);
    }
    return scan < best;
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
