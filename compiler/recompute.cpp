#include "recompute.h"

#include <map>

#include "kernels.h"

namespace llmc {

namespace {

class Recomputer {
 public:
  Recomputer(const Graph& g, const Target& t, const CostOptions& o)
      : g_(g), t_(t), o_(o), remap_(g.nodes.size(), -1) {}

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
    if (n.op == Op::Input || isFree(g_, n) || (!isView(n) && !decide(v).recompute)) return remap_[idx(v)];
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

  struct Decision {
    bool recompute = false;
    double seconds = 0;  // what the backward pays to have the value: a read, or the recomputation
  };

  // Recomputing costs the node's work at its unit's peak plus having its
  // operands (each read, or itself recomputed); storing costs writing the
  // result once and reading it back. Views cost what their operand costs.
  Decision decide(NodeId v) {
    if (auto it = decisions_.find(v); it != decisions_.end()) return it->second;
    const Node& n = g_.node(v);
    const double bandwidth = t_.level("GMEM").attainableBandwidth;
    const double read = storedBytes(n.type, o_) / bandwidth;
    Decision d;
    if (n.op == Op::Input) {
      d = {false, read};
    } else if (isFree(g_, n)) {
      d = {true, 0};
    } else {
      NodeWork work = nodeWork(g_, n, t_, o_);
      double recompute = isView(n) ? 0 : work.operations / t_.unit(work.unit).attainable;
      for (NodeId operand : n.operands) recompute += decide(operand).seconds;
      if (isView(n)) d = {true, recompute};
      else if (recompute < 2 * read) d = {true, recompute};
      else d = {false, read};
    }
    decisions_[v] = d;
    return d;
  }

  const Graph& g_;
  const Target& t_;
  const CostOptions& o_;
  Graph out_;
  std::vector<NodeId> remap_;       // forward graph id -> id in out_
  std::map<NodeId, NodeId> copies_; // forward graph id -> its recomputed copy in out_
  std::map<NodeId, Decision> decisions_;
};

}  // namespace

Graph recompute(const Graph& graph, const Target& target, const CostOptions& options) {
  return Recomputer(graph, target, options).run();
}

}  // namespace llmc
