// Fusion's internals, shared by the files that define it (fusion.h is the
// interface): one Fuser cuts one graph into kernels. Its methods are defined
// by concern:
//
//   fusion.cpp          the vocabulary, anchors, prologues and epilogues, the kernels collected
//   fusion_streams.cpp  reductions merged into the streams that make what they reduce
//   fusion_row_products.cpp  contractions over a stream's rows joining it (FusionOptions::rowProducts)
//   fusion_siblings.cpp elementwise kernels taken into a sibling GEMM's epilogue
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "analysis/streamability.h"
#include "planning/fusion.h"

namespace llmc::fusion {

// A reduced axis at most this long may be held whole in a block instead of
// streamed (a row of 8192 f32 is 32 KiB); a longer one where the block's rows
// of it fit in shared memory (planning/staged_rows.h).
inline constexpr int64_t kWholeAxisLimit = 8192;

// A kernel reducing several axes streams over one its inputs lie contiguous
// along when it has at least this many positions (a warp's lanes' worth),
// before the longest (Fuser::collect).
inline constexpr int64_t kContiguousStreamMin = 32;

// The longest axis a contraction may reduce inside another reduction's
// stream, recomputed for each of its chunks.
inline constexpr int64_t kRedoneContractionLimit = 256;

// A merge along x that holds x whole (no stream) spreads its kernel over
// fewer blocks than the kernels it merges had over their axes other than x
// when it holds another reduced axis whole too: acceptable while a GPU's SMs
// still get work, not below this many blocks. Reductions over three axes
// merged into one kernel once held all of them in a single block of one
// warp, its work serial, thousands of times slower than apart. A streamed
// merge may not leave one block where its parts had more (the weight
// gradients of a chain of four matmuls streamed over the rows with its
// output: one block, unfinished after minutes). (The merged kernel may keep
// the parts' grid where theirs was smaller.)
inline constexpr int64_t kFewestMergedBlocks = 32;
inline constexpr int64_t kGridPositionsCap = int64_t{1} << 40;

// The axes an anchor reduces.
std::vector<std::string> reducedBy(const Node& n);
// Whether n reduces x, and how many axes it reduces: reducedBy without a
// copy of the axes (asked for every consumer of every member as fusion grows
// a merge).
bool reducesAlong(const Node& n, const std::string& x);
size_t reducedCount(const Node& n);

int64_t operandExtent(const Graph& g, const Node& r, const std::string& x);

bool isLongContraction(const Graph& g, const Node& n);

// Whether id's chain of elementwise nodes and views reaches a short
// contraction with all of id's axes: a value the recompute pass remakes
// inside a stream. remakingContraction: the first such contraction it
// reaches, or -1.
bool remadeFromShortContraction(const Graph& g, NodeId id);
NodeId remakingContraction(const Graph& g, NodeId id);

class Fuser {
 public:
  Fuser(const Graph& g, const FusionOptions& options)
      : g_(g), options_(options), free_(freeNodesUnlessMatrixOperands(g)), group_(g.nodes.size(), -1), consumers_(g.nodes.size()), feedsContraction_(g.nodes.size(), -1) {
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

  std::vector<Kernel> run();

  // A scatter-add runs as a launch of its own ahead of its kernel's other
  // work (one thread per value, atomics; cuda_kernel_writer.h), computing its
  // values and indices from stored arrays there: none may need a reduction
  // of the same kernel (a sum its gradient's values are scaled by, another
  // scatter-add), which that launch cannot make, nor read a member through a
  // view (which it loads from the member's array). Such a scatter-add is a
  // kernel of its own, its operands stored.
  void separateScatterValues(int& next);
  // A maximum's mask (x == max(x): a maximum's gradient in the backward, an
  // argmax in the forward) must compare the very bits the maximum was taken
  // over. A kernel that computes x makes it again wherever it is read
  // (another loop, another order of summation), and a copy can miss the
  // maximum by a rounding: the mask then holds no position (a gradient
  // divides by zero, an argmax has no answer). So the maximum and the mask
  // read x as stored: what in x's kernel depends on either moves to a
  // kernel of its own that runs after it (a maximum taken over stored values
  // is the same however it is taken).
  void separateMaximumMasks(int& next);

  // The checks above look at one join or merge at a time; together they can
  // still leave kernels that wait for each other (a prologue whose operand
  // comes from a kernel that reads the prologue's own kernel). Those kernels
  // give up their elementwise members, each then a kernel of its own, and if
  // that is not enough every member stands alone: one node a kernel always
  // runs in graph order.
  void breakCycles(int& next);

  // The groups that runOrder cannot place: those in a cycle and those after one.
  std::set<int> groupsLeftWaiting() const;

 private:
  static size_t idx(NodeId id) { return static_cast<size_t>(id); }
  bool freeNode(NodeId id) const { return free_[idx(id)] != 0; }
  // Whether the group holds a scan (Op::Scan): a launch of its own kind,
  // which takes a prologue and no epilogue and joins no stream.
  bool holdsScan(int group) const {
    for (NodeId m : membersOfGroup(group))
      if (g_.node(m).op == Op::Scan) return true;
    return false;
  }
  bool light(const Node& n) const { return n.op != Op::Input && !freeNode(n.id) && !viewHere(n) && !isAnchor(n); }

  // A view, read through by the kernels that use it; except a concat that a
  // contraction reads (the qkv projection's gradients, dq, dk and dv in three
  // layouts; a stack of shifted windows; rotated pairs of channels): the
  // tensor cores take one strided array, so the concat is computed, its
  // parts copied into one stored array (or written there by their own
  // launches, where they can lie in it: codegen/concat_parts.h). So is a
  // concat that is an output (or whose view is) where its parts interleave:
  // made by one kernel, not each part by its own and then copied together
  // (complex numbers as pairs, [.. i r:2]). Parts that lie whole one after
  // another (per-layer gradients stacked over the layers) stay a view: each
  // lies in the output where its launch writes it (concat_parts.h), or a
  // launch copies them there.
  bool viewHere(const Node& n) const { return viewHere_[idx(n.id)] != 0; }
  bool computeViewHere(const Node& n) const;
  // The nodes that read id's value, through the views computed where they
  // are read (a stack's part is read by the concat behind its broadcast).
  std::vector<NodeId> readersThroughViews(NodeId id) const;
  // Whether v, read through views computed where they are read, comes from
  // the kernel's own values (`inside`) and free ones alone: the kernel makes
  // it (a stack's parts behind their broadcasts), it is no input.
  bool madeFrom(NodeId v, const std::set<NodeId>& inside) const;
  // Whether id's value is read outside the kernel: by a node of another, a
  // graph output, or either through views computed where they are read.
  bool readOutside(NodeId id, const std::set<NodeId>& inside) const;

  // A light node whose consumers all sit in one kernel is computed there,
  // unless it is an operand of a contraction: tensor cores are fed stored
  // tiles (by TMA or cp.async), so a layernorm's normalisation before a
  // matmul is the epilogue of the kernel that makes its statistics.
  void attachPrologues();

  // In the backward pass, only what storedForMatmul says; the operand chains
  // the recompute pass built stay prologues.
  bool feedsContraction(NodeId id) const;

  // Whether n is backward work (a copy the recompute pass made, computed
  // from forward values alone: a GELU's derivative from the MLP's
  // pre-activation) that would join a forward kernel: stored there, it would
  // stay alive from the forward to the backward, while where the backward
  // reads it, it is remade from what the forward stored anyway.
  bool forBackwardInForward(const Node& n, int group) const;
  bool endsForward(int group) const;

  // Whether `group` reduces to a scalar (a gradient's global norm, a loss):
  // it takes no epilogue. What follows would spread the scalar back over
  // the axes it reduced (the gradient scaled by its norm) with all of them in
  // one block, and the reduction alone is a plain sum that the whole grid
  // shares (cuda_kernel_writer.h, isGridSum); scalar work after it is
  // recomputed where it is read. A reduction that keeps axes (a layernorm's
  // rows) spreads over those, and its epilogue stays.
  bool spreadsScalarReduction(int group) const;

  // The rest join the kernel of their latest computed operand; those computed
  // from inputs and constants alone (a mask from positions) join the kernel of
  // a consumer; what is left starts a kernel of its own.
  void attachEpilogues(int& next);

  // An elementwise kernel over a GEMM's output points, from stored values
  // the GEMM's epilogue reads too, joins that epilogue (fusion_siblings.cpp).
  void joinSiblingEpilogues();
  bool sameAxesAsMatmuls(const std::set<NodeId>& members, const std::vector<NodeId>& matmuls) const;
  bool readsEachInEpilogue(int group, const std::set<NodeId>& values) const;
  bool pathThroughOthers(int from, int to) const;

  // Contractions over a stream's rows join the stream (FusionOptions::
  // rowProducts; fusion_row_products.cpp).
  void joinRowProducts();

  // An elementwise node in the kernel of its operands that one other kernel
  // alone reads moves there, where that costs no new large read
  // (fusion_sinking.cpp).
  void sinkIntoReaders();
  bool readsLittleMore(const std::set<NodeId>& moving, int to, const Node& value) const;
  // Two kernels each summing over the same axes, reading one stored array,
  // neither waiting for the other, become one (fusion_siblings.cpp).
  void joinSiblingSums();
  std::set<NodeId> storedReads(int group) const;
  bool joinWithoutLoop(std::set<NodeId> nodes, int from, int to);
  bool readsFrom(int reader, int maker) const;

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
  bool staysAcyclicWith(NodeId n, int group) const;

  // Whether a path runs from n into `group` (forward, through ids up to
  // `bound`) or from `group` to n (backward, down to `bound`) through at least
  // one node that another kernel computes: a node that is not a view (views
  // are read through); free nodes end a path (each kernel makes its own).
  bool pathThroughAnotherKernel(NodeId n, int group, NodeId bound, bool forward) const;

  bool readsScatterIn(NodeId n, int group) const;

  // A reduction over another, long axis whose result lacks an axis of r's
  // would be redone for every tile of that axis inside x's stream: it stays
  // a kernel of its own (the MLP's two matmuls; attention's row sums over
  // the keys beside the stream over the queries). The classifier's logits
  // are not redone (its loss has only their rows); attention's q·k over
  // d = 64 is short enough to redo.
  bool redoneInside(NodeId m, const Node& r, const std::string& x) const;

  // A long float contraction whose output runs along x (the classifier's
  // logits, 768 channels per score, along the vocabulary) is a matmul for the
  // tensor cores, which make whole output tiles: their epilogue is elementwise
  // and cannot carry a reduction along the tile's columns across blocks, and
  // on CUDA cores its chunks would cost the GEMM itself. It stays a kernel of
  // its own, its output stored; the reduction over x reads it. (Attention's
  // q·k over d = 64 is short: its scores are made inside the stream.)
  bool matmulAlong(NodeId m, const std::string& x) const;

  // Whether n lacks an axis of a long matmul in `group`: joining it, n would
  // be made per row (a layernorm's statistics remade for its backward) in a
  // tensor-core GEMM's epilogue, which works per output point.
  bool narrowerThanMatmulIn(NodeId n, int group) const;

  // Whether r is a long matmul (for the tensor cores, which take stored
  // tiles) and its operand o a value it must read stored: a layernorm's
  // output, not taken into r's stream as a normalised contraction on CUDA
  // cores. An operand remade from a short contraction (attention's
  // probabilities, from q·k over 64 channels) is streamed with it: that is
  // flash attention.
  bool storedForTensorCores(const Node& r, NodeId o) const;

  // Whether a member is a backward operand that feedsContraction stores
  // (dlogits): a stream must not take it back in as a prologue.
  bool holdsStoredBackwardOperand(int group) const;

  // A contraction over channels of two operands both along x, not over x
  // (attention's row term dO·O of the softmax's gradient, along the queries)
  // is the same for every row tile of x's stream: made inside it, it would be
  // redone for each, and a stream on the tensor cores takes only scores of an
  // operand across x against one along it. It stays a kernel of its own.
  bool positionContraction(NodeId m, const std::string& x) const;

  bool redoneInStream(NodeId m, const Node& r, const std::string& x) const;

  bool holdsRedoneWork(int group, const Node& r, const std::string& x) const;

  // Whether c computes what a member already does: a copy the recompute
  // pass made for another stream (CSE leaves no other duplicates), which
  // must stay out of this kernel.
  bool copiesAMember(NodeId c, const std::set<NodeId>& members) const;

  bool reducesIn(int group, const std::string& x) const;

  // Whether `group` makes only `o`, a sum or maximum over x (one axis) of
  // elementwise work on what it reads: no contraction, nothing else stored.
  bool isStatisticOf(int group, NodeId o, const std::string& x) const;

  // Whether n, joining `group`, would read a value of that kernel through a
  // box that moves positions (a slice, a rename, a split; n itself or views
  // before it): a kernel holds its
  // values at its own points only (a stream's accumulator is the sum at this
  // point, not at the slice's offset), so n must read it stored instead.
  bool readsKernelValueMoved(const Node& n, int group) const;
  // Whether n reads a reduction of `group` kept apart (FusionOptions::apart).
  bool readsApart(const Node& n, int group) const;
  // The same for the values `inKernel` holds.
  bool readsValueMoved(const Node& n, const std::function<bool(NodeId)>& inKernel) const;

  // The value a chain of one-operand views (renames, stop_gradients) shows.
  NodeId throughViews(NodeId id) const;

  // Whether every value group `from` reads along x from outside is read by
  // group `by` too (through views: the same stored array).
  bool readsAlongWithin(int from, int by, const std::string& x) const;

  // The nodes of one group (no copy: it is read for every operand of every
  // reduction, in every round of mergeStreams).
  const std::set<NodeId>& membersOfGroup(int group) const;

  std::set<NodeId> membersOf(const std::set<int>& groups) const;

  // Puts node `id` in `group` (the only way group_ changes, so that members_
  // follows it).
  // Whether a group is known to run as one kernel (staysAcyclic) after a
  // join: Known where the caller checked it (or the group is the node alone),
  // Unknown where it did not (a prologue).
  enum class Acyclic { Unknown, Known };

  void join(NodeId id, int group, Acyclic acyclic = Acyclic::Unknown);

  // Every member of group `from` into group `to`.
  void moveMembers(int from, int to);

  // Whether `group` is a reduction over several axes at once (a loss summed
  // over every axis): it joins no stream, which would be left no axis to
  // spread over blocks.
  bool reducesSeveralAxes(int group) const;

  // Adds to `groups` (whose nodes are `members`) every kernel that reduces
  // over x a value of theirs along x, until none is left. Each round looks
  // only at the consumers of the members the last round added: a consumer
  // refused once stays refused (what refuses it is fixed, or grows with the
  // members), so the rounds find what rescanning every member would, in time
  // linear in what they add instead of in that times the number of rounds
  // (the residual stream chains every layer's kernels over the channels).
  // `looked`: where given, every group whose consumers were weighed.
  void growAlong(std::set<int>& groups, const std::string& x, std::set<int>* looked = nullptr) const;
  // Groups with their versions: the key of what is known of their union.
  std::vector<std::pair<int, uint64_t>> versionsOf(const std::set<int>& groups) const;
  // Whether the union of these groups, as they stand, is known to close a
  // loop through another kernel (staysAcyclic, asked by tryMerge).
  bool knownToLoop(const std::set<int>& groups) const;

  // The positions a kernel of these members spreads over blocks: the
  // product of its values' axes that no member reduces (each reduced axis is
  // streamed or held whole inside a block), leaving out `streamed`.
  // Saturates at kGridPositionsCap.
  int64_t gridPositions(const std::set<NodeId>& members, const std::string& streamed) const;

  // A reduction over x merges with the kernels that make the values it
  // reduces, and with the other reductions over x of those values, when the
  // union streams over x or holds it whole, and still spreads over blocks
  // (kFewestMergedBlocks). Rounds repeat while a merge is made; a
  // reduction's attempt that merged nothing is not made again while the
  // groups it looked at are as they were (groupVersion_): what refused it
  // is a property of those groups, or a loop through other kernels, which
  // merges elsewhere never undo.
  void mergeStreams();
  bool tryMerge(const Node& r, const std::vector<std::string>& xs, const std::set<int>& groups,
                const std::set<NodeId>& members);
  // A reduction over several axes that keeps others (a group
  // normalisation's statistics over its channels and positions, each group's
  // rows): merged with the kernels making what it reduces, all of its axes
  // held whole in a block (tryMerge), never streamed. True where merged.
  // `looked`: the groups weighed.
  bool mergeHeldWhole(const Node& r, std::set<int>& looked);
  // The maximum that compare node c sets against what it reduces on `side`
  // (a maximum's gradient mask, x == max(x)); -1 where c is no such mask.
  NodeId maximumMasked(const Node& c, size_t side) const;

  // The groups in an order in which every kernel runs after those whose
  // values it reads (through views too); among the ready ones, the one whose
  // first node comes first.
  std::vector<int> runOrder(const std::map<int, Kernel>& byGroup) const;
  // runOrder's order of the groups it can place (all of them unless some wait for each other).
  std::vector<int> placeableOrder(const std::map<int, Kernel>& byGroup) const;

  // Whether the groups can run one after another with `merged` made one, `keep`.
  // `mergedEdges`: where given, the edges with the merged groups renamed,
  // which are groupEdges once the merge is made (mergeKnownEdges).
  bool runsInOrderMerging(const std::set<int>& merged, int keep,
                          std::vector<std::pair<int, int>>* mergedEdges = nullptr) const;
  void mergeKnownEdges(std::vector<std::pair<int, int>> edges);
  // groupEdges of the groups as they stand, made again only after a member
  // moves (most merges asked about are not made).
  const std::vector<std::pair<int, int>>& currentEdges() const;
  std::vector<std::pair<int, int>> groupEdges() const;

  int64_t reducedExtent(const Node& r, const std::string& x) const;

  std::vector<Kernel> collect() const;

  const Graph& g_;
  const FusionOptions& options_;
  std::vector<char> free_;                  // per node: freeNodesUnlessMatrixOperands
  std::vector<char> viewHere_;              // per node: viewHere
  std::vector<int> group_;                  // per node: its kernel's group, -1 for none (yet)
  std::map<int, std::set<NodeId>> members_;  // per group: its nodes (join, moveMembers)
  std::map<int, std::vector<NodeId>> matmuls_;  // per group: its long contractions (isLongContraction)
  std::set<int> verified_;  // groups known to stay acyclic (join)
  std::map<NodeId, std::vector<NodeId>> twins_;  // nodes with the same op, operands and axes as others, with them
  mutable std::map<NodeId, bool> remadeFromShort_;  // remadeFromShortContraction, once per node
  std::vector<std::vector<NodeId>> consumers_;
  mutable std::vector<signed char> feedsContraction_;  // per node: feedsContraction, -1 until asked
  std::set<NodeId> isOutput_;
  std::map<int, std::string> streamAxis_;
  std::map<int, uint64_t> groupVersion_;  // per group: changes when its members do (join, moveMembers)
  uint64_t versionClock_ = 0;             // the last version given: versions never repeat
  // groupEdges as of versionClock_ edgesVersion_ (runsInOrderMerging).
  mutable std::vector<std::pair<int, int>> edges_;
  mutable uint64_t edgesVersion_ = 0;
  mutable bool edgesKnown_ = false;
  // Per union of groups at their versions: whether it stays acyclic (tryMerge).
  std::map<std::vector<std::pair<int, uint64_t>>, bool> regionAcyclic_;
  std::map<int, NodeId> anchorOf_;  // each anchor's own group, before merging
  std::map<int, std::set<std::string>> wholeAxes_;  // reduced axes a kernel holds whole
};

}  // namespace llmc::fusion
