#include "ir/recompute.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "planning/fusion.h"

namespace llmc {

namespace {

// The forward values the forward pass stores for itself: the outputs of its
// kernels (fusion, planning/fusion.h, on the forward nodes alone) that another of its
// kernels reads, or the graph outputs. The backward reads these for the
// price of reading them; anything else it reads must be stored for it.
std::set<NodeId> storedByForward(const Graph& g) {
  Graph forward;
  forward.name = g.name;
  std::vector<NodeId> inForward(g.nodes.size(), -1), original;
  for (const Node& n : g.nodes) {
    if (n.adjoint) continue;
    Node copy = n;
    for (NodeId& operand : copy.operands) operand = inForward[static_cast<size_t>(operand)];
    inForward[static_cast<size_t>(n.id)] = forward.add(std::move(copy));
    original.push_back(n.id);
  }
  for (NodeId input : g.inputs) forward.inputs.push_back(inForward[static_cast<size_t>(input)]);
  for (const GraphOutput& o : g.outputs)
    if (!g.node(o.node).adjoint) forward.outputs.push_back({o.name, inForward[static_cast<size_t>(o.node)]});
  std::set<NodeId> stored;
  for (const Kernel& k : formKernels(forward))
    for (NodeId output : k.outputs) stored.insert(original[static_cast<size_t>(output)]);
  return stored;
}

// What remaking a value costs: a remade chain runs fused, its work beside its
// reads of the stored values it starts from, each read once (the chains of
// GELU's derivative share the one stored hidden value): the larger of the
// work at its units' peaks and those reads. An operand is remade where that
// adds no more than reading it would (memoised); views cost what their
// operands cost, constants and positions nothing, inputs cannot be remade.
// A chain that reads many stored arrays (the residual's gradient summed over
// layers) costs what those reads cost. Remaking pays when it costs less than
// having the value stored: writing it once and reading it back, or only
// reading it where the forward stores it for itself (q, k and v with their
// bias, which the forward's attention kernel reads as tiles).
//
// The stream splitter (below) asks about copies that fusion may or may not
// place inside their readers' streams; it keeps the stricter estimate that
// adds every operand's cost, shared reads and work included, so that only
// chains clearly cheaper than a stored value are copied.
class RemakeCost {
 public:
  enum class Estimate { Fused, EveryOperand };

  RemakeCost(const Graph& g, const Target& t, const CostOptions& o, Estimate estimate,
             std::set<NodeId> storedByForward = {})
      : g_(g), t_(t), o_(o), bandwidth_(t.level("GMEM").attainableBandwidth), estimate_(estimate),
        stored_(std::move(storedByForward)) {}

  bool cheaperThanStoring(NodeId v) {
    const Node& n = g_.node(v);
    if (isView(n) || isFree(g_, n)) return true;
    const double remaking = estimate_ == Estimate::Fused ? seconds(remake(v)) : everyOperandSeconds(v);
    return remaking < havingSeconds(v);
  }

  // Whether v, a value the forward stores for its own kernels, is made
  // elementwise from values in `held` alone, its work taking no longer than
  // writing it (with the Fused estimate).
  bool elementwiseFrom(NodeId v, const std::set<NodeId>& held) {
    if (!stored_.count(v) || remake(v).workSeconds > readSeconds(v)) return false;
    constexpr size_t kLongestChain = 4096;  // nodes walked, at most
    std::vector<NodeId> work(g_.node(v).operands.begin(), g_.node(v).operands.end());
    std::set<NodeId> seen;
    while (!work.empty()) {
      const NodeId id = work.back();
      work.pop_back();
      const Node& n = g_.node(id);
      if (held.count(id) || isFree(g_, n) || !seen.insert(id).second) continue;
      if (n.op == Op::Input || isAnchor(n) || seen.size() > kLongestChain) return false;
      work.insert(work.end(), n.operands.begin(), n.operands.end());
    }
    return true;
  }

 private:
  struct Remake {
    double workSeconds = 0;
    std::set<NodeId> reads;  // the stored values it starts from
  };

