#include "planning/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_set>

#include "analysis/streamability.h"

namespace llmc {

bool isAnchor(const Node& n) {
  return n.op == Op::Contract || n.op == Op::Reduce || n.op == Op::Gather || n.op == Op::ScatterAdd;
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

namespace {

// A reduced axis at most this long may be held whole in a block instead of
// streamed (a row of 8192 f32 is 32 KiB).
constexpr int64_t kWholeAxisLimit = 8192;

// The longest axis a contraction may reduce inside another reduction's
// stream, recomputed for each of its chunks.
constexpr int64_t kRedoneContractionLimit = 256;

// The axes an anchor reduces.
std::vector<std::string> reducedBy(const Node& n) {
  switch (n.op) {
    case Op::Contract:
    case Op::Reduce: return n.axes;
    case Op::Gather: return {n.axes[0]};
    default: return {};
  }
}

int64_t operandExtent(const Graph& g, const Node& r, const std::string& x) {
  for (NodeId o : r.operands)
    if (const Axis* a = g.node(o).type.find(x)) return a->size;
  return 0;
}

bool isLongContraction(const Graph& g, const Node& n) {
  return n.op == Op::Contract && isFloat(n.type.dtype) &&
         std::any_of(n.axes.begin(), n.axes.end(),
                     [&](const std::string& a) { return operandExtent(g, n, a) > kRedoneContractionLimit; });
}

// Whether id's chain of elementwise nodes and views reaches a short
// contraction: a value the recompute pass remakes inside a stream.
bool remadeFromShortContraction(const Graph& g, NodeId id) {
  std::vector<NodeId> work = {id};
  std::set<NodeId> seen;
  while (!work.empty()) {
    const Node& n = g.node(work.back());
    work.pop_back();
    if (!seen.insert(n.id).second) continue;
    if (n.op == Op::Contract) {
      if (!isLongContraction(g, n)) return true;
      continue;
    }
    if (n.id != id && (n.op == Op::Input || isAnchor(n))) continue;
    work.insert(work.end(), n.operands.begin(), n.operands.end());
  }
  return false;
}

class Fuser {
 public:
  Fuser(const Graph& g, const FusionOptions& options)
      : g_(g), options_(options), free_(freeNodes(g)), group_(g.nodes.size(), -1), consumers_(g.nodes.size()) {
    for (const Node& n : g.nodes)
      for (NodeId o : n.operands) consumers_[static_cast<size_t>(o)].push_back(n.id);
    for (const auto& o : g.outputs) isOutput_.insert(o.node);
    // Nodes that compute the same as another (copies the recompute pass made).
    using Signature = std::tuple<Op, std::vector<NodeId>, std::vector<std::string>, std::vector<std::pair<std::string, int64_t>>>;
    std::map<Signature, std::vector<NodeId>> same;
    for (const Node& n : g.nodes) {
      std::vector<std::pair<std::string, int64_t>> axes;
      for (const Axis& a : n.type.axes) axes.push_back({a.name, a.size});
      same[{n.op, n.operands, n.axes, axes}].push_back(n.id);
    }
    for (const auto& [key, nodes] : same)
      if (nodes.size() > 1)
        for (NodeId n : nodes) twins_[n] = nodes;
    for (const Node& n : g.nodes) viewHere_.push_back(computeViewHere(n));  // asked for every node, many times
  }

  std::vector<Kernel> run() {
    int next = 0;
    for (const Node& n : g_.nodes)
      if (isAnchor(n)) anchorOf_[next] = n.id, join(n.id, next++, Acyclic::Known);
    attachPrologues();
    attachEpilogues(next);
    mergeStreams();
    return collect();
  }

 private:
  static size_t idx(NodeId id) { return static_cast<size_t>(id); }
  bool freeNode(NodeId id) const { return free_[idx(id)] != 0; }
  bool light(const Node& n) const { return n.op != Op::Input && !freeNode(n.id) && !viewHere(n) && !isAnchor(n); }

  // A view, read through by the kernels that use it; except a concat that a
  // long contraction reads (the qkv projection's gradients, dq, dk and dv in
  // three layouts): the tensor cores take one strided array, so the concat is
  // computed, its parts copied into one stored array.
  bool viewHere(const Node& n) const { return viewHere_[idx(n.id)] != 0; }
  bool computeViewHere(const Node& n) const {
    if (!isView(n)) return false;
    if (n.op != Op::Concat || !isFloat(n.type.dtype)) return true;
    // Its readers, through other views.
    std::vector<NodeId> work = consumers_[idx(n.id)];
    std::set<NodeId> seen;
    while (!work.empty()) {
      const Node& c = g_.node(work.back());
      work.pop_back();
      if (!seen.insert(c.id).second) continue;
      if (isLongContraction(g_, c)) return false;
      if (isView(c)) work.insert(work.end(), consumers_[idx(c.id)].begin(), consumers_[idx(c.id)].end());
    }
    return true;
  }

  // A light node whose consumers all sit in one kernel is computed there,
  // unless it is an operand of a contraction: tensor cores are fed stored
  // tiles (by TMA or cp.async), so a layernorm's normalisation before a
  // matmul is the epilogue of the kernel that makes its statistics.
  void attachPrologues() {
    for (size_t i = g_.nodes.size(); i-- > 0;) {
      const Node& n = g_.nodes[i];
      if (!light(n) || isOutput_.count(n.id) || feedsContraction(n.id) || options_.stored.count(n.id)) continue;
      std::set<int> groups;
      for (NodeId c : consumers_[i]) groups.insert(group_[idx(c)]);
      if (groups.size() == 1 && *groups.begin() >= 0) join(n.id, *groups.begin());
    }
  }

  // In the backward pass, only what storedForMatmul says; the operand chains
  // the recompute pass built stay prologues.
  bool feedsContraction(NodeId id) const {
    if (g_.node(id).adjoint) return storedForMatmul(g_, id, consumers_[idx(id)]);
    return std::any_of(consumers_[idx(id)].begin(), consumers_[idx(id)].end(), [&](NodeId c) {
      return g_.node(c).op == Op::Contract && isFloat(g_.node(c).type.dtype);
    });
  }

  // Whether n is backward work (a copy the recompute pass made, computed
  // from forward values alone: a GELU's derivative from the MLP's
  // pre-activation) that would join a forward kernel: stored there, it would
  // stay alive from the forward to the backward, while where the backward
  // reads it, it is remade from what the forward stored anyway.
  bool forBackwardInForward(const Node& n, int group) const {
    const auto anchor = anchorOf_.find(group);
    return n.adjoint && anchor != anchorOf_.end() && !g_.node(anchor->second).adjoint;
  }

  // Whether `group` reduces to a scalar (a gradient's global norm, a loss):
  // it takes no epilogue. What follows would spread the scalar back over
  // the axes it reduced (the gradient scaled by its norm) with all of them in
  // one block, and the reduction alone is a plain sum that the whole grid
  // shares (cuda_kernel_writer.h, isGridSum); scalar work after it is
  // recomputed where it is read. A reduction that keeps axes (a layernorm's
  // rows) spreads over those, and its epilogue stays.
  bool spreadsScalarReduction(int group) const {
    const auto anchor = anchorOf_.find(group);
    if (anchor == anchorOf_.end()) return false;
    return g_.node(anchor->second).type.axes.empty();
  }

  // The rest join the kernel of their latest computed operand; those computed
  // from inputs and constants alone (a mask from positions) join the kernel of
  // a consumer; what is left starts a kernel of its own.
  void attachEpilogues(int& next) {
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
      if (chosen >= 0 && spreadsScalarReduction(chosen)) chosen = -1;
      if (chosen >= 0 && forBackwardInForward(n, chosen)) chosen = -1;
      if (chosen >= 0 && !staysAcyclicWith(n.id, chosen)) chosen = -1;
      if (chosen >= 0) join(n.id, chosen, Acyclic::Known);
      else orphans.push_back(n.id);
    }
    for (auto it = orphans.rbegin(); it != orphans.rend(); ++it) {
      for (NodeId c : consumers_[idx(*it)])
        if (int gc = group_[idx(c)]; gc >= 0 && !readsScatterIn(*it, gc) && !feedsContraction(*it) &&
                                     !narrowerThanMatmulIn(*it, gc) &&
                                     staysAcyclicWith(*it, gc)) {
          join(*it, group_[idx(c)], Acyclic::Known);
          break;
        }
      if (group_[idx(*it)] < 0) join(*it, next++, Acyclic::Known);
    }
  }

  // Whether the nodes `inKernel` accepts, all with ids from `first` to
  // `last`, can run as one kernel: no path leaves them and comes back
  // (through another kernel that reads one of their values and makes one they
  // read). Views and free nodes are read through, not kernels of their own.
  // Such a path runs between the kernel's first and last node (the graph is in
  // topological order): only those are walked, so that growing a kernel node
  // by node along a chain costs the chain's length, not its square.
  template <class InKernel>
  bool staysAcyclic(InKernel inKernel, NodeId first, NodeId last) const {
    enum : char { Unrelated, KernelValue, After };  // After: depends on the kernel through another kernel
    std::vector<char> state(idx(last - first) + 1, Unrelated);
    auto stateOf = [&](NodeId o) { return o < first ? static_cast<char>(Unrelated) : state[idx(o - first)]; };
    for (NodeId id = first; id <= last; ++id) {
      const Node& n = g_.node(id);
      bool fromAfter = false, fromKernel = false;
      for (NodeId o : n.operands) {
        fromAfter = fromAfter || stateOf(o) == After;
        fromKernel = fromKernel || stateOf(o) == KernelValue;
      }
      char& s = state[idx(id - first)];
      if (inKernel(n.id)) {
        if (fromAfter) return false;
        s = KernelValue;
      } else if (viewHere(n)) {
        s = fromAfter ? After : fromKernel ? KernelValue : Unrelated;
      } else if (!freeNode(n.id)) {
        s = fromAfter || fromKernel ? After : Unrelated;
      }
    }
    return true;
  }

  // staysAcyclic for node n joining `group`. A group known to stay acyclic
  // (verified_) gains a path out and back only through n: one from n out and
  // into the group, or from the group out and to n. Those are walked from n
  // alone, so that a kernel growing node by node along a chain costs the
  // chain's length, not its square. Otherwise the whole span is walked.
  bool staysAcyclicWith(NodeId n, int group) const {
    const auto members = members_.find(group);
    if (members == members_.end() || members->second.empty()) return true;
    const NodeId first = std::min(n, *members->second.begin()), last = std::max(n, *members->second.rbegin());
    if (!verified_.count(group))
      return staysAcyclic([&](NodeId m) { return m == n || group_[idx(m)] == group; }, first, last);
    return !pathThroughAnotherKernel(n, group, last, /*forward=*/true) &&
           !pathThroughAnotherKernel(n, group, first, /*forward=*/false);
  }

  // Whether a path runs from n into `group` (forward, through ids up to
  // `bound`) or from `group` to n (backward, down to `bound`) through at least
  // one node that another kernel computes: a node that is not a view (views
  // are read through); free nodes end a path (each kernel makes its own).
  bool pathThroughAnotherKernel(NodeId n, int group, NodeId bound, bool forward) const {
    std::vector<std::pair<NodeId, bool>> work = {{n, false}};  // node, and whether the path passed another kernel
    std::set<std::pair<NodeId, bool>> seen;
    while (!work.empty()) {
      const auto [id, passed] = work.back();
      work.pop_back();
      for (NodeId m : forward ? consumers_[idx(id)] : g_.node(id).operands) {
        if (forward ? m > bound : m < bound) continue;
        if (group_[idx(m)] == group) {
          if (passed) return true;
          continue;
        }
        if (freeNode(m)) continue;
        const bool through = passed || !viewHere(g_.node(m));
        if (seen.insert({m, through}).second) work.push_back({m, through});
      }
    }
    return false;
  }

  bool readsScatterIn(NodeId n, int group) const {
    return std::any_of(g_.node(n).operands.begin(), g_.node(n).operands.end(), [&](NodeId o) {
      return g_.node(o).op == Op::ScatterAdd && group_[idx(o)] == group;
    });
  }

  // A reduction over another, long axis whose result lacks an axis of r's
  // would be redone for every tile of that axis inside x's stream: it stays
  // a kernel of its own (the MLP's two matmuls; attention's row sums over
  // the keys beside the stream over the queries). The classifier's logits
  // are not redone (its loss has only their rows); attention's q·k over
  // d = 64 is short enough to redo.
  bool redoneInside(NodeId m, const Node& r, const std::string& x) const {
    const Node& n = g_.node(m);
    if ((n.op != Op::Contract && n.op != Op::Reduce) || m == r.id) return false;
    bool redone = std::any_of(r.type.axes.begin(), r.type.axes.end(), [&](const Axis& a) { return !n.type.has(a.name); });
    return redone && std::any_of(n.axes.begin(), n.axes.end(), [&](const std::string& a) {
             return a != x && reducedExtent(n, a) > kRedoneContractionLimit;
           });
  }

  // A long float contraction whose output runs along x (the classifier's
  // logits, 768 channels per score, along the vocabulary) is a matmul for the
  // tensor cores, which make whole output tiles: their epilogue is elementwise
  // and cannot carry a reduction along the tile's columns across blocks, and
  // on CUDA cores its chunks would cost the GEMM itself. It stays a kernel of
  // its own, its output stored; the reduction over x reads it. (Attention's
  // q·k over d = 64 is short: its scores are made inside the stream.)
  bool matmulAlong(NodeId m, const std::string& x) const {
    const Node& n = g_.node(m);
    if (n.op != Op::Contract || !isFloat(n.type.dtype) || !n.type.has(x)) return false;
    return std::any_of(n.axes.begin(), n.axes.end(),
                       [&](const std::string& a) { return reducedExtent(n, a) > kRedoneContractionLimit; });
  }

  // Whether n lacks an axis of a long matmul in `group`: joining it, n would
  // be made per row (a layernorm's statistics remade for its backward) in a
  // tensor-core GEMM's epilogue, which works per output point.
  bool narrowerThanMatmulIn(NodeId n, int group) const {
    const Type& t = g_.node(n).type;
    const auto matmuls = matmuls_.find(group);
    if (matmuls == matmuls_.end()) return false;
    for (NodeId m : matmuls->second) {
      const Node& c = g_.node(m);
      if (std::any_of(c.type.axes.begin(), c.type.axes.end(), [&](const Axis& a) { return !t.has(a.name); }))
        return true;
    }
    return false;
  }

  // Whether r is a long matmul (for the tensor cores, which take stored
  // tiles) and its operand o a value it must read stored: a layernorm's
  // output, not taken into r's stream as a normalised contraction on CUDA
  // cores. An operand remade from a short contraction (attention's
  // probabilities, from q·k over 64 channels) is streamed with it: that is
  // flash attention.
  bool storedForTensorCores(const Node& r, NodeId o) const {
    if (!isLongContraction(g_, r)) return false;
    auto known = remadeFromShort_.find(o);
    if (known == remadeFromShort_.end()) known = remadeFromShort_.emplace(o, remadeFromShortContraction(g_, o)).first;
    return !known->second;
  }

  // Whether a member is a backward operand that feedsContraction stores
  // (dlogits): a stream must not take it back in as a prologue.
  bool holdsStoredBackwardOperand(int group) const {
    for (NodeId m : membersOfGroup(group))
      if (g_.node(m).adjoint && feedsContraction(m)) return true;
    return false;
  }

  // A contraction over channels of two operands both along x, not over x
  // (attention's row term dO·O of the softmax's gradient, along the queries)
  // is the same for every row tile of x's stream: made inside it, it would be
  // redone for each, and a stream on the tensor cores takes only scores of an
  // operand across x against one along it. It stays a kernel of its own.
  bool positionContraction(NodeId m, const std::string& x) const {
    const Node& n = g_.node(m);
    return n.op == Op::Contract && !n.axes.empty() && n.type.has(x) &&
           std::find(n.axes.begin(), n.axes.end(), x) == n.axes.end() &&
           std::all_of(n.operands.begin(), n.operands.end(), [&](NodeId o) { return g_.node(o).type.has(x); });
  }

  bool redoneInStream(NodeId m, const Node& r, const std::string& x) const {
    return redoneInside(m, r, x) || matmulAlong(m, x) || positionContraction(m, x);
  }

  bool holdsRedoneWork(int group, const Node& r, const std::string& x) const {
    for (NodeId m : membersOfGroup(group))
      if (redoneInStream(m, r, x)) return true;
    return false;
  }

  // Whether c computes what a member already does: a copy the recompute
  // pass made for another stream (CSE leaves no other duplicates), which
  // must stay out of this kernel.
  bool copiesAMember(NodeId c, const std::set<NodeId>& members) const {
    auto twins = twins_.find(c);
    if (twins == twins_.end()) return false;
    return std::any_of(twins->second.begin(), twins->second.end(), [&](NodeId m) { return m != c && members.count(m); });
  }

  bool reducesIn(int group, const std::string& x) const {
    for (NodeId m : membersOfGroup(group)) {
      const auto axes = reducedBy(g_.node(m));
      if (std::find(axes.begin(), axes.end(), x) != axes.end()) return true;
    }
    return false;
  }

  // Whether `group` makes only `o`, a sum or maximum over x (one axis) of
  // elementwise work on what it reads: no contraction, nothing else stored.
  bool isStatisticOf(int group, NodeId o, const std::string& x) const {
    const Node& n = g_.node(o);
    if (n.op != Op::Reduce || n.axes != std::vector<std::string>{x}) return false;
    for (NodeId m : membersOfGroup(group)) {
      const Node& member = g_.node(m);
      if (m != o && (isAnchor(member) || member.op == Op::Contract)) return false;
      for (NodeId c : consumers_[idx(m)])
        if (m != o && group_[idx(c)] != group && !freeNode(c)) return false;
    }
    return true;
  }

  // The value a chain of one-operand views (renames, stop_gradients) shows.
  NodeId throughViews(NodeId id) const {
    while (isView(g_.node(id)) && g_.node(id).operands.size() == 1) id = g_.node(id).operands[0];
    return id;
  }

  // Whether every value group `from` reads along x from outside is read by
  // group `by` too (through views: the same stored array).
  bool readsAlongWithin(int from, int by, const std::string& x) const {
    std::set<NodeId> readBy;
    for (NodeId m : membersOfGroup(by))
      for (NodeId o : g_.node(m).operands) readBy.insert(throughViews(o));
    const std::set<NodeId>& inside = membersOfGroup(from);
    for (NodeId m : inside)
      for (NodeId o : g_.node(m).operands)
        if (!inside.count(o) && g_.node(o).type.has(x) && !freeNode(o) && !readBy.count(throughViews(o)))
          return false;
    return true;
  }

  // The nodes of one group (no copy: it is read for every operand of every
  // reduction, in every round of mergeStreams).
  const std::set<NodeId>& membersOfGroup(int group) const {
    static const std::set<NodeId> none;
    auto it = members_.find(group);
    return it == members_.end() ? none : it->second;
  }

  std::set<NodeId> membersOf(const std::set<int>& groups) const {
    std::set<NodeId> out;
    for (int group : groups)
      if (auto it = members_.find(group); it != members_.end()) out.insert(it->second.begin(), it->second.end());
    return out;
  }

  // Puts node `id` in `group` (the only way group_ changes, so that members_
  // follows it).
  // Whether a group is known to run as one kernel (staysAcyclic) after a
  // join: Known where the caller checked it (or the group is the node alone),
  // Unknown where it did not (a prologue).
  enum class Acyclic { Unknown, Known };

  void join(NodeId id, int group, Acyclic acyclic = Acyclic::Unknown) {
    int& current = group_[idx(id)];
    if (current >= 0) {
      members_[current].erase(id);
      auto& matmuls = matmuls_[current];
      matmuls.erase(std::remove(matmuls.begin(), matmuls.end(), id), matmuls.end());
      verified_.erase(current);  // a node taken out may have been a path's only way back in
    }
    current = group;
    if (group < 0) return;
    members_[group].insert(id);
    if (isLongContraction(g_, g_.node(id))) matmuls_[group].push_back(id);
    if (acyclic == Acyclic::Known) verified_.insert(group);
    else verified_.erase(group);
  }

  // Every member of group `from` into group `to`.
  void moveMembers(int from, int to) {
    auto it = members_.find(from);
    if (it == members_.end()) return;
    std::set<NodeId> moved = std::move(it->second);
    members_.erase(it);
    for (NodeId m : moved) group_[idx(m)] = to;
    members_[to].insert(moved.begin(), moved.end());
    if (auto matmuls = matmuls_.find(from); matmuls != matmuls_.end()) {
      matmuls_[to].insert(matmuls_[to].end(), matmuls->second.begin(), matmuls->second.end());
      matmuls_.erase(from);
    }
  }

  // Whether `group` is a reduction over several axes at once (a loss summed
  // over every axis): it joins no stream, which would be left no axis to
  // spread over blocks.
  bool reducesSeveralAxes(int group) const {
    const auto anchor = anchorOf_.find(group);
    return anchor != anchorOf_.end() && reducedBy(g_.node(anchor->second)).size() > 1;
  }

  // Adds to `groups` (whose nodes are `members`) every kernel that reduces
  // over x a value of theirs along x, until none is left. Each round looks
  // only at the consumers of the members the last round added: a consumer
  // refused once stays refused (what refuses it is fixed, or grows with the
  // members), so the rounds find what rescanning every member would, in time
  // linear in what they add instead of in that times the number of rounds
  // (the residual stream chains every layer's kernels over the channels).
  void growAlong(std::set<int>& groups, std::set<NodeId>& members, const std::string& x) const {
    std::vector<NodeId> fresh(members.begin(), members.end());
    while (!fresh.empty()) {
      std::vector<int> added;
      for (NodeId m : fresh) {
        if (!g_.node(m).type.has(x)) continue;
        for (NodeId c : consumers_[idx(m)]) {
          int gc = group_[idx(c)];
          if (gc < 0 || groups.count(gc) || copiesAMember(c, members) || storedForTensorCores(g_.node(c), m))
            continue;
          if (reducesSeveralAxes(gc)) continue;
          const auto axes = reducedBy(g_.node(c));
          if (std::find(axes.begin(), axes.end(), x) != axes.end() ||
              (!isAnchor(g_.node(c)) && g_.node(c).type.has(x) && reducesIn(gc, x))) {
            groups.insert(gc);
            added.push_back(gc);
          }
        }
      }
      // The next round sees this round's kernels as members (as a rescan of
      // membersOf(groups) would).
      fresh.clear();
      for (int gc : added)
        for (NodeId m : members_.at(gc))
          if (members.insert(m).second) fresh.push_back(m);
    }
  }

  // A reduction over x merges with the kernels that make the values it
  // reduces, and with the other reductions over x of those values, when the
  // union streams over x.
  void mergeStreams() {
    bool changed = true;
    while (changed) {
      changed = false;
      for (const Node& r : g_.nodes) {
        // A reduction over several axes at once (a loss summed over every
        // axis) stays a kernel of its own: fused into the kernels it reads,
        // it would leave them nothing to spread over blocks.
        if (!isAnchor(r) || reducedBy(r).size() != 1 || options_.unstreamed.count(r.id)) continue;
        for (const std::string& x : reducedBy(r)) {
          // The kernels that make what r's kernel reads along x (r's operands,
          // and those of its prologue).
          std::set<int> groups = {group_[idx(r.id)]};
          for (NodeId m : membersOfGroup(group_[idx(r.id)]))
            for (NodeId o : g_.node(m).operands)
              if (g_.node(o).type.has(x) && group_[idx(o)] >= 0 && !reducesSeveralAxes(group_[idx(o)]) &&
                  !holdsRedoneWork(group_[idx(o)], r, x) &&
                  !holdsStoredBackwardOperand(group_[idx(o)]) && !storedForTensorCores(r, o) &&
                  !copiesAMember(r.id, membersOfGroup(group_[idx(o)])))
                groups.insert(group_[idx(o)]);
          // A statistic over x of what r's kernel reads along x (the maximum
          // of stored logits, which the sum of exp(logits - max) reads with
          // them): one stream makes both, the sum rescaled as the maximum
          // moves, instead of a second pass over the array.
          for (NodeId m : membersOfGroup(group_[idx(r.id)]))
            for (NodeId read : g_.node(m).operands) {
              const NodeId o = throughViews(read);
              const int go = group_[idx(o)];
              if (go >= 0 && !groups.count(go) && g_.node(o).adjoint == r.adjoint &&
                  isStatisticOf(go, o, x) && readsAlongWithin(go, group_[idx(r.id)], x))
                groups.insert(go);
            }
          // Every other reduction over x of a value in those kernels, with the
          // kernels between (the softmax's normaliser feeding the contraction).
          std::set<NodeId> members = membersOf(groups);
          growAlong(groups, members, x);
          if (groups.size() < 2) continue;
          // Streamed over x with an accumulator; or, where the axis is short
          // enough to hold whole in a block (a layernorm's channels), with x
          // taken whole and no stream at all.
          // A sum to one value takes in no other reduction (a mean loss over
          // rows of a log-sum-exp, or of a sum over channels): the kernel would
          // have no axis left to spread over blocks and run in one. Apart, the
          // rows' kernel spreads over the grid, and the sum of its results is
          // a grid-wide sum (isWholeArraySum).
          if (r.type.axes.empty() && std::any_of(members.begin(), members.end(), [&](NodeId m) {
                return m != r.id && isAnchor(g_.node(m));
              }))
            continue;
          bool streams = analyzeStream(g_, members, x).streamable;
          // Holding x whole suits statistics over a short axis (a layernorm),
          // not kernels with contractions: those are matmuls, tiled on their own.
          bool contracts = std::any_of(members.begin(), members.end(),
                                       [&](NodeId m) { return g_.node(m).op == Op::Contract; });
          if (!streams && (reducedExtent(r, x) > kWholeAxisLimit || contracts)) continue;
          // Nothing may be redone for every tile of r's kernel (redoneInside).
          if (std::any_of(members.begin(), members.end(), [&](NodeId m) { return redoneInStream(m, r, x); }))
            continue;
          if (!staysAcyclic([&](NodeId m) { return members.count(m) > 0; }, *members.begin(), *members.rbegin()))
            continue;
          int keep = *groups.begin();
          std::map<int, std::set<NodeId>> membersBefore;
          std::map<int, std::vector<NodeId>> matmulsBefore;
          for (int gr : groups) membersBefore[gr] = members_[gr], matmulsBefore[gr] = matmuls_[gr];
          const bool keepVerified = verified_.count(keep) > 0;
          for (int gr : groups)
            if (gr != keep) moveMembers(gr, keep);
          // staysAcyclic sees the merged kernel's own paths; the kernels
          // around it can still close a loop through it (an RMSNorm's
          // gradient: its statistics' kernel, the data gradient's and the
          // weight gradients' stream). Such a merge is taken back.
          if (!runsInOrder()) {
            for (const auto& [gr, nodes] : membersBefore) {
              members_[gr] = nodes;
              matmuls_[gr] = matmulsBefore[gr];
              for (NodeId m : nodes) group_[idx(m)] = gr;
            }
            if (!keepVerified) verified_.erase(keep);
            continue;
          }
          verified_.insert(keep);  // staysAcyclic and runsInOrder said so, just above
          for (int gr : groups) streamAxis_.erase(gr);
          if (streams) streamAxis_[keep] = x;
          else wholeAxes_[keep].insert(x);
          changed = true;
        }
      }
    }
  }

  // The groups in an order in which every kernel runs after those whose
  // values it reads (through views too); among the ready ones, the one whose
  // first node comes first.
  std::vector<int> runOrder(const std::map<int, Kernel>& byGroup) const {
    std::vector<std::set<int>> producers(g_.nodes.size());  // the kernels a node's value comes from
    for (const Node& n : g_.nodes) {
      if (group_[idx(n.id)] >= 0) producers[idx(n.id)] = {group_[idx(n.id)]};
      else if (viewHere(n))
        for (NodeId o : n.operands) producers[idx(n.id)].insert(producers[idx(o)].begin(), producers[idx(o)].end());
    }
    std::map<int, std::set<int>> waitsFor;
    std::map<int, std::set<int>> readers;
    for (const Node& n : g_.nodes) {
      int gr = group_[idx(n.id)];
      if (gr < 0) continue;
      for (NodeId o : n.operands)
        for (int p : producers[idx(o)])
          if (p != gr) waitsFor[gr].insert(p), readers[p].insert(gr);
    }
    std::set<std::pair<NodeId, int>> ready;  // (first node, group)
    for (const auto& [gr, k] : byGroup)
      if (waitsFor[gr].empty()) ready.insert({k.nodes.front(), gr});
    std::vector<int> order;
    while (!ready.empty()) {
      int gr = ready.begin()->second;
      ready.erase(ready.begin());
      order.push_back(gr);
      for (int r : readers[gr]) {
        waitsFor[r].erase(gr);
        if (waitsFor[r].empty()) ready.insert({byGroup.at(r).nodes.front(), r});
      }
    }
    if (order.size() != byGroup.size()) throw std::logic_error("fusion made kernels that wait for each other");
    return order;
  }

  // Whether the groups as they stand can run one after another.
  bool runsInOrder() const {
    std::map<int, Kernel> byGroup;
    for (const Node& n : g_.nodes)
      if (group_[idx(n.id)] >= 0) byGroup[group_[idx(n.id)]].nodes.push_back(n.id);
    try {
      runOrder(byGroup);
    } catch (const std::logic_error&) {
      return false;
    }
    return true;
  }

  int64_t reducedExtent(const Node& r, const std::string& x) const {
    for (NodeId o : r.operands)
      if (const Axis* a = g_.node(o).type.find(x)) return a->size;
    return 0;
  }

  std::vector<Kernel> collect() const {
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
          if (!inside.count(o) && !freeNode(o)) inputs.insert(o);
        bool leaves = isOutput_.count(id) > 0 || leaving.count(id) > 0;
        for (NodeId c : consumers_[idx(id)]) leaves |= !inside.count(c) && !freeNode(c);
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
      // (A gather reads one row per index: it reduces nothing worth streaming.)
      for (NodeId id : k.nodes)
        if (g_.node(id).op != Op::Gather)
          for (const auto& a : reducedBy(g_.node(id)))
            for (NodeId o : g_.node(id).operands)
              if (const Axis* ax = g_.node(o).type.find(a)) reduced[a] = ax->size;
      // Otherwise the longest reduced axis streams, if the kernel streams over
      // it and does not hold it whole.
      auto whole = wholeAxes_.find(gr);
      if (k.streamAxis.empty() && !reduced.empty()) {
        auto longest = std::max_element(reduced.begin(), reduced.end(), [](auto& a, auto& b) {
          return a.second < b.second;
        });
        bool held = whole != wholeAxes_.end() && whole->second.count(longest->first);
        std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
        if (!held && analyzeStream(g_, members, longest->first).streamable) k.streamAxis = longest->first;
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

  const Graph& g_;
  const FusionOptions& options_;
  std::vector<char> free_;                  // per node: isFree
  std::vector<char> viewHere_;              // per node: viewHere
  std::vector<int> group_;                  // per node: its kernel's group, -1 for none (yet)
  std::map<int, std::set<NodeId>> members_;  // per group: its nodes (join, moveMembers)
  std::map<int, std::vector<NodeId>> matmuls_;  // per group: its long contractions (isLongContraction)
  std::set<int> verified_;  // groups known to stay acyclic (join)
  std::map<NodeId, std::vector<NodeId>> twins_;  // nodes with the same op, operands and axes as others, with them
  mutable std::map<NodeId, bool> remadeFromShort_;  // remadeFromShortContraction, once per node
  std::vector<std::vector<NodeId>> consumers_;
  std::set<NodeId> isOutput_;
  std::map<int, std::string> streamAxis_;
  std::map<int, NodeId> anchorOf_;  // each anchor's own group, before merging
  std::map<int, std::set<std::string>> wholeAxes_;  // reduced axes a kernel holds whole
};

}  // namespace

bool storedForMatmul(const Graph& g, NodeId id, const std::vector<NodeId>& readers) {
  const Node& n = g.node(id);
  if (!n.adjoint || !isFloat(n.type.dtype) || n.op == Op::Input || isFree(g, n)) return false;
  return std::any_of(readers.begin(), readers.end(), [&](NodeId r) { return isLongContraction(g, g.node(r)); }) &&
         !remadeFromShortContraction(g, id);
}

bool isWholeArraySum(const Graph& g, const std::vector<NodeId>& outputs, const std::set<NodeId>& nodes) {
  if (outputs.size() != 1) return false;
  const Node& r = g.node(outputs[0]);
  if (r.op != Op::Reduce || r.reduce != ReduceOp::Sum || !r.type.axes.empty() || !isFloat(r.type.dtype)) return false;
  return std::none_of(nodes.begin(), nodes.end(), [&](NodeId id) { return id != r.id && isAnchor(g.node(id)); });
}

std::vector<Kernel> formKernels(const Graph& graph, const FusionOptions& options) { return Fuser(graph, options).run(); }

}  // namespace llmc
