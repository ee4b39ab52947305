#include "recompute.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "kernels.h"

namespace llmc {

namespace {

// What remaking a value costs: its own work at its unit's peak, plus having
// each operand, read or remade, whichever costs less (memoised); views cost
// what their operands cost, constants and positions nothing, inputs cannot be
// remade. A chain that reads many stored arrays (the residual's gradient
// summed over layers) costs what those reads cost. Remaking pays when it
// costs less than storing: writing the value once and reading it back.
class RemakeCost {
 public:
  RemakeCost(const Graph& g, const Target& t, const CostOptions& o)
      : g_(g), t_(t), o_(o), bandwidth_(t.level("GMEM").attainableBandwidth) {}

  bool cheaperThanStoring(NodeId v) {
    const Node& n = g_.node(v);
    return isView(n) || isFree(g_, n) || seconds(v) < 2 * storedBytes(n.type, o_) / bandwidth_;
  }

 private:
  double seconds(NodeId v) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    const Node& n = g_.node(v);
    double total = 0;
    if (n.op == Op::Input) {
      total = INFINITY;
    } else if (!isFree(g_, n)) {
      if (!isView(n)) {
        NodeWork work = nodeWork(g_, n, t_, o_);
        total = work.operations / t_.unit(work.unit).attainable;
      }
      for (NodeId operand : n.operands) {
        const Node& o = g_.node(operand);
        if (!isFree(g_, o)) total += std::min(storedBytes(o.type, o_) / bandwidth_, seconds(operand));
      }
    }
    memo_[v] = total;
    return total;
  }

  const Graph& g_;
  const Target& t_;
  const CostOptions& o_;
  const double bandwidth_;
  std::map<NodeId, double> memo_;
};

class Recomputer {
 public:
  Recomputer(const Graph& g, const Target& t, const CostOptions& o) : g_(g), cost_(g, t, o), remap_(g.nodes.size(), -1) {}

  Graph run() {
    out_.name = g_.name;
    for (const Node& n : g_.nodes) {
      Node copy = n;
      for (NodeId& operand : copy.operands)
        operand = n.adjoint && !g_.node(operand).adjoint ? materialize(operand) : remap_[idx(operand)];
      remap_[idx(n.id)] = out_.add(std::move(copy));
    }
    for (NodeId input : g_.inputs) out_.inputs.push_back(remap_[idx(input)]);
    for (const GraphOutput& o : g_.outputs) out_.outputs.push_back({o.name, remap_[idx(o.node)]});
    return out_;
  }

 private:
  static size_t idx(NodeId id) { return static_cast<size_t>(id); }

  // The node the backward pass reads for forward value v: v itself when it
  // is stored, else a copy computed again from what is stored.
  NodeId materialize(NodeId v) {
    if (auto it = copies_.find(v); it != copies_.end()) return it->second;
    const Node& n = g_.node(v);
    if (n.op == Op::Input || isFree(g_, n) || !cost_.cheaperThanStoring(v)) return remap_[idx(v)];
    Node copy = n;
    bool changed = false;
    for (NodeId& operand : copy.operands) {
      NodeId made = materialize(operand);
      changed |= made != remap_[idx(operand)];
      operand = made;
    }
    // A view of stored values is read in place.
    if (isView(n) && !changed) return remap_[idx(v)];
    copy.adjoint = true;
    NodeId id = out_.add(std::move(copy));
    copies_[v] = id;
    return id;
  }

  const Graph& g_;
  RemakeCost cost_;
  Graph out_;
  std::vector<NodeId> remap_;       // forward graph id -> id in out_
  std::map<NodeId, NodeId> copies_; // forward graph id -> its recomputed copy in out_
};

// A value read by reductions over different axes cannot be made inside both
// of their streams: one kernel would have to store it for the other (the
// gradient of attention's scores, read by dK's sum over the queries and dQ's
// sum over the keys). When making it costs less than writing and reading it,
// each group of readers that reduce over the same axes gets its own copy, so
// that every stream recomputes it on chip.
class StreamSplitter {
 public:
  StreamSplitter(const Graph& g, const Target& t, const CostOptions& o)
      : g_(g), cost_(g, t, o), nodes_(g.nodes), readers_(g.nodes.size()), copiesAfter_(g.nodes.size()) {}

  Graph run() {
    for (const Node& n : g_.nodes)
      for (NodeId operand : n.operands) readers_[idx(operand)].push_back(n.id);
    for (const GraphOutput& o : g_.outputs) outputs_.insert(o.node);
    keys_.resize(g_.nodes.size());
    for (size_t i = g_.nodes.size(); i-- > 0;) split(static_cast<NodeId>(i));
    return renumbered();
  }

