// Fusion: siblings, kernels that read the same stored values, joined: an
// elementwise kernel into a GEMM's epilogue, a sum beside another sum.
#include "planning/fuser.h"

namespace llmc::fusion {

// An elementwise kernel left on its own (attachEpilogues found no kernel
// to join: its value is stored for a matmul) that works over the points of a
// tensor-core GEMM's output, from stored values the GEMM's epilogue reads
// too, joins that epilogue: its loads are made there already, and apart it
// would read them again and take a launch. The MLP's GELU remade in the
// backward for the weight gradient (ir/recompute.h) is such a kernel: it
// reads the stored pre-activation that the GEMM of GELU's derivative reads
// for its epilogue. The two read each value as the same node, so at the
// same positions; every member has exactly the GEMM's output axes, so that
// the epilogue makes each of its points once.
void Fuser::joinSiblingEpilogues() {
  std::vector<int> loose;  // groups of elementwise nodes alone
  for (const auto& [group, members] : members_)
    if (!members.empty() && !anchorOf_.count(group) && !matmuls_.count(group) &&
        std::none_of(members.begin(), members.end(), [&](NodeId m) { return isAnchor(g_.node(m)); }))
      loose.push_back(group);
  for (int e : loose) {
    const std::set<NodeId> members = membersOfGroup(e);
    std::set<NodeId> reads;  // what the group reads from outside: graph inputs, other kernels' values
    for (NodeId m : members)
      for (NodeId o : g_.node(m).operands)
        if (!members.count(o) && !freeNode(o)) reads.insert(o);
    for (const auto& [k, matmuls] : matmuls_) {
      if (k == e || matmuls.empty() || !sameAxesAsMatmuls(members, matmuls)) continue;
      if (!readsEachInEpilogue(k, reads)) continue;
      // Backward work stays out of the forward's kernels (forBackwardInForward).
      if (std::any_of(members.begin(), members.end(), [&](NodeId m) { return forBackwardInForward(g_.node(m), k); }))
        continue;
      if (!pathThroughOthers(e, k) && !pathThroughOthers(k, e)) {
        moveMembers(e, k);
        break;
      }
    }
  }
}

// Whether every node of `members` has the axes of each of the contractions'
// outputs, no more and no fewer.
bool Fuser::sameAxesAsMatmuls(const std::set<NodeId>& members, const std::vector<NodeId>& matmuls) const {
  for (NodeId c : matmuls) {
    const Type& out = g_.node(c).type;
    for (NodeId m : members) {
      const Type& t = g_.node(m).type;
      if (t.axes.size() != out.axes.size()) return false;
      for (const Axis& a : t.axes)
        if (const Axis* same = out.find(a.name); !same || same->size != a.size) return false;
    }
  }
  return true;
}

// Whether group k has each of `values` at the points of its output: reads
// it, made elsewhere, in an elementwise member (its epilogue), or makes it
// there itself, after its contractions or beside them but not for them (a
// prologue has the points of a contraction's operand).
bool Fuser::readsEachInEpilogue(int k, const std::set<NodeId>& values) const {
  std::set<NodeId> prologue;  // members a contraction of k reads, through members
  std::vector<NodeId> work;
  for (NodeId c : matmuls_.at(k)) work.insert(work.end(), g_.node(c).operands.begin(), g_.node(c).operands.end());
  while (!work.empty()) {
    const NodeId id = work.back();
    work.pop_back();
    if (group_[idx(id)] != k || !prologue.insert(id).second) continue;
    work.insert(work.end(), g_.node(id).operands.begin(), g_.node(id).operands.end());
  }
  for (NodeId v : values) {
    if (group_[idx(v)] == k) {
      if (prologue.count(v) || !sameAxesAsMatmuls({v}, matmuls_.at(k))) return false;
      continue;
    }
    bool read = false;
    for (NodeId c : consumers_[idx(v)])
      read = read || (group_[idx(c)] == k && !isAnchor(g_.node(c)));
    if (!read) return false;
  }
  return true;
}

// Whether a kernel that group `from` feeds leads, through kernels other
// than `to`, to `to`: merged, the two would wait for themselves. (The
// groups as a whole may not run in order yet: mergeStreams and breakCycles
// settle that later; this asks about the loop the merge would make.)
bool Fuser::pathThroughOthers(int from, int to) const {
  std::map<int, std::vector<int>> readers;
  for (const auto& [p, r] : currentEdges()) readers[p].push_back(r);
  std::vector<int> work;
  for (int r : readers[from])
    if (r != to && r != from) work.push_back(r);
  std::set<int> seen(work.begin(), work.end());
  while (!work.empty()) {
    const int g = work.back();
    work.pop_back();
    if (g == to) return true;
    for (int r : readers[g])
      if (seen.insert(r).second) work.push_back(r);
  }
  return false;
}

// Column sums of one array side by side: two kernels, each a sum over the
// same axes (a layernorm's weight and bias gradients, over the rows, both
// from the incoming gradient), that read one stored array and depend on
// neither the other, become one kernel reading it once.
void Fuser::joinSiblingSums() {
  std::map<std::pair<std::vector<std::string>, std::vector<std::pair<std::string, int64_t>>>, std::vector<int>> byShape;
  for (const auto& [group, members] : members_) {
    std::vector<NodeId> sums;
    bool plain = !members.empty() && !holdsScan(group);
    for (NodeId m : members) {
      const Node& n = g_.node(m);
      if (n.op == Op::Reduce) sums.push_back(m);
      else if (isAnchor(n)) plain = false;
    }
    if (!plain || sums.size() != 1) continue;
    const Node& sum = g_.node(sums[0]);
    if (sum.reduce != ReduceOp::Sum) continue;
    std::vector<std::string> axes = sum.axes;
    std::sort(axes.begin(), axes.end());
    std::vector<std::pair<std::string, int64_t>> kept;
    for (const Axis& a : sum.type.axes) kept.push_back({a.name, a.size});
    byShape[{axes, kept}].push_back(group);
  }
  // Each group against the later ones it shares a stored read with, in
  // order; a group that joins adds its reads, and so its own candidates.
  for (auto& [shape, groups] : byShape) {
    std::vector<std::set<NodeId>> reads(groups.size());
    std::map<NodeId, std::vector<size_t>> readers;  // a stored value -> the groups (positions) reading it
    for (size_t i = 0; i < groups.size(); ++i) {
      reads[i] = storedReads(groups[i]);
      for (NodeId v : reads[i]) readers[v].push_back(i);
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      const int a = groups[i];
      auto alive = [&](int g) { return members_.count(g) && !members_.at(g).empty(); };
      if (!alive(a)) continue;
      std::set<size_t> candidates;
      auto addCandidates = [&](const std::set<NodeId>& values, size_t after) {
        for (NodeId v : values)
          for (size_t j : readers[v])
            if (j > after) candidates.insert(j);
      };
      addCandidates(reads[i], i);
      while (!candidates.empty()) {
        const size_t j = *candidates.begin();
        candidates.erase(candidates.begin());
        const int b = groups[j];
        if (!alive(b)) continue;
        if (readsFrom(a, b) || readsFrom(b, a) || !joinWithoutLoop(membersOfGroup(b), b, a)) continue;
        reads[i].insert(reads[j].begin(), reads[j].end());
        addCandidates(reads[j], j);
      }
    }
  }
}

// The values of more than one axis that group g reads from outside it
// (through views): what a sibling may read too.
std::set<NodeId> Fuser::storedReads(int g) const {
  std::set<NodeId> out;
  for (NodeId m : membersOfGroup(g))
    for (NodeId o : g_.node(m).operands) {
      const NodeId v = throughViews(o);
      if (group_[idx(v)] != g && !freeNode(v) && g_.node(v).type.axes.size() >= 2) out.insert(v);
    }
  return out;
}

// Whether group `reader` reads a value of group `maker` directly.
bool Fuser::readsFrom(int reader, int maker) const {
  for (NodeId m : membersOfGroup(reader))
    for (NodeId o : g_.node(m).operands)
      if (group_[idx(throughViews(o))] == maker) return true;
  return false;
}

}  // namespace llmc::fusion
