// Reductions merged into the stream of the kernel that makes what they
// reduce, where the union streams over the axis (streamability.h): how a
// softmax and the contraction after it become one kernel.
#include "planning/fuser.h"
#include "planning/staged_rows.h"

namespace llmc::fusion {

// staysAcyclic for node n joining `group`. A group known to stay acyclic
// (verified_) gains a path out and back only through n: one from n out and
// into the group, or from the group out and to n. Those are walked from n
// alone, so that a kernel growing node by node along a chain costs the
// chain's length, not its square. Otherwise the whole span is walked.
bool Fuser::staysAcyclicWith(NodeId n, int group) const {
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
bool Fuser::pathThroughAnotherKernel(NodeId n, int group, NodeId bound, bool forward) const {
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

bool Fuser::readsScatterIn(NodeId n, int group) const {
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
bool Fuser::redoneInside(NodeId m, const Node& r, const std::string& x) const {
  const Node& n = g_.node(m);
  if ((n.op != Op::Contract && n.op != Op::Reduce) || m == r.id) return false;
  bool redone = std::any_of(r.type.axes.begin(), r.type.axes.end(), [&](const Axis& a) { return !n.type.has(a.name); });
  // (Its axes but x together: a reduction over several short axes is as long as their product.)
  int64_t extent = 1;
  for (const std::string& a : n.axes)
    if (a != x) extent = std::min<int64_t>(extent * reducedExtent(n, a), kGridPositionsCap);
  return redone && extent > kRedoneContractionLimit;
}

// A long float contraction whose output runs along x (the classifier's
// logits, 768 channels per score, along the vocabulary) is a matmul for the
// tensor cores, which make whole output tiles: their epilogue is elementwise
// and cannot carry a reduction along the tile's columns across blocks, and
// on CUDA cores its chunks would cost the GEMM itself. It stays a kernel of
// its own, its output stored; the reduction over x reads it. (Attention's
// q·k over d = 64 is short: its scores are made inside the stream.)
bool Fuser::matmulAlong(NodeId m, const std::string& x) const {
  const Node& n = g_.node(m);
  if (n.op != Op::Contract || !isFloat(n.type.dtype) || !n.type.has(x)) return false;
  return isLongContraction(g_, n);
}

// Whether n lacks an axis of a long matmul in `group`: joining it, n would
// be made per row (a layernorm's statistics remade for its backward) in a
// tensor-core GEMM's epilogue, which works per output point.
bool Fuser::narrowerThanMatmulIn(NodeId n, int group) const {
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
bool Fuser::storedForTensorCores(const Node& r, NodeId o) const {
  if (!isLongContraction(g_, r)) return false;
  auto known = remadeFromShort_.find(o);
  if (known == remadeFromShort_.end()) known = remadeFromShort_.emplace(o, remadeFromShortContraction(g_, o)).first;
  return !known->second;
}

// Whether a member is a backward operand that feedsContraction stores
// (dlogits): a stream must not take it back in as a prologue.
bool Fuser::holdsStoredBackwardOperand(int group) const {
  for (NodeId m : membersOfGroup(group))
    if (g_.node(m).adjoint && feedsContraction(m)) return true;
  return false;
}

// A contraction over channels of two operands both along x, not over x
// (attention's row term dO·O of the softmax's gradient, along the queries)
// is the same for every row tile of x's stream: made inside it, it would be
// redone for each, and a stream on the tensor cores takes only scores of an
// operand across x against one along it. It stays a kernel of its own.
bool Fuser::positionContraction(NodeId m, const std::string& x) const {
  const Node& n = g_.node(m);
  return n.op == Op::Contract && !n.axes.empty() && n.type.has(x) &&
         std::find(n.axes.begin(), n.axes.end(), x) == n.axes.end() &&
         std::all_of(n.operands.begin(), n.operands.end(), [&](NodeId o) { return g_.node(o).type.has(x); });
}

bool Fuser::redoneInStream(NodeId m, const Node& r, const std::string& x) const {
  return redoneInside(m, r, x) || matmulAlong(m, x) || positionContraction(m, x);
}

bool Fuser::holdsRedoneWork(int group, const Node& r, const std::string& x) const {
  for (NodeId m : membersOfGroup(group))
    if (redoneInStream(m, r, x)) return true;
  return false;
}

// Whether c computes what a member already does: a copy the recompute
// pass made for another stream (CSE leaves no other duplicates), which
// must stay out of this kernel.
bool Fuser::copiesAMember(NodeId c, const std::set<NodeId>& members) const {
  auto twins = twins_.find(c);
  if (twins == twins_.end()) return false;
  return std::any_of(twins->second.begin(), twins->second.end(), [&](NodeId m) { return m != c && members.count(m); });
}

bool Fuser::reducesIn(int group, const std::string& x) const {
  const std::set<NodeId>& members = membersOfGroup(group);
  return std::any_of(members.begin(), members.end(), [&](NodeId m) { return reducesAlong(g_.node(m), x); });
}

// Whether `group` makes only `o`, a sum or maximum over x (one axis) of
// elementwise work on what it reads: no contraction, nothing else stored.
bool Fuser::isStatisticOf(int group, NodeId o, const std::string& x) const {
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

bool Fuser::readsKernelValueMoved(const Node& n, int group) const {
  return readsValueMoved(n, [&](NodeId id) { return group_[idx(id)] == group; });
}

bool Fuser::readsValueMoved(const Node& n, const std::function<bool(NodeId)>& inKernel) const {
  auto keepsPositions = [](const Node& v) {
    return v.op != Op::Slice && v.op != Op::Rename && v.op != Op::Split && v.op != Op::Merge && v.op != Op::Index &&
           v.op != Op::Concat && v.op != Op::Gather;  // a gather reads its table at the indices' positions
  };
  std::vector<std::pair<NodeId, bool>> work;  // (value, reached through a moving view)
  for (NodeId o : n.operands) work.push_back({o, !keepsPositions(n)});
  for (size_t steps = 0; !work.empty() && steps < 4096; ++steps) {
    const auto [id, moved] = work.back();
    work.pop_back();
    const Node& v = g_.node(id);
    if (!viewHere(v)) {
      if (moved && inKernel(id)) return true;
      continue;
    }
    for (NodeId o : v.operands) work.push_back({o, moved || !keepsPositions(v)});
  }
  return false;
}

// The value a chain of one-operand views (renames, stop_gradients) shows.
NodeId Fuser::throughViews(NodeId id) const {
  while (isView(g_.node(id)) && g_.node(id).operands.size() == 1) id = g_.node(id).operands[0];
  return id;
}

// Whether every value group `from` reads along x from outside is read by
// group `by` too (through views: the same stored array).
bool Fuser::readsAlongWithin(int from, int by, const std::string& x) const {
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
const std::set<NodeId>& Fuser::membersOfGroup(int group) const {
  static const std::set<NodeId> none;
  auto it = members_.find(group);
  return it == members_.end() ? none : it->second;
}

std::set<NodeId> Fuser::membersOf(const std::set<int>& groups) const {
  std::set<NodeId> out;
  for (int group : groups)
    if (auto it = members_.find(group); it != members_.end()) out.insert(it->second.begin(), it->second.end());
  return out;
}

void Fuser::join(NodeId id, int group, Acyclic acyclic) {
  int& current = group_[idx(id)];
  if (current >= 0) {
    members_[current].erase(id);
    auto& matmuls = matmuls_[current];
    matmuls.erase(std::remove(matmuls.begin(), matmuls.end(), id), matmuls.end());
    verified_.erase(current);  // a node taken out may have been a path's only way back in
  }
  if (current >= 0) groupVersion_[current] = ++versionClock_;
  current = group;
  if (group < 0) return;
  groupVersion_[group] = ++versionClock_;
  members_[group].insert(id);
  if (isLongContraction(g_, g_.node(id))) matmuls_[group].push_back(id);
  if (acyclic == Acyclic::Known) verified_.insert(group);
  else verified_.erase(group);
}

// Every member of group `from` into group `to`.
void Fuser::moveMembers(int from, int to) {
  auto it = members_.find(from);
  if (it == members_.end()) return;
  std::set<NodeId> moved = std::move(it->second);
  members_.erase(it);
  groupVersion_[from] = ++versionClock_;
  groupVersion_[to] = ++versionClock_;
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
bool Fuser::reducesSeveralAxes(int group) const {
  const auto anchor = anchorOf_.find(group);
  return anchor != anchorOf_.end() && reducedCount(g_.node(anchor->second)) > 1;
}

// Adds to `groups` (whose nodes are `members`) every kernel that reduces
// over x a value of theirs along x, until none is left. Each round looks
// only at the consumers of the members the last round added: a consumer
// refused once stays refused (what refuses it is fixed, or grows with the
// members), so the rounds find what rescanning every member would, in time
// linear in what they add instead of in that times the number of rounds
// (the residual stream chains every layer's kernels over the channels).
void Fuser::growAlong(std::set<int>& groups, const std::string& x, std::set<int>* looked) const {
  // The groups whose members the rounds so far have seen (groups gains a
  // round's additions at once, its members at the round's end).
  std::set<int> seenGroups = groups;
  std::vector<NodeId> fresh;
  for (int g : groups)
    for (NodeId m : membersOfGroup(g)) fresh.push_back(m);
  auto copiesASeenMember = [&](NodeId c) {
    auto twins = twins_.find(c);
    return twins != twins_.end() && std::any_of(twins->second.begin(), twins->second.end(), [&](NodeId t) {
             return t != c && group_[idx(t)] >= 0 && seenGroups.count(group_[idx(t)]);
           });
  };
  while (!fresh.empty()) {
    std::vector<int> added;
    for (NodeId m : fresh) {
      if (!g_.node(m).type.has(x)) continue;
      for (NodeId c : consumers_[idx(m)]) {
        int gc = group_[idx(c)];
        if (looked && gc >= 0) looked->insert(gc);
        if (gc < 0 || groups.count(gc) || copiesASeenMember(c) || storedForTensorCores(g_.node(c), m))
          continue;
        if (reducesSeveralAxes(gc)) continue;
        if (reducesAlong(g_.node(c), x) ||
            (!isAnchor(g_.node(c)) && g_.node(c).type.has(x) && reducesIn(gc, x))) {
          groups.insert(gc);
          added.push_back(gc);
        }
      }
    }
    // The next round sees this round's kernels as members (as a rescan of
    // membersOf(groups) would).
    fresh.clear();
    for (int gc : added) {
      seenGroups.insert(gc);
      for (NodeId m : members_.at(gc)) fresh.push_back(m);
    }
  }
}

std::vector<std::pair<int, uint64_t>> Fuser::versionsOf(const std::set<int>& groups) const {
  std::vector<std::pair<int, uint64_t>> out;
  out.reserve(groups.size());
  for (int g : groups) {
    auto it = groupVersion_.find(g);
    out.push_back({g, it == groupVersion_.end() ? 0 : it->second});
  }
  return out;
}

bool Fuser::knownToLoop(const std::set<int>& groups) const {
  auto it = regionAcyclic_.find(versionsOf(groups));
  return it != regionAcyclic_.end() && !it->second;
}

int64_t Fuser::gridPositions(const std::set<NodeId>& members, const std::string& streamed) const {
  std::map<std::string, int64_t> axes;
  std::set<std::string> reduced = {streamed};
  for (NodeId m : members) {
    const Node& n = g_.node(m);
    for (const Axis& a : n.type.axes) axes[a.name] = a.size;
    if (n.op != Op::Gather)  // a gather reads one row per index: as collect() does, no reduction
      for (const std::string& a : reducedBy(n)) reduced.insert(a);
  }
  int64_t positions = 1;
  for (const auto& [name, size] : axes)
    if (!reduced.count(name)) positions = std::min(kGridPositionsCap, positions * std::min(size, kGridPositionsCap));
  return positions;
}

// A reduction over x merges with the kernels that make the values it
// reduces, and with the other reductions over x of those values, when the
// union streams over x.
// Merges `groups` (their nodes `members`) into one kernel for r's reduction
// over x where the union streams over x or holds it whole, still spreads over
// blocks, and stays acyclic; false, with nothing changed, where it may not.
bool Fuser::tryMerge(const Node& r, const std::vector<std::string>& xs, const std::set<int>& groups,
                     const std::set<NodeId>& members) {
  if (groups.size() < 2 || xs.empty()) return false;
  const std::string& x = xs.front();
  // A scan's launch takes its prologue alone (planning/scan_layout.h).
  if (std::any_of(groups.begin(), groups.end(), [&](int gr) { return holdsScan(gr); })) return false;
  // (These checks come before the stream analysis, the costliest: a merge
  // grown along a residual stream fails them most often.)
  // Nothing may be redone for every tile of r's kernel (redoneInside).
  if (std::any_of(members.begin(), members.end(), [&](NodeId m) {
        return std::any_of(xs.begin(), xs.end(), [&](const std::string& a) { return redoneInStream(m, r, a); });
      }))
    return false;
  {
    auto [known, added] = regionAcyclic_.try_emplace(versionsOf(groups), false);
    if (added)
      known->second = staysAcyclic([&](NodeId m) { return members.count(m) > 0; }, *members.begin(), *members.rbegin());
    if (!known->second) return false;
  }
  // Nor may one member read another at other positions (a gather of a
  // maximum, a slice of a sum): the kernel holds each value at its own points.
  if (std::any_of(members.begin(), members.end(), [&](NodeId m) {
        return readsValueMoved(g_.node(m), [&](NodeId id) { return members.count(id) > 0; });
      }))
    return false;
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
    return false;
  // Several axes reduced at once (a group normalisation's statistics over
  // its channels and positions) are held whole together, never streamed.
  // So are they where a kernel merged here holds them so already: a stream
  // over one of them would leave the others looped inside each of its
  // positions, with slots the CUDA writer does not keep.
  const bool heldTogether = std::any_of(groups.begin(), groups.end(), [&](int gr) {
    const auto whole = wholeAxes_.find(gr);
    return whole != wholeAxes_.end() && whole->second.size() > 1 && whole->second.count(x);
  });
  bool streams = xs.size() == 1 && !heldTogether && analyzeStream(g_, members, x).streamable;
  int64_t heldExtent = 1;
  for (const std::string& a : xs) heldExtent *= reducedExtent(r, a);
  // Holding x whole suits statistics over a short axis (a layernorm), or
  // over one past kWholeAxisLimit whose rows a block stages in shared
  // memory (a softmax over a vocabulary with its gradient;
  // planning/staged_rows.h: floats taken as bf16, the default storage), not
  // kernels with contractions: those are matmuls, tiled on their own.
  bool contracts = std::any_of(members.begin(), members.end(),
                               [&](NodeId m) { return g_.node(m).op == Op::Contract; });
  auto storedBytes = [&](NodeId id) -> int64_t {  // a free node (a mask of positions) is made, not read
    if (freeNode(id)) return 0;
    const DType t = g_.node(id).type.dtype;
    return isFloat(t) ? 2 : t == DType::Bool ? 1 : 4;
  };
  auto staged = [&] {
    const int64_t bytes = rowBytesAlong(g_, members, x, storedBytes);
    return xs.size() == 1 && bytes > kStagedRowsAbove && bytes <= kStagedRowsMax;
  };
  if (!streams && (contracts || (heldExtent > kWholeAxisLimit && !staged()))) return false;
  // A reduction kept apart (FusionOptions::apart) takes a stream or nothing.
  if (!streams && options_.apart.count(r.id)) return false;
  // Nor a gather along x: a kernel holding x whole reads its values again
  // in each pass over x, and a gathered row is read an element at a time
  // (GPT-2's embedding in its first layernorm's kernel: 150 us measured on
  // the H200 against the 38 the model gives; apart, 38 + 25 + 25).
  if (!streams && std::any_of(members.begin(), members.end(), [&](NodeId m) {
        return g_.node(m).op == Op::Gather &&
               std::any_of(xs.begin(), xs.end(), [&](const std::string& a) { return g_.node(m).type.has(a); });
      }))
    return false;
  // Nor may it gather into one kernel, inside each block, other axes
  // that spread the kernels it merges over many blocks: held whole,
  // below kFewestMergedBlocks; streamed, into a single block (outputs
  // over different axes, the weight gradients of a chain of matmuls
  // and its forward value, leave no axis common to them all).
  {
    int64_t largestPart = 0;
    for (int gr : groups) largestPart = std::max(largestPart, gridPositions(membersOfGroup(gr), x));
    const int64_t fewest = streams ? 2 : kFewestMergedBlocks;
    if (gridPositions(members, x) < std::min(largestPart, fewest)) return false;
  }
  const int keep = *groups.begin();
  // staysAcyclic sees the merged kernel's own paths; the kernels
  // around it can still close a loop through it (an RMSNorm's
  // gradient: its statistics' kernel, the data gradient's and the
  // weight gradients' stream). Such a merge is not made.
  std::vector<std::pair<int, int>> mergedEdges;
  if (!runsInOrderMerging(groups, keep, &mergedEdges)) return false;
  for (int gr : groups)
    if (gr != keep) moveMembers(gr, keep);
  mergeKnownEdges(std::move(mergedEdges));  // groupEdges of the merged groups, renamed as they now are
  verified_.insert(keep);  // staysAcyclic and runsInOrderMerging said so, just above
  for (int gr : groups) streamAxis_.erase(gr);
  if (streams) streamAxis_[keep] = x;
  else wholeAxes_[keep].insert(xs.begin(), xs.end());
  return true;
}

void Fuser::mergeStreams() {
  // Attempts that merged nothing: the groups each looked at, with their versions.
  std::map<std::pair<NodeId, std::string>, std::vector<std::pair<int, uint64_t>>> refused;
  auto unchanged = [&](const std::vector<std::pair<int, uint64_t>>& seen) {
    return std::all_of(seen.begin(), seen.end(), [&](const auto& gv) { return groupVersion_[gv.first] == gv.second; });
  };
  // Maxima compared with what they reduce (the mask of a maximum's
  // gradient, where no stop_gradient spares it): separateMaximumMasks takes
  // them and their readers out of any kernel afterwards, and a stream
  // anchored on one would leave behind the kernels it joined, fused for no
  // stream (a cosine similarity's norms and matmul, a CUDA-core stream over
  // the channels: 1.2 ms where the GEMM takes 15 us).
  std::set<NodeId> maskedMaxima;
  for (const Node& c : g_.nodes)
    for (size_t side = 0; side < 2; ++side)
      if (const NodeId m = maximumMasked(c, side); m >= 0) maskedMaxima.insert(m);
  bool changed = true;
  while (changed) {
    changed = false;
    for (const Node& r : g_.nodes) {
      if (!isAnchor(r) || options_.unstreamed.count(r.id) || maskedMaxima.count(r.id)) continue;
      // A reduction over several axes at once that keeps none (a loss summed
      // over every axis) stays a kernel of its own: fused into the kernels it
      // reads, it would leave them nothing to spread over blocks. One that
      // keeps axes holds the ones it reduces whole (mergeHeldWhole).
      if (reducedCount(r) > 1) {
        if (r.op != Op::Reduce || r.type.axes.empty()) continue;
        const std::pair<NodeId, std::string> key{r.id, ""};
        if (auto it = refused.find(key); it != refused.end() && unchanged(it->second)) continue;
        std::set<int> looked;
        if (mergeHeldWhole(r, looked)) {
          changed = true;
          refused.erase(key);
        } else {
          std::vector<std::pair<int, uint64_t>>& seen = refused[key];
          seen.clear();
          for (int g : looked) seen.push_back({g, groupVersion_[g]});
        }
        continue;
      }
      for (const std::string& x : reducedBy(r)) {
        if (auto it = refused.find({r.id, x}); it != refused.end() && unchanged(it->second)) continue;
        std::set<int> looked = {group_[idx(r.id)]};
        // The kernels that make what r's kernel reads along x (r's operands,
        // and those of its prologue).
        std::set<int> groups = {group_[idx(r.id)]};
        for (NodeId m : membersOfGroup(group_[idx(r.id)]))
          for (NodeId o : g_.node(m).operands) {
            if (group_[idx(o)] >= 0) looked.insert(group_[idx(o)]);
            if (g_.node(o).type.has(x) && group_[idx(o)] >= 0 && !reducesSeveralAxes(group_[idx(o)]) &&
                !holdsRedoneWork(group_[idx(o)], r, x) &&
                !holdsStoredBackwardOperand(group_[idx(o)]) && !storedForTensorCores(r, o) &&
                !copiesAMember(r.id, membersOfGroup(group_[idx(o)])))
              groups.insert(group_[idx(o)]);
          }
        // A statistic over x of what r's kernel reads along x (the maximum
        // of stored logits, which the sum of exp(logits - max) reads with
        // them): one stream makes both, the sum rescaled as the maximum
        // moves, instead of a second pass over the array.
        for (NodeId m : membersOfGroup(group_[idx(r.id)]))
          for (NodeId read : g_.node(m).operands) {
            const NodeId o = throughViews(read);
            const int go = group_[idx(o)];
            if (go >= 0) looked.insert(go);
            if (go >= 0 && !groups.count(go) && g_.node(o).adjoint == r.adjoint &&
                isStatisticOf(go, o, x) && readsAlongWithin(go, group_[idx(r.id)], x))
              groups.insert(go);
          }
        // Every other reduction over x of a value in those kernels, with the
        // kernels between (the softmax's normaliser feeding the contraction).
        // Grown so, the kernel can take in too much (the residual stream
        // chains every layer's layernorm gradient over the channels, with
        // matmuls between them that close a loop): then the kernels r reads
        // from alone are tried.
        // (A grown set known to close a loop through other kernels, as the
        // residual stream's does for each of its reductions, is not tried
        // again: its members are not even gathered.)
        std::set<int> grown = groups;
        growAlong(grown, x, &looked);
        looked.insert(grown.begin(), grown.end());
        if ((!knownToLoop(grown) && tryMerge(r, {x}, grown, membersOf(grown))) ||
            (grown != groups && !knownToLoop(groups) && tryMerge(r, {x}, groups, membersOf(groups)))) {
          changed = true;
          refused.erase({r.id, x});
        } else {
          std::vector<std::pair<int, uint64_t>>& seen = refused[{r.id, x}];
          seen.clear();
          for (int g : looked) seen.push_back({g, groupVersion_[g]});
        }
      }
    }
  }
}

// The kernels r's kernel reads the reduced array from, where every
// reduction in them is over r's axes too (its mean, for its variance), with
// the same checks as a merge over one axis; none grown further.
bool Fuser::mergeHeldWhole(const Node& r, std::set<int>& looked) {
  const std::vector<std::string> xs = reducedBy(r);
  const std::set<std::string> held(xs.begin(), xs.end());
  auto reducesOnlyHeld = [&](int group) {
    for (NodeId m : membersOfGroup(group))
      for (const std::string& a : reducedBy(g_.node(m)))
        if (!held.count(a)) return false;
    return true;
  };
  const int own = group_[idx(r.id)];
  std::set<int> groups = {own};
  looked.insert(own);
  for (NodeId m : membersOfGroup(own))
    for (NodeId o : g_.node(m).operands) {
      const int go = group_[idx(o)];
      if (go < 0 || groups.count(go)) continue;
      looked.insert(go);
      const Type& t = g_.node(o).type;
      if (std::all_of(xs.begin(), xs.end(), [&](const std::string& a) { return t.has(a); }) && reducesOnlyHeld(go) &&
          !holdsStoredBackwardOperand(go) && !storedForTensorCores(r, o) &&
          !copiesAMember(r.id, membersOfGroup(go)) &&
          std::none_of(xs.begin(), xs.end(), [&](const std::string& a) { return holdsRedoneWork(go, r, a); }))
        groups.insert(go);
    }
  return !knownToLoop(groups) && tryMerge(r, xs, groups, membersOf(groups));
}

}  // namespace llmc::fusion