  double seconds(const Remake& r, const std::set<NodeId>& alreadyRead = {}) const {
    double reading = 0;
    for (NodeId v : r.reads)
      if (!alreadyRead.count(v)) reading += readSeconds(v);
    return std::max(r.workSeconds, reading);
  }

  const Remake& remake(NodeId v) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    const Node& n = g_.node(v);
    Remake r;
    if (n.op == Op::Input) {
      r.workSeconds = INFINITY;
    } else if (!isFree(g_, n)) {
      if (!isView(n)) {
        NodeWork work = nodeWork(g_, n, t_, o_);
        r.workSeconds = work.operations / t_.unit(work.unit).attainable;
      }
      for (NodeId operand : n.operands) {
        if (isFree(g_, g_.node(operand)) || r.reads.count(operand)) continue;
        const Remake& made = remake(operand);
        if (seconds(made, r.reads) <= readSeconds(operand)) {
          r.workSeconds += made.workSeconds;
          r.reads.insert(made.reads.begin(), made.reads.end());
        } else {
          r.reads.insert(operand);
        }
      }
    }
    return memo_.emplace(v, std::move(r)).first->second;
  }

  double everyOperandSeconds(NodeId v) {
    if (auto it = everyOperandMemo_.find(v); it != everyOperandMemo_.end()) return it->second;
    const Node& n = g_.node(v);
    double total = 0;
    if (n.op == Op::Input) {
      total = INFINITY;
    } else if (!isFree(g_, n)) {
      if (!isView(n)) {
        NodeWork work = nodeWork(g_, n, t_, o_);
        total = work.operations / t_.unit(work.unit).attainable;
      }
      for (NodeId operand : n.operands)
        if (!isFree(g_, g_.node(operand))) total += std::min(readSeconds(operand), everyOperandSeconds(operand));
    }
    everyOperandMemo_[v] = total;
    return total;
  }

  double readSeconds(NodeId v) const { return storedBytes(g_.node(v).type, o_) / bandwidth_; }

  double havingSeconds(NodeId v) const { return (stored_.count(v) ? 1 : 2) * readSeconds(v); }

  const Graph& g_;
  const Target& t_;
  const CostOptions& o_;
  const double bandwidth_;
  const Estimate estimate_;
  const std::set<NodeId> stored_;  // forward values the forward stores for itself
  std::map<NodeId, Remake> memo_;
  std::map<NodeId, double> everyOperandMemo_;
};

class Recomputer {
 public:
  // `kept`: forward values read as stored, whatever remaking them costs.
  // `held`: forward values the backward reads as stored anyway; with it, a
  // value the forward stores for itself is remade where it is made
  // elementwise from those alone, to hold less (RecomputeOptions::holdLess).
  Recomputer(const Graph& g, const Target& t, const CostOptions& o, const std::set<NodeId>& forwardStores,
             std::set<NodeId> kept, const std::set<NodeId>* held = nullptr)
      : g_(g), cost_(g, t, o, RemakeCost::Estimate::Fused, forwardStores), remap_(g.nodes.size(), -1),
        readers_(g.nodes.size()), kept_(std::move(kept)), held_(held) {
    for (const Node& n : g.nodes)
      for (NodeId operand : n.operands) readers_[idx(operand)].push_back(n.id);
  }

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

  // Forward graph id -> its remade copy in the graph run() made.
  const std::map<NodeId, NodeId>& copies() const { return copies_; }
  // The forward values the backward reads as stored (graph inputs among them).
  const std::set<NodeId>& readStored() const { return readStored_; }
  // The forward values remade to hold less, not because remaking is faster.
  const std::set<NodeId>& remadeToHoldLess() const { return remadeToHoldLess_; }

 private:
  static size_t idx(NodeId id) { return static_cast<size_t>(id); }

