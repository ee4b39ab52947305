#include "planning/fusion.h"

#include <unordered_map>

#include "planning/fuser.h"
#include "planning/row_products.h"

namespace llmc {

bool isAnchor(const Node& n) {
  return n.op == Op::Contract || n.op == Op::Reduce || n.op == Op::Gather || n.op == Op::ScatterAdd || n.op == Op::Scan;
}

// Free: no Input, anchor or view is reached from n through the nodes that
// are neither constants nor positions. Walked with a work list, each node
// once: a chain of a hundred thousand additions is no recursion that deep,
// and diamonds are no walk exponential in their number.
bool isFree(const Graph& g, const Node& n) {
  auto blocks = [](const Node& m) { return m.op == Op::Input || isAnchor(m) || isView(m); };
  auto ends = [](const Node& m) { return m.op == Op::Constant || m.op == Op::Pos; };
  if (ends(n)) return true;
  if (blocks(n)) return false;
  std::vector<NodeId> work(n.operands.begin(), n.operands.end());
  std::unordered_set<NodeId> seen(work.begin(), work.end());
  while (!work.empty()) {
    const Node& m = g.node(work.back());
    work.pop_back();
    if (ends(m)) continue;
    if (blocks(m)) return false;
    for (NodeId o : m.operands)
      if (seen.insert(o).second) work.push_back(o);
  }
  return true;
}

std::vector<char> freeNodes(const Graph& g) {
  std::vector<char> free(g.nodes.size(), 0);
  for (const Node& n : g.nodes) {  // operands come first: one pass
    if (n.op == Op::Constant || n.op == Op::Pos) free[static_cast<size_t>(n.id)] = 1;
    else if (n.op != Op::Input && !isAnchor(n) && !isView(n))
      free[static_cast<size_t>(n.id)] = std::all_of(n.operands.begin(), n.operands.end(),
                                                    [&](NodeId o) { return free[static_cast<size_t>(o)] != 0; });
  }
  return free;
}

std::vector<char> freeNodesUnlessMatrixOperands(const Graph& g) {
  std::vector<char> free = freeNodes(g);
  for (const Node& n : g.nodes)
    if (n.op == Op::Contract && isFloat(n.type.dtype))
      for (NodeId o : n.operands) {
        const Node& operand = g.node(o);
        if (operand.type.axes.size() >= 2 && operand.op != Op::Pos && operand.op != Op::Constant)
          free[static_cast<size_t>(o)] = 0;
      }
  return free;
}

bool isView(const Node& n) {
  switch (n.op) {
    case Op::Split:
    case Op::Merge:
    case Op::Rename:
    case Op::Index:
    case Op::Concat:
    case Op::Transpose:
    case Op::Broadcast:
    case Op::StopGradient: return true;
    default: return false;
  }
}

namespace fusion {

// The axes an anchor reduces.
std::vector<std::string> reducedBy(const Node& n) {
  switch (n.op) {
    case Op::Contract:
    case Op::Reduce: return n.axes;
    case Op::Gather: return {n.axes[0]};
    default: return {};
  }
}

bool reducesAlong(const Node& n, const std::string& x) {
  switch (n.op) {
    case Op::Contract:
    case Op::Reduce: return std::find(n.axes.begin(), n.axes.end(), x) != n.axes.end();
    case Op::Gather: return n.axes[0] == x;
    default: return false;
  }
}

size_t reducedCount(const Node& n) {
  switch (n.op) {
    case Op::Contract:
    case Op::Reduce: return n.axes.size();
    case Op::Gather: return 1;
    default: return 0;
  }
}

int64_t operandExtent(const Graph& g, const Node& r, const std::string& x) {
  for (NodeId o : r.operands)
    if (const Axis* a = g.node(o).type.find(x)) return a->size;
  return 0;
}

// Long by the products it sums for each output, all its axes together: a
// contraction over heads and their channels (32 x 64) is the matmul one over
// their 2048 merged channels is.
bool isLongContraction(const Graph& g, const Node& n) {
  if (n.op != Op::Contract || !isFloat(n.type.dtype)) return false;
  int64_t extent = 1;
  for (const std::string& a : n.axes) extent = std::min<int64_t>(extent * operandExtent(g, n, a), kGridPositionsCap);
  return extent > kRedoneContractionLimit;
}

// The short contraction with all of id's axes that id's chain of
// elementwise nodes and views reaches first, or -1.
NodeId remakingContraction(const Graph& g, NodeId id) {
  std::vector<NodeId> work = {id};
  std::set<NodeId> seen;
  while (!work.empty()) {
    const Node& n = g.node(work.back());
    work.pop_back();
    if (!seen.insert(n.id).second) continue;
    if (n.op == Op::Contract) {
      // A short one with every axis of the value (attention's scores, made
      // again in the stream that reads them, rather than their function
      // stored); one with fewer (a row statistic) is read like any array.
      const Type& value = g.node(id).type;
      const bool spans = std::all_of(value.axes.begin(), value.axes.end(), [&](const Axis& a) { return n.type.has(a.name); });
      if (!isLongContraction(g, n) && spans) return n.id;
      continue;
    }
    if (n.id != id && (n.op == Op::Input || isAnchor(n))) continue;
    work.insert(work.end(), n.operands.begin(), n.operands.end());
  }
  return -1;
}

bool remadeFromShortContraction(const Graph& g, NodeId id) { return remakingContraction(g, id) >= 0; }

std::vector<Kernel> Fuser::run() {
  int next = 0;
  for (const Node& n : g_.nodes)
    if (isAnchor(n)) anchorOf_[next] = n.id, join(n.id, next++, Acyclic::Known);
  attachPrologues();
  attachEpilogues(next);
  joinSiblingEpilogues();
  mergeStreams();
  if (options_.rowProducts) joinRowProducts();
  sinkIntoReaders();
  joinSiblingSums();
  separateMaximumMasks(next);
  separateScatterValues(next);
  breakCycles(next);
  return collect();
}

void Fuser::separateScatterValues(int& next) {
  for (const Node& s : g_.nodes) {
    if (s.op != Op::ScatterAdd || group_[idx(s.id)] < 0) continue;
    const int gr = group_[idx(s.id)];
    // (value, reached through a view outside the kernel): such a view the
    // scatter's launch reads from memory, so the member it shows must be
    // stored by the kernel first (seed 8969: a broadcast of a where).
    std::vector<std::pair<NodeId, bool>> work;
    for (NodeId o : s.operands) work.push_back({o, false});
    std::set<std::pair<NodeId, bool>> seen;
    bool needsReduction = false;
    while (!work.empty() && !needsReduction) {
      const auto [id, throughView] = work.back();
      work.pop_back();
      if (!seen.insert({id, throughView}).second) continue;
      const Node& m = g_.node(id);
      if (group_[idx(id)] == gr) {
        if (isAnchor(m) || throughView) needsReduction = true;
        else
          for (NodeId o : m.operands) work.push_back({o, false});
      } else if (group_[idx(id)] < 0 && viewHere(m)) {
        for (NodeId o : m.operands) work.push_back({o, true});
      }
    }
    if (needsReduction && members_[gr].size() > 1) {
      join(s.id, next++, Acyclic::Known);
      streamAxis_.erase(gr);
    }
  }
}

NodeId Fuser::maximumMasked(const Node& c, size_t side) const {
  if (c.op != Op::Compare || c.operands.size() != 2) return -1;
  const Node& m = g_.node(throughViews(c.operands[side]));
  if (m.op != Op::Reduce || m.reduce != ReduceOp::Max || m.operands.size() != 1) return -1;
  return throughViews(m.operands[0]) == throughViews(c.operands[1 - side]) ? m.id : -1;
}

void Fuser::separateMaximumMasks(int& next) {
  for (const Node& c : g_.nodes) {
    for (size_t side = 0; side < 2; ++side) {
      if (maximumMasked(c, side) < 0) continue;
      const Node& m = g_.node(throughViews(c.operands[side]));
      const NodeId x = throughViews(m.operands[0]);
      const int gx = group_[idx(x)];
      if (gx < 0) continue;
      // What in x's kernel reads x through the maximum or the mask.
      std::set<NodeId> moved;
      std::vector<NodeId> work = {m.id, c.id};
      while (!work.empty()) {
        const NodeId id = work.back();
        work.pop_back();
        const int gr = group_[idx(id)];
        if (gr >= 0 && gr != gx) continue;
        if (gr < 0 && !viewHere(g_.node(id))) continue;
        if (gr == gx && !moved.insert(id).second) continue;
        work.insert(work.end(), consumers_[idx(id)].begin(), consumers_[idx(id)].end());
      }
      if (moved.empty()) continue;
      const int after = next++;
      for (NodeId id : moved) join(id, after, Acyclic::Known);
      if (moved.count(m.id)) anchorOf_[after] = m.id;
      streamAxis_.erase(gx);
      wholeAxes_.erase(gx);
    }
  }
}

void Fuser::breakCycles(int& next) {
  for (int round = 0; round < 2; ++round) {
    const std::set<int> waiting = groupsLeftWaiting();
    if (waiting.empty()) return;
    for (int gr : waiting) {
      const std::set<NodeId> members = members_[gr];
      for (NodeId m : members) {
        if (round == 0 && isAnchor(g_.node(m))) continue;
        if (members_[gr].size() == 1) break;
        join(m, next++, Acyclic::Known);
      }
      streamAxis_.erase(gr);
      wholeAxes_.erase(gr);
    }
  }
}

std::set<int> Fuser::groupsLeftWaiting() const {
  std::map<int, Kernel> byGroup;
  for (const Node& n : g_.nodes)
    if (group_[idx(n.id)] >= 0) byGroup[group_[idx(n.id)]].nodes.push_back(n.id);
  std::set<int> left;
  for (const auto& [gr, k] : byGroup) left.insert(gr);
  for (int gr : placeableOrder(byGroup)) left.erase(gr);
  return left;
}

bool Fuser::computeViewHere(const Node& n) const {
  if (!isView(n)) return false;
  if (n.op != Op::Concat || !isFloat(n.type.dtype)) return true;
  // A concat whose parts interleave in it (an axis outside the joined one:
  // pairs stacked innermost, [.. i r:2]) and that is an output, itself or
  // through views.
  const auto joined = std::find_if(n.type.axes.begin(), n.type.axes.end(),
                                   [&](const Axis& a) { return !n.newAxes.empty() && a.name == n.newAxes[0]; });
  const bool interleaved = std::any_of(n.type.axes.begin(), joined, [](const Axis& a) { return a.size > 1; });
  if (interleaved && isOutput_.count(n.id)) return false;
  // Its readers, through other views.
  std::vector<NodeId> work = consumers_[idx(n.id)];
  std::set<NodeId> seen;
  while (!work.empty()) {
    const Node& c = g_.node(work.back());
    work.pop_back();
    if (!seen.insert(c.id).second) continue;
    if (c.op == Op::Contract && isFloat(c.type.dtype)) return false;
    if (interleaved && isOutput_.count(c.id) && isView(c)) return false;
    if (isView(c)) work.insert(work.end(), consumers_[idx(c.id)].begin(), consumers_[idx(c.id)].end());
  }
  return true;
}

std::vector<NodeId> Fuser::readersThroughViews(NodeId id) const {
  std::vector<NodeId> readers, work = consumers_[idx(id)];
  std::set<NodeId> seen;
  while (!work.empty()) {
    const NodeId c = work.back();
    work.pop_back();
    if (!seen.insert(c).second) continue;
    if (viewHere(g_.node(c))) work.insert(work.end(), consumers_[idx(c)].begin(), consumers_[idx(c)].end());
    else readers.push_back(c);
  }
  return readers;
}

// A light node whose consumers all sit in one kernel is computed there,
// unless it is an operand of a contraction: tensor cores are fed stored
// tiles (by TMA or cp.async), so a layernorm's normalisation before a
// matmul is the epilogue of the kernel that makes its statistics.
void Fuser::attachPrologues() {
  for (size_t i = g_.nodes.size(); i-- > 0;) {
    const Node& n = g_.nodes[i];
    if (!light(n) || isOutput_.count(n.id) || feedsContraction(n.id) || options_.stored.count(n.id)) continue;
    std::set<int> groups;
    for (NodeId c : consumers_[i]) groups.insert(group_[idx(c)]);
    if (groups.size() == 1 && *groups.begin() >= 0 && !readsKernelValueMoved(n, *groups.begin()))
      join(n.id, *groups.begin());
  }
}

// In the backward pass, only what storedForMatmul says; the operand chains
// the recompute pass built stay prologues.
bool Fuser::feedsContraction(NodeId id) const {
  // Of the graph and the views alone, which the fuser does not change: asked once a node.
  signed char& known = feedsContraction_[idx(id)];
  if (known >= 0) return known != 0;
  const std::vector<NodeId> readers = readersThroughViews(id);
  if (g_.node(id).adjoint) known = storedForMatmul(g_, id, readers);
  else
    known = std::any_of(readers.begin(), readers.end(), [&](NodeId c) {
      return g_.node(c).op == Op::Contract && isFloat(g_.node(c).type.dtype);
    });
  return known != 0;
}

// Whether n is backward work (a copy the recompute pass made, computed
// from forward values alone: a GELU's derivative from the MLP's
// pre-activation) that would join a forward kernel: stored there, it would
// stay alive from the forward to the backward, while where the backward
// reads it, it is remade from what the forward stored anyway.
bool Fuser::forBackwardInForward(const Node& n, int group) const {
  const auto anchor = anchorOf_.find(group);
  return n.adjoint && anchor != anchorOf_.end() && !g_.node(anchor->second).adjoint && !endsForward(group);
}

// Backward work may join a forward kernel after which the forward makes
// nothing but values over that kernel's rows or fewer axes: a loss's kernel
// (the classifier's log-sum-exp), followed by the rows' losses and their
// mean. What the backward work stores there is held across no forward work
// worth the name, and the kernel reads its inputs once for both passes (the
// loss and its gradient from one read of the logits). Every forward node
// downstream of the group's members, outside it, has axes among its anchor's.
bool Fuser::endsForward(int group) const {
  const Node& anchor = g_.node(anchorOf_.at(group));
  const std::set<NodeId>& members = members_.at(group);
  std::vector<NodeId> work(members.begin(), members.end());
  std::set<NodeId> seen(members.begin(), members.end());
  while (!work.empty()) {
    const NodeId id = work.back();
    work.pop_back();
    for (NodeId c : consumers_[idx(id)]) {
      const Node& reader = g_.node(c);
      if (reader.adjoint || !seen.insert(c).second) continue;
      for (const Axis& a : reader.type.axes)
        if (!anchor.type.has(a.name)) return false;
      work.push_back(c);
    }
  }
  return true;
}

// Whether n reads a reduction of `group` kept apart (FusionOptions::apart):
// such a kernel stores the plain sum, which its blocks may then share out
// over the reduced axis, and what reads it is a kernel of its own.
bool Fuser::readsApart(const Node& n, int group) const {
  if (options_.apart.empty()) return false;
  return std::any_of(n.operands.begin(), n.operands.end(), [&](NodeId o) {
    const NodeId value = throughViews(o);
    return options_.apart.count(value) && group_[idx(value)] == group;
  });
}

// Whether `group` reduces to a scalar (a gradient's global norm, a loss):
// it takes no epilogue. What follows would spread the scalar back over
// the axes it reduced (the gradient scaled by its norm) with all of them in
// one block, and the reduction alone is a plain sum that the whole grid
// shares (cuda_kernel_writer.h, isGridSum); scalar work after it is
// recomputed where it is read. A reduction that keeps axes (a layernorm's
// rows) spreads over those, and its epilogue stays.
bool Fuser::spreadsScalarReduction(int group) const {
  const auto anchor = anchorOf_.find(group);
  if (anchor == anchorOf_.end()) return false;
  return g_.node(anchor->second).type.axes.empty();
}

// The rest join the kernel of their latest computed operand; those computed
// from inputs and constants alone (a mask from positions) join the kernel of
// a consumer; what is left starts a kernel of its own.
void Fuser::attachEpilogues(int& next) {
  std::vector<NodeId> orphans;
  for (const Node& n : g_.nodes) {
    if (!light(n) || group_[idx(n.id)] >= 0) continue;
    // Kernels run in the order of their groups: the latest of the
    // operands' kernels is the first where every operand is ready.
    int chosen = -1;
    for (NodeId o : n.operands) chosen = std::max(chosen, group_[idx(o)]);
    // A scatter-add is complete only when every block has added its values:
    // what reads it cannot run in the same kernel.
    for (NodeId o : n.operands)
      if (g_.node(o).op == Op::ScatterAdd && group_[idx(o)] == chosen) chosen = -1;
    // A scan's launch (planning/scan_layout.h) stores the running aggregate
    // and nothing else: what follows it reads it from GMEM.
    if (chosen >= 0 && holdsScan(chosen)) chosen = -1;
    if (chosen >= 0 && spreadsScalarReduction(chosen)) chosen = -1;
    if (chosen >= 0 && forBackwardInForward(n, chosen)) chosen = -1;
    if (chosen >= 0 && readsKernelValueMoved(n, chosen)) chosen = -1;
    if (chosen >= 0 && readsApart(n, chosen)) chosen = -1;
    if (chosen >= 0 && !staysAcyclicWith(n.id, chosen)) chosen = -1;
    if (chosen >= 0) join(n.id, chosen, Acyclic::Known);
    else orphans.push_back(n.id);
  }
  // A scan's kernel takes such a node only where the scan is all that
  // reads it (through views: a prologue the scan reads renamed).
  auto prologueOfScan = [&](NodeId id, int gc) {
    const std::vector<NodeId> readers = readersThroughViews(id);
    return !isOutput_.count(id) &&
           std::all_of(readers.begin(), readers.end(), [&](NodeId r) { return group_[idx(r)] == gc; });
  };
  for (auto it = orphans.rbegin(); it != orphans.rend(); ++it) {
    // With statistics kept apart, forward values that read them (a batch
    // normalisation's centred rows) are orphans too: joined to a backward
    // reader, they would be stored there for the forward's other readers,
    // and the kernels would wait on each other in a loop (breakCycles then
    // cuts them into a kernel a node). A reader of its own pass first.
    std::vector<NodeId> readers = readersThroughViews(*it);
    if (!options_.apart.empty())
      std::stable_partition(readers.begin(), readers.end(),
                            [&](NodeId c) { return g_.node(c).adjoint == g_.node(*it).adjoint; });
    for (NodeId c : readers)
      if (int gc = group_[idx(c)]; gc >= 0 && (!holdsScan(gc) || prologueOfScan(*it, gc)) && !readsScatterIn(*it, gc) &&
                                   !feedsContraction(*it) && !options_.stored.count(*it) &&
                                   !narrowerThanMatmulIn(*it, gc) && !readsKernelValueMoved(g_.node(*it), gc) &&
                                   !readsApart(g_.node(*it), gc) &&
                                   staysAcyclicWith(*it, gc)) {
        join(*it, group_[idx(c)], Acyclic::Known);
        break;
      }
    if (group_[idx(*it)] < 0) join(*it, next++, Acyclic::Known);
  }
}

// The groups in an order in which every kernel runs after those whose
// values it reads (through views too); among the ready ones, the one whose
// first node comes first.
std::vector<int> Fuser::runOrder(const std::map<int, Kernel>& byGroup) const {
  std::vector<int> order = placeableOrder(byGroup);
  if (order.size() != byGroup.size()) throw std::logic_error("fusion made kernels that wait for each other");
  return order;
}

// Which group reads which: (producer, reader) pairs, sorted, each once. A
// node's value comes from its own group, or for a view outside every kernel
// from its operands' (a concatenation of several kernels' values). Flat
// vectors: the fusion asks this after every merge of a graph of tens of
// thousands of nodes.
std::vector<std::pair<int, int>> Fuser::groupEdges() const {
  std::vector<std::vector<int>> viewProducers(g_.nodes.size());
  auto producersOf = [&](NodeId id, auto&& visit) {
    if (const int gr = group_[idx(id)]; gr >= 0) visit(gr);
    else
      for (int p : viewProducers[idx(id)]) visit(p);
  };
  for (const Node& n : g_.nodes) {
    if (group_[idx(n.id)] >= 0 || !viewHere(n)) continue;
    std::vector<int>& mine = viewProducers[idx(n.id)];
    for (NodeId o : n.operands) producersOf(o, [&](int p) { mine.push_back(p); });
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  }
  std::vector<std::pair<int, int>> edges;
  for (const Node& n : g_.nodes) {
    const int gr = group_[idx(n.id)];
    if (gr < 0) continue;
    for (NodeId o : n.operands)
      producersOf(o, [&](int p) {
        if (p != gr) edges.push_back({p, gr});
      });
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

std::vector<int> Fuser::placeableOrder(const std::map<int, Kernel>& byGroup) const {
  const std::vector<std::pair<int, int>> edges = groupEdges();
  std::unordered_map<int, size_t> index;
  std::vector<int> groups;
  for (const auto& [gr, k] : byGroup) index.emplace(gr, groups.size()), groups.push_back(gr);
  std::vector<int> waiting(groups.size(), 0);
  std::vector<std::vector<size_t>> readers(groups.size());
  for (const auto& [p, r] : edges) {
    const auto reader = index.find(r);
    if (reader == index.end()) continue;
    ++waiting[reader->second];
    if (const auto producer = index.find(p); producer != index.end()) readers[producer->second].push_back(reader->second);
  }
  std::set<std::pair<NodeId, size_t>> ready;  // (first node, group)
  for (size_t k = 0; k < groups.size(); ++k)
    if (waiting[k] == 0) ready.insert({byGroup.at(groups[k]).nodes.front(), k});
  std::vector<int> order;
  while (!ready.empty()) {
    const size_t k = ready.begin()->second;
    ready.erase(ready.begin());
    order.push_back(groups[k]);
    for (size_t r : readers[k])
      if (--waiting[r] == 0) ready.insert({byGroup.at(groups[r]).nodes.front(), r});
  }
  return order;
}

// Whether the groups would run one after another with `merged` made one
// group, `keep`: Kahn's algorithm over the edges of the groups as they stand
// (kept until a member moves: most merges asked about are not made) with
// the merged groups' ends renamed, as runOrder places the groups, but only
// counting them: asked before every merge, it needs no order.
bool Fuser::runsInOrderMerging(const std::set<int>& merged, int keep, std::vector<std::pair<int, int>>* mergedEdges) const {
  auto into = [&](int gr) { return merged.count(gr) ? keep : gr; };
  int groups = 0;
  for (int gr : group_) groups = std::max(groups, gr + 1);
  std::vector<char> present(static_cast<size_t>(groups), 0);
  for (int gr : group_)
    if (gr >= 0) present[static_cast<size_t>(into(gr))] = 1;
  const std::vector<std::pair<int, int>>& current = currentEdges();
  std::vector<std::pair<int, int>> edges;
  edges.reserve(current.size());
  for (const auto& [p, r] : current)
    if (into(p) != into(r)) edges.push_back({into(p), into(r)});
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::vector<size_t> first(static_cast<size_t>(groups) + 1, edges.size());
  for (size_t e = edges.size(); e-- > 0;) first[static_cast<size_t>(edges[e].first)] = e;
  for (size_t g = static_cast<size_t>(groups); g-- > 0;) first[g] = std::min(first[g], first[g + 1]);
  std::vector<int> waiting(static_cast<size_t>(groups), 0);
  for (const auto& [p, r] : edges) ++waiting[static_cast<size_t>(r)];
  std::vector<int> ready;
  int left = 0;
  for (int gr = 0; gr < groups; ++gr) {
    if (!present[static_cast<size_t>(gr)]) continue;
    ++left;
    if (waiting[static_cast<size_t>(gr)] == 0) ready.push_back(gr);
  }
  while (!ready.empty()) {
    const int p = ready.back();
    ready.pop_back();
    --left;
    for (size_t e = first[static_cast<size_t>(p)]; e < edges.size() && edges[e].first == p; ++e)
      if (--waiting[static_cast<size_t>(edges[e].second)] == 0) ready.push_back(edges[e].second);
  }
  if (mergedEdges) *mergedEdges = std::move(edges);
  return left == 0;
}

void Fuser::mergeKnownEdges(std::vector<std::pair<int, int>> edges) {
  edges_ = std::move(edges);
  edgesVersion_ = versionClock_;
  edgesKnown_ = true;
}

const std::vector<std::pair<int, int>>& Fuser::currentEdges() const {
  if (!edgesKnown_ || edgesVersion_ != versionClock_) {
    edges_ = groupEdges();
    edgesVersion_ = versionClock_;
    edgesKnown_ = true;
  }
  return edges_;
}

int64_t Fuser::reducedExtent(const Node& r, const std::string& x) const {
  for (NodeId o : r.operands)
    if (const Axis* a = g_.node(o).type.find(x)) return a->size;
  return 0;
}

bool Fuser::madeFrom(NodeId v, const std::set<NodeId>& inside) const {
  std::vector<NodeId> work = {v};
  std::set<NodeId> seen;
  while (!work.empty()) {
    const NodeId n = work.back();
    work.pop_back();
    if (!seen.insert(n).second || inside.count(n) || freeNode(n)) continue;
    if (!viewHere(g_.node(n))) return false;
    work.insert(work.end(), g_.node(n).operands.begin(), g_.node(n).operands.end());
  }
  return true;
}

bool Fuser::readOutside(NodeId id, const std::set<NodeId>& inside) const {
  std::vector<NodeId> work = consumers_[idx(id)];
  std::set<NodeId> seen;
  while (!work.empty()) {
    const NodeId c = work.back();
    work.pop_back();
    if (!seen.insert(c).second || inside.count(c) || freeNode(c)) continue;
    if (!viewHere(g_.node(c)) || isOutput_.count(c)) return true;
    work.insert(work.end(), consumers_[idx(c)].begin(), consumers_[idx(c)].end());
  }
  return false;
}

namespace {

// Whether every input of `k` along `axis` has it innermost, and one does.
bool innermostInInputs(const Graph& g, const Kernel& k, const std::string& axis) {
  bool any = false;
  for (NodeId in : k.inputs) {
    const Type& t = g.node(in).type;
    if (!t.has(axis)) continue;
    if (t.axes.back().name != axis) return false;
    any = true;
  }
  return any;
}

}  // namespace

std::vector<Kernel> Fuser::collect() const {
  std::map<int, Kernel> byGroup;
  for (const Node& n : g_.nodes) {
    int gr = group_[idx(n.id)];
    if (gr < 0) continue;
    byGroup[gr].nodes.push_back(n.id);
  }
  std::vector<Kernel> kernels;
  for (int gr : runOrder(byGroup)) {
    Kernel& k = byGroup[gr];
    // The kernel's values, read through stop_gradients: one of them read
    // inside is no input, and what it passes out of the kernel is an output.
    const std::set<NodeId> inside = withStopGradients(g_, {k.nodes.begin(), k.nodes.end()});
    std::set<NodeId> inputs, leaving;
    for (auto it = inside.rbegin(); it != inside.rend(); ++it) {
      const NodeId id = *it;
      for (NodeId o : g_.node(id).operands)
        if (!inside.count(o) && !freeNode(o) && !madeFrom(o, inside)) inputs.insert(o);
      const bool leaves = isOutput_.count(id) > 0 || leaving.count(id) > 0 || readOutside(id, inside);
      if (!leaves) continue;
      if (g_.node(id).op == Op::StopGradient) leaving.insert(g_.node(id).operands[0]);
      else leaving.insert(id);
    }
    for (NodeId id : k.nodes)
      if (leaving.count(id)) k.outputs.push_back(id);
    k.inputs.assign(inputs.begin(), inputs.end());
    if (auto s = streamAxis_.find(gr); s != streamAxis_.end()) k.streamAxis = s->second;
    // Reduced axes: the stream axis if the fusion chose one, else the one
    // with the most positions; the rest are consumed whole inside a chunk.
    std::map<std::string, int64_t> reduced;
    std::vector<std::string> reducedInOrder;  // as the kernel's nodes first reduce them: no name decides
    // (A gather reads one row per index: it reduces nothing worth streaming.
    // A row product sums over the stream's rows, a group axis tiled across
    // blocks: planning/row_products.h.)
    const std::set<NodeId> nodeSet(k.nodes.begin(), k.nodes.end());
    auto rowProduct = [&](const Node& n) {
      return options_.rowProducts && isRowProduct(g_, n, k.streamAxis, [&](NodeId id) { return nodeSet.count(id) > 0; });
    };
    for (NodeId id : k.nodes)
      if (g_.node(id).op != Op::Gather && !rowProduct(g_.node(id)))
        for (const auto& a : reducedBy(g_.node(id)))
          for (NodeId o : g_.node(id).operands)
            if (const Axis* ax = g_.node(o).type.find(a)) {
              if (!reduced.count(a)) reducedInOrder.push_back(a);
              reduced[a] = ax->size;
            }
    // Otherwise the longest reduced axis streams, if the kernel streams over
    // it and does not hold it whole; of several as long, the first the
    // kernel reduces that it can stream (a running maximum's gradient
    // reduces t and t_scanned, both of T positions, and streams one).
    // Before those, one every input read along it has innermost (a batch
    // normalisation's image columns, beside its rows and batch): the threads
    // walking the stream's positions then read adjacent addresses. (Not for
    // a sum of a whole array: its launch spreads over the grid, no stream.)
    auto whole = wholeAxes_.find(gr);
    if (k.streamAxis.empty() && !reduced.empty()) {
      int64_t longest = 0;
      for (const auto& [a, size] : reduced) longest = std::max(longest, size);
      const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
      auto streamable = [&](const std::string& a) {
        const bool held = whole != wholeAxes_.end() && whole->second.count(a);
        return !held && analyzeStream(g_, members, a).streamable;
      };
      for (const std::string& a : reducedInOrder)
        if (reduced.size() > 1 && !isWholeArraySum(g_, k.outputs, members) && reduced.at(a) >= kContiguousStreamMin &&
            innermostInInputs(g_, k, a) && streamable(a)) {
          k.streamAxis = a;
          break;
        }
      for (const std::string& a : reducedInOrder) {
        if (!k.streamAxis.empty()) break;
        if (reduced.at(a) == longest && streamable(a)) k.streamAxis = a;
      }
    }
    for (const auto& [a, size] : reduced)
      if (a != k.streamAxis) k.innerAxes.push_back(a);
    k.id = static_cast<int>(kernels.size());
    const Node& last = g_.node(k.outputs.empty() ? k.nodes.back() : k.outputs.back());
    k.name = fmt::format("k{}_{}", k.id, last.name.empty() ? opName(last.op) : last.name);
    kernels.push_back(std::move(k));
  }
  return kernels;
}

}  // namespace fusion

bool storedForMatmul(const Graph& g, NodeId id, const std::vector<NodeId>& readers) {
  const Node& n = g.node(id);
  if (!n.adjoint || !isFloat(n.type.dtype) || n.op == Op::Input || isFree(g, n)) return false;
  return std::any_of(readers.begin(), readers.end(),
                     [&](NodeId r) { return g.node(r).op == Op::Contract && isFloat(g.node(r).type.dtype); }) &&
         !fusion::remadeFromShortContraction(g, id);
}

NodeId wholeArraySumOf(const Graph& g, const std::vector<NodeId>& outputs, const std::set<NodeId>& nodes) {
  auto isSum = [&](NodeId id) {
    const Node& r = g.node(id);
    return r.op == Op::Reduce && r.reduce == ReduceOp::Sum && r.type.axes.empty() && isFloat(r.type.dtype);
  };
  const auto sum = std::find_if(outputs.begin(), outputs.end(), isSum);
  if (sum == outputs.end()) return -1;
  const Node& r = g.node(*sum);
  if (std::any_of(nodes.begin(), nodes.end(), [&](NodeId id) { return id != r.id && isAnchor(g.node(id)); }))
    return -1;
  const std::vector<Axis>& summed = g.node(r.operands[0]).type.axes;
  for (NodeId o : outputs)
    if (o != r.id && g.node(o).type.axes != summed) return -1;
  return r.id;
}

int64_t wholeArraySumBlocks(const Type& summed) {
  const int64_t runs = summed.axes.empty() ? 1 : (summed.elementCount() + 7) / 8;
  return std::clamp<int64_t>((runs + 255) / 256, 1, kWholeArraySumBlocks);
}

bool isWholeArraySum(const Graph& g, const std::vector<NodeId>& outputs, const std::set<NodeId>& nodes) {
  return wholeArraySumOf(g, outputs, nodes) >= 0;
}

std::vector<Kernel> formKernels(const Graph& graph, const FusionOptions& options) {
  return fusion::Fuser(graph, options).run();
}

}  // namespace llmc
