#include "ir/reassociate.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/rewrite.h"

namespace llmc {

namespace {

// A factor of a product: the value, multiplied (+1) or divided by (-1).
struct Factor {
  NodeId node = -1;
  int power = 1;
};

// `sum` over X of a product with one contraction, as the rewrite needs it.
struct Match {
  NodeId a = -1, inner = -1;       // contract(a, inner, contracted) replaces the sum
  std::vector<std::string> contracted;
  std::vector<Factor> outside;     // factors lacking X
  bool negated = false;
};

class Reassociator {
 public:
  explicit Reassociator(const Graph& g) : g_(g) {
    for (const Node& n : g_.nodes)
      if (n.op == Op::Contract) {
        contractions_[contractionKey(n.operands[0], n.operands[1], n.axes)] = n.id;
        contracted_.insert(n.operands.begin(), n.operands.end());
      }
  }

  Graph run() {
    return rewriteNodes(g_, [&](const Node& n, GraphBuilder& b, const CopiedNode& copied) -> std::optional<NodeId> {
      const std::optional<Match> m = match(n);
      if (!m) return std::nullopt;
      NodeId made = b.contract(copied(m->a), copied(m->inner), m->contracted);
      for (const Factor& f : m->outside)
        made = b.binary(f.power > 0 ? BinaryOp::Mul : BinaryOp::Div, made, copied(f.node));
      if (m->negated) made = b.unary(UnaryOp::Neg, made);
      return b.transposeTo(made, n.type);
    });
  }

 private:
  // Contractions are commutative: the key orders the operands.
  static std::string contractionKey(NodeId x, NodeId y, std::vector<std::string> axes) {
    std::sort(axes.begin(), axes.end());
    std::string key = std::to_string(std::min(x, y)) + "," + std::to_string(std::max(x, y));
    for (const std::string& a : axes) key += " " + a;
    return key;
  }

  bool hasAny(NodeId id, const std::vector<std::string>& axes) const {
    return std::any_of(axes.begin(), axes.end(), [&](const std::string& a) { return g_.node(id).type.has(a); });
  }
  bool hasAll(NodeId id, const std::vector<std::string>& axes) const {
    return std::all_of(axes.begin(), axes.end(), [&](const std::string& a) { return g_.node(id).type.has(a); });
  }

  // The factors of a float product through negation, multiplication and
  // division. An operand of a contraction stays whole (a softmax's P = e / l,
  // which the forward contracts with v): it is the weight the inner
  // contraction must be found for.
  void factors(NodeId id, int power, std::vector<Factor>& out, bool& negated, int depth = 0) const {
    const Node& n = g_.node(id);
    const bool product = isFloat(n.type.dtype) && depth < 16 && (depth == 0 || !contracted_.count(id)) &&
                         ((n.op == Op::Unary && n.unary == UnaryOp::Neg) ||
                          (n.op == Op::Binary && (n.binary == BinaryOp::Mul || n.binary == BinaryOp::Div)));
    if (!product) {
      out.push_back({id, power});
      return;
    }
    if (n.op == Op::Unary) {
      negated = !negated;
      factors(n.operands[0], power, out, negated, depth + 1);
      return;
    }
    factors(n.operands[0], power, out, negated, depth + 1);
    factors(n.operands[1], n.binary == BinaryOp::Div ? -power : power, out, negated, depth + 1);
  }

  std::optional<Match> match(const Node& n) const {
    if (n.op != Op::Reduce || n.reduce != ReduceOp::Sum || !isFloat(n.type.dtype) || n.axes.empty()) return std::nullopt;
    const std::vector<std::string>& summed = n.axes;
    std::vector<Factor> all;
    Match m;
    factors(n.operands[0], 1, all, m.negated);
    std::optional<Factor> contraction, weight;
    for (const Factor& f : all) {
      if (!hasAny(f.node, summed)) {
        m.outside.push_back(f);
        continue;
      }
      const Node& leaf = g_.node(f.node);
      const bool isContraction = leaf.op == Op::Contract && !leaf.axes.empty() && f.power == 1;
      if (isContraction && !contraction) contraction = f;
      else if (!weight && f.power == 1) weight = f;
      else return std::nullopt;
    }
    if (!contraction || !weight) return std::nullopt;
    const Node& c = g_.node(contraction->node);
    m.contracted = c.axes;
    if (hasAny(weight->node, m.contracted) || !hasAll(weight->node, summed)) return std::nullopt;
    for (int side : {0, 1}) {
      const NodeId a = c.operands[side], b = c.operands[1 - side];
      if (hasAny(a, summed) || !hasAll(b, summed)) continue;
      auto inner = contractions_.find(contractionKey(weight->node, b, summed));
      // (Only one made before the sum: the rewrite puts its replacement where the sum was.)
      if (inner == contractions_.end() || inner->second > n.id) continue;
      m.a = a;
      m.inner = inner->second;
      // The result must keep exactly the sum's axes.
      std::set<std::string> expected, made;
      for (const Axis& x : n.type.axes) expected.insert(x.name);
      for (NodeId v : {a, m.inner})
        for (const Axis& x : g_.node(v).type.axes)
          if (std::find(m.contracted.begin(), m.contracted.end(), x.name) == m.contracted.end()) made.insert(x.name);
      for (const Factor& f : m.outside)
        for (const Axis& x : g_.node(f.node).type.axes) made.insert(x.name);
      if (made == expected) return m;
    }
    return std::nullopt;
  }

  const Graph& g_;
  std::map<std::string, NodeId> contractions_;  // contractionKey -> the contraction node
  std::set<NodeId> contracted_;                  // the operands of contractions
};

}  // namespace

Graph reassociate(const Graph& graph) { return Reassociator(graph).run(); }

}  // namespace llmc