  // The node the backward pass reads for forward value v: v itself when it
  // is stored, else a copy computed again from what is stored.
  NodeId materialize(NodeId v) {
    if (auto it = copies_.find(v); it != copies_.end()) return it->second;
    const Node& n = g_.node(v);
    if (isFree(g_, n)) return remap_[idx(v)];
    if (n.op == Op::Input || masksItsMaximum(v) || kept_.count(v) ||
        !(cost_.cheaperThanStoring(v) || holdsLessRemade(v))) {
      if (!isView(n)) readStored_.insert(v);
      return remap_[idx(v)];
    }
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

  bool holdsLessRemade(NodeId v) {
    if (!held_ || !cost_.elementwiseFrom(v, *held_)) return false;
    remadeToHoldLess_.insert(v);
    return true;
  }

  // Whether v is a maximum over some axes, or what one reduces,
  // that the backward compares for equality (the maximum's gradient mask, x ==
  // max(x)): both sides must be the values the forward computed. A copy made
  // again elsewhere (another kernel, another order of summation, another exp)
  // can miss the maximum by a rounding, and the mask then holds no position.
  bool masksItsMaximum(NodeId v) const {
    auto isMaximum = [&](NodeId id) {
      const Node& m = g_.node(id);
      return !m.adjoint && m.op == Op::Reduce && m.reduce == ReduceOp::Max;
    };
    auto comparedInBackward = [&](NodeId id) {
      return std::any_of(readers_[idx(id)].begin(), readers_[idx(id)].end(),
                         [&](NodeId r) { return g_.node(r).adjoint && g_.node(r).op == Op::Compare; });
    };
    if (isMaximum(v)) return comparedInBackward(v);
    return comparedInBackward(v) && std::any_of(readers_[idx(v)].begin(), readers_[idx(v)].end(), isMaximum);
  }

  const Graph& g_;
  RemakeCost cost_;
  Graph out_;
  std::vector<NodeId> remap_;       // forward graph id -> id in out_
  std::vector<std::vector<NodeId>> readers_;  // forward graph id -> the nodes that read it
  std::map<NodeId, NodeId> copies_; // forward graph id -> its recomputed copy in out_
  const std::set<NodeId> kept_;
  const std::set<NodeId>* held_;
  std::set<NodeId> readStored_, remadeToHoldLess_;
};

// A value read by reductions over different axes cannot be made inside both
// of their streams: one kernel would have to store it for the other (the
// gradient of attention's scores, read by dK's sum over the queries and dQ's
// sum over the keys). When making it costs less than writing and reading it,
// each group of readers that reduce over the same axes gets its own copy, so
// that every stream recomputes it on chip.
class StreamSplitter {
 public:
  // `whole`: values never split, whatever remaking them costs.
  StreamSplitter(const Graph& g, const Target& t, const CostOptions& o, std::set<NodeId> whole)
      : g_(g), cost_(g, t, o, RemakeCost::Estimate::EveryOperand), nodes_(g.nodes), readers_(g.nodes.size()),
        copiesAfter_(g.nodes.size()), whole_(std::move(whole)) {}

  Graph run() {
    for (const Node& n : g_.nodes)
      for (NodeId operand : n.operands) readers_[idx(operand)].push_back(n.id);
    for (const GraphOutput& o : g_.outputs) outputs_.insert(o.node);
    keys_.resize(g_.nodes.size());
    for (size_t i = g_.nodes.size(); i-- > 0;) split(static_cast<NodeId>(i));
    return renumbered();
  }

  // Per value of g_ that was split: its node and its copies' in the graph run() made.
  const std::map<NodeId, std::vector<NodeId>>& splitValues() const { return placed_; }
  // A node of g_ in the graph run() made.
  NodeId placed(NodeId id) const { return newId_[idx(id)]; }

 private:
  static size_t idx(NodeId id) { return static_cast<size_t>(id); }

  // The node of g_ that `id` is or copies.
  NodeId originalOf(NodeId id) const {
    return idx(id) < g_.nodes.size() ? id : copiedFrom_[idx(id) - g_.nodes.size()];
  }