 private:
  static size_t idx(NodeId id) { return static_cast<size_t>(id); }

  // The node of g_ that `id` is or copies.
  NodeId originalOf(NodeId id) const {
    return idx(id) < g_.nodes.size() ? id : copiedFrom_[idx(id) - g_.nodes.size()];
  }

  // Where a reader leads: the axes it reduces and where its result goes (a
  // contraction over d copied for two streams leads to both), or (not
  // reducing) where its own readers lead.
  std::string keyOf(NodeId reader) const {
    const Node& n = nodes_[idx(reader)];
    if ((n.op == Op::Contract || n.op == Op::Reduce) && !n.axes.empty()) {
      std::string key;
      for (const auto& a : n.axes) key += a + " ";
      return key + "-> " + keys_[idx(reader)];
    }
    return keys_[idx(reader)];
  }

  void split(NodeId v) {
    const Node& n = nodes_[idx(v)];
    std::map<std::string, std::vector<NodeId>> byKey;
    for (NodeId r : readers_[idx(v)]) byKey[keyOf(r)].push_back(r);
    if (outputs_.count(v)) byKey["@output"];
    // Only the backward's values are split: the forward's readers of one
    // value reduce over one axis already (its streams were planned whole).
    // A value stored once for long matmuls (dlogits) is read as stored
    // tiles by every one of them: a copy would only store it twice.
    std::vector<NodeId> readers;  // in g_'s numbering: a copy reads as its original
    for (NodeId r : readers_[idx(v)]) readers.push_back(originalOf(r));
    const bool movable = n.adjoint && n.op != Op::Input && !isFree(g_, n) && n.op != Op::Gather &&
                         n.op != Op::ScatterAdd && !storedForMatmul(g_, originalOf(v), readers);
    if (byKey.size() < 2 || !movable || !cost_.cheaperThanStoring(v)) {
      keys_[idx(v)] = byKey.size() == 1 ? byKey.begin()->first : "@" + std::to_string(v);
      return;
    }
    // The readers of the first group keep v; every other group gets a copy.
    auto group = byKey.begin();
    keys_[idx(v)] = group->first;
    for (++group; group != byKey.end(); ++group) {
      Node copy = n;
      copy.id = static_cast<NodeId>(nodes_.size());
      for (NodeId r : group->second) {
        for (NodeId& operand : nodes_[idx(r)].operands)
          if (operand == v) operand = copy.id;
        std::erase(readers_[idx(v)], r);
      }
      for (NodeId operand : copy.operands) readers_[idx(operand)].push_back(copy.id);
      readers_.push_back(group->second);
      keys_.push_back(group->first);
      copiesAfter_[idx(v)].push_back(copy.id);
      copiedFrom_.push_back(originalOf(v));
      nodes_.push_back(std::move(copy));
    }
  }

  // The graph in topological order: each copy right after the node it copies
  // (its operands come before that node; copies of them right after theirs).
  Graph renumbered() const {
    Graph out;
    out.name = g_.name;
    std::vector<NodeId> newId(nodes_.size(), -1);
    auto place = [&](NodeId id) {
      Node n = nodes_[idx(id)];
      for (NodeId& operand : n.operands) operand = newId[idx(operand)];
      newId[idx(id)] = out.add(std::move(n));
    };
    for (const Node& n : g_.nodes) {
      place(n.id);
      for (NodeId copy : copiesAfter_[idx(n.id)]) place(copy);
    }
    for (NodeId input : g_.inputs) out.inputs.push_back(newId[idx(input)]);
    for (const GraphOutput& o : g_.outputs) out.outputs.push_back({o.name, newId[idx(o.node)]});
    return out;
  }

  const Graph& g_;
  RemakeCost cost_;
  std::vector<Node> nodes_;                     // the graph's nodes, then the copies
  std::vector<std::vector<NodeId>> readers_;    // per node (copies included)
  std::vector<std::string> keys_;               // per node: where its readers lead
  std::vector<std::vector<NodeId>> copiesAfter_;  // per original node: its copies
  std::vector<NodeId> copiedFrom_;  // per copy (numbered after g_'s nodes): the node of g_ it copies
  std::set<NodeId> outputs_;
};

}  // namespace

Graph recompute(const Graph& graph, const Target& target, const CostOptions& options) {
  Graph remade = Recomputer(graph, target, options).run();
  return StreamSplitter(remade, target, options).run();
}

}  // namespace llmc