  // Where a reader leads: the axes it reduces and, where its result is
  // reduced further over an axis it keeps, where that goes (attention's
  // scores, a contraction over d, lead to dK/dV's stream over the queries or
  // to dQ's over the keys: a copy for each); or (not reducing) where its own
  // readers lead. Reductions over the same axes whose results leave the
  // stream (dK and dV, one an output, the other read by RoPE's backward)
  // lead to one stream: what they read is made once, in it.
  std::string keyOf(NodeId reader) const {
    const Node& n = nodes_[idx(reader)];
    if ((n.op == Op::Contract || n.op == Op::Reduce) && !n.axes.empty()) {
      std::string key;
      for (const auto& a : n.axes) key += a + " ";
      const std::string& next = keys_[idx(reader)];
      return reducedFurther(n, next) ? key + "-> " + next : key;
    }
    return keys_[idx(reader)];
  }

  // Whether a key's first reduction (its axes before "->") takes an axis of n.
  static bool reducedFurther(const Node& n, const std::string& key) {
    const size_t arrow = key.find("->");
    std::string axes = key.substr(0, arrow == std::string::npos ? key.size() : arrow);
    if (arrow == std::string::npos && (axes.empty() || axes[0] == '@')) return false;
    size_t at = 0;
    while (at < axes.size()) {
      const size_t end = axes.find(' ', at);
      const std::string axis = axes.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (!axis.empty() && n.type.has(axis)) return true;
      if (end == std::string::npos) break;
      at = end + 1;
    }
    return false;
  }

  void split(NodeId v) {
    const Node n = nodes_[idx(v)];  // a copy: each copy made below is appended to nodes_
    std::map<std::string, std::vector<NodeId>> byKey;
    // A remade reduction or contraction is a stream's worth of work: readers
    // of it that lead to stored values ("@..."), not into another stream,
    // share one copy, made once and read at its own points (a gated MLP's
    // hidden value, remade for its activation's gradient and for the weight
    // gradient's operand). An elementwise value is cheap to copy: each stored
    // value's kernel makes its own.
    auto groupKey = [&](const std::string& key) {
      return isAnchor(n) && key.starts_with("@") ? std::string("@") : key;
    };
    for (NodeId r : readers_[idx(v)]) byKey[groupKey(keyOf(r))].push_back(r);
    if (outputs_.count(v)) byKey[groupKey("@output")];
    // Only the backward's values are split: the forward's readers of one
    // value reduce over one axis already (its streams were planned whole).
    // A value stored once for long matmuls (dlogits) is read as stored
    // tiles by every one of them: a copy would only store it twice.
    std::vector<NodeId> readers;  // in g_'s numbering: a copy reads as its original
    for (NodeId r : readers_[idx(v)]) readers.push_back(originalOf(r));
    const bool movable = n.adjoint && !whole_.count(v) && n.op != Op::Input && !isFree(g_, n) && n.op != Op::Gather &&
                         n.op != Op::ScatterAdd && n.op != Op::Scan && !storedForMatmul(g_, originalOf(v), readers);
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
  Graph renumbered() {
    Graph out;
    out.name = g_.name;
    std::vector<NodeId>& newId = newId_;
    newId.assign(nodes_.size(), -1);
    auto place = [&](NodeId id) {
      Node n = nodes_[idx(id)];
      for (NodeId& operand : n.operands) operand = newId[idx(operand)];
      newId[idx(id)] = out.add(std::move(n));
    };
    for (const Node& n : g_.nodes) {
      place(n.id);
      for (NodeId copy : copiesAfter_[idx(n.id)]) place(copy);
      if (copiesAfter_[idx(n.id)].empty()) continue;
      std::vector<NodeId>& placed = placed_[n.id];
      placed.push_back(newId[idx(n.id)]);
      for (NodeId copy : copiesAfter_[idx(n.id)]) placed.push_back(newId[idx(copy)]);
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
  const std::set<NodeId> whole_;
  std::map<NodeId, std::vector<NodeId>> placed_;
  std::vector<NodeId> newId_;  // per node of nodes_: its id in the graph run() made
};

// The values fusion (planning/fusion.h) writes to GMEM, and those of them
// written by kernels of elementwise work alone.
struct StoredValues {
  std::set<NodeId> all, alone;
};

StoredValues storedValues(const Graph& g, const std::vector<Kernel>& kernels) {
  StoredValues stored;
  for (const Kernel& k : kernels) {
    stored.all.insert(k.outputs.begin(), k.outputs.end());
    if (std::none_of(k.nodes.begin(), k.nodes.end(), [&](NodeId id) { return isAnchor(g.node(id)); }))
      stored.alone.insert(k.outputs.begin(), k.outputs.end());
  }
  return stored;
}

// One split of a remade graph's streams (StreamSplitter), `whole` left
// whole: the graph, the kernels fusion makes of it, and per value split,
// its node and its copies' in that graph.
struct Split {
  Graph graph;
  std::vector<Kernel> kernels;
  std::map<NodeId, std::vector<NodeId>> splitValues;
};

Split splitOnce(const Graph& remade, const Target& target, const CostOptions& options, const std::set<NodeId>& whole,
                std::vector<NodeId>* placed = nullptr) {
  StreamSplitter splitter(remade, target, options, whole);
  Split split;
  split.graph = splitter.run();
  split.kernels = formKernels(split.graph);
  split.splitValues = splitter.splitValues();
  if (placed)
    for (size_t id = 0; id < remade.nodes.size(); ++id) placed->push_back(splitter.placed(static_cast<NodeId>(id)));
  return split;
}

// What the recompute rounds made: the graph and whether values were remade
// to hold less; then, where they were, its first split.
struct Remade {
  Graph graph;
  bool heldLess = false;
  std::optional<Split> firstSplit;
};

// The Recomputer's rounds, each correcting the last by what fusion stores.
// `held` null: time alone decides; else what the backward holds anyway,
// from which values are remade to hold less (none found: heldLess false, at
// once).
Remade remakeForBackward(const Graph& graph, const Target& target, const CostOptions& options,
                         const std::set<NodeId>& forwardStores, const std::set<NodeId>* held) {
  constexpr int kRounds = 3;
  std::set<NodeId> kept;
  Remade out;
  for (int round = 0; round < kRounds; ++round) {
    Recomputer recomputer(graph, target, options, forwardStores, kept, held);
    out.graph = recomputer.run();
    out.heldLess = !recomputer.remadeToHoldLess().empty();
    if (held && !out.heldLess) return out;
    // Values remade to hold less are placed as the streams are split (a
    // copy each; shared with other backward work before): asked there.
    std::vector<NodeId> placedAt;
    std::vector<Kernel> kernels;
    if (out.heldLess) out.firstSplit = splitOnce(out.graph, target, options, {}, &placedAt);
    else kernels = formKernels(out.graph);
    const StoredValues stored = out.heldLess ? storedValues(out.firstSplit->graph, out.firstSplit->kernels)
                                             : storedValues(out.graph, kernels);
    auto placed = [&](NodeId id) { return out.heldLess ? placedAt[static_cast<size_t>(id)] : id; };
    const size_t before = kept.size();
    for (const auto& [value, copy] : recomputer.copies()) {
      if (recomputer.remadeToHoldLess().count(value)) {
        if (stored.alone.count(placed(copy))) kept.insert(value);
      } else if ((forwardStores.count(value) || graph.node(value).op == Op::Contract) && stored.all.count(placed(copy))) {
        kept.insert(value);
      }
    }
    if (kept.size() == before) break;
  }
  return out;
}

// The StreamSplitter's rounds: a value of which more than one copy is
// stored is made once. `first`: the first round's split, where known.
Split splitStreams(const Graph& remade, const Target& target, const CostOptions& options,
                   std::optional<Split> first = std::nullopt) {
  constexpr int kRounds = 3;
  std::set<NodeId> whole;
  Split split;
  for (int round = 0; round < kRounds; ++round) {
    split = round == 0 && first ? std::move(*first) : splitOnce(remade, target, options, whole);
    const std::set<NodeId> stored = storedValues(split.graph, split.kernels).all;
    const size_t before = whole.size();
    for (const auto& [value, made] : split.splitValues)
      if (std::count_if(made.begin(), made.end(), [&](NodeId id) { return stored.count(id); }) > 1) whole.insert(value);
    if (whole.size() == before) break;
  }
  return split;
}

// The most bytes the kernels' stored values hold at once, the kernels run
// in fusion's order: a value lives from the kernel that writes it to the
// last that reads it (a graph output to the end). Inputs are left out,
// held the same whatever is remade. The memory plan (planning/memory_plan.h)
// places the launches' arrays the same way.
double peakHeldBytes(const Graph& g, const std::vector<Kernel>& kernels, const CostOptions& options) {
  std::map<NodeId, std::pair<size_t, size_t>> lifetime;  // value -> (written, last read)
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (NodeId v : kernels[k].outputs) lifetime[v] = {k, k};
    for (NodeId v : kernels[k].inputs)
      if (auto it = lifetime.find(v); it != lifetime.end()) it->second.second = k;
  }
  for (const GraphOutput& o : g.outputs)
    if (auto it = lifetime.find(o.node); it != lifetime.end()) it->second.second = kernels.size();
  std::vector<double> change(kernels.size() + 2, 0);
  for (const auto& [v, life] : lifetime) {
    const double bytes = storedBytes(g.node(v).type, options);
    change[life.first] += bytes;
    change[life.second + 1] -= bytes;
  }
  double alive = 0, peak = 0;
  for (double c : change) peak = std::max(peak, alive += c);
  return peak;
}

}  // namespace

// Both decisions assume fusion takes a remade value into the kernels that
// read it. Where it does not (a remade contraction is a kernel of its own,
// and so is each copy of a split one), the value is stored all the same and
// the remaking is work for nothing: such a forward value is read as stored
// where the forward stores it anyway or it is a contraction (stored by the
// forward too, it costs a write there against a whole contraction here:
// linear attention's running state, 6.5 us), and such a split value is
// made once. A value remade to hold less is stored again where a kernel
// with other work makes it (the GEMM of GELU's derivative, beside which it
// costs that one write) and read as stored where it would be a kernel of
// its own, which would read its operands once more.
// Fusion is asked again after each correction, a few rounds at most.
// Remaking to hold less is planned after time alone has said what the
// backward holds anyway, and kept where it lowers the most the step holds
// at once (a value held from the forward to the backward of one layer of
// many is alive at that peak; in a lone layer the peak may lie elsewhere,
// and the write would buy nothing).
Graph recompute(const Graph& graph, const Target& target, const CostOptions& options, const RecomputeOptions& policy) {
  const std::set<NodeId> forwardStores = storedByForward(graph);
  auto timeAlone = [&] { return splitStreams(remakeForBackward(graph, target, options, forwardStores, nullptr).graph, target, options); };
  if (!policy.holdLess) return timeAlone().graph;
  // What the backward reads stored when time alone decides, before fusion
  // corrects it; the two plans are then made side by side.
  Recomputer first(graph, target, options, forwardStores, {});
  first.run();
  const std::set<NodeId> held = first.readStored();
  std::future<Split> timeAloneSplit = std::async(std::launch::async, timeAlone);
  Remade holdingLess = remakeForBackward(graph, target, options, forwardStores, &held);
  std::optional<Split> splitHoldingLess;
  if (holdingLess.heldLess) splitHoldingLess = splitStreams(holdingLess.graph, target, options, std::move(holdingLess.firstSplit));
  Split split = timeAloneSplit.get();
  if (!splitHoldingLess) return std::move(split.graph);
  const bool holdsLess = peakHeldBytes(splitHoldingLess->graph, splitHoldingLess->kernels, options) <
                         peakHeldBytes(split.graph, split.kernels, options);
  return std::move(holdsLess ? splitHoldingLess->graph : split.graph);
}

}  // namespace llmc
