#include "codegen/launch_list.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>

#include "analysis/streamability.h"
#include "analysis/strided_view.h"
#include "codegen/cuda_kernel_writer.h"
#include "codegen/concat_parts.h"
#include "planning/flat_points.h"
#include "planning/row_products.h"
#include "planning/staged_rows.h"
#include "planning/fusion.h"
#include "ir/print.h"

namespace llmc {

namespace {
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

namespace {

struct Storage {
  std::string dtype, ctype;
  int bytes;
};

Storage storageOf(DType d, StorageType storage, bool accumulatedByAtomics) {
  switch (d) {
    case DType::Bool: return {"bool", "unsigned char", 1};
    case DType::I32: return {"i32", "int", 4};
    case DType::U16: return {"u16", "unsigned short", 2};
    case DType::F64: return {"f64", "double", 8};
    case DType::F16:
    case DType::BF16:
    case DType::F32: break;
  }
  // Atomic adds (a scatter-add) accumulate in f32 whatever the storage.
  if (storage == StorageType::BF16 && !accumulatedByAtomics) return {"bf16", "llmc_bf16", 2};
  return {"f32", "float", 4};
}

// A statistic: a sum or maximum over an axis (not a contraction), or
// elementwise arithmetic on statistics and constants — a layernorm's mean and
// variance, a softmax's running maximum and sum, a loss per row. Stored in
// bf16 they would lose what the backward needs: exp(s - m) with m rounded to
// bf16 is off by up to 2^-8 * |m| in the exponent, and the mean's rounding
// shifts every normalised value of its row. They are few values (one per
// row), so they are kept in f32 whatever the storage, as PyTorch's autocast
// and llm.c keep them.
bool isStatistic(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  switch (n.op) {
    case Op::Reduce: return true;
    case Op::Unary:
    case Op::Binary: {
      bool statistic = false;
      for (NodeId o : n.operands) {
        if (g.node(o).op == Op::Constant) continue;
        if (!isStatistic(g, o)) return false;
        statistic = true;
      }
      return statistic;
    }
    default: return false;
  }
}

std::set<NodeId> ancestorsWithin(const Graph& g, NodeId id, const std::set<NodeId>& within) {
  std::set<NodeId> out;
  std::vector<NodeId> work = g.node(id).operands;
  while (!work.empty()) {
    NodeId n = work.back();
    work.pop_back();
    if (!within.count(n) || !out.insert(n).second) continue;
    for (NodeId o : g.node(n).operands) work.push_back(o);
  }
  return out;
}

// The stored values a launch reads: operands of what it computes, looked
// through the views and constants it computes inline.
std::set<NodeId> readsOf(const Graph& g, const LaunchPlan& plan, const std::set<NodeId>& stored) {
  std::set<NodeId> reads;
  if (plan.kind == LaunchPlan::Kind::Clear) return reads;
  std::set<NodeId> seen;
  std::vector<NodeId> work;
  for (NodeId n : plan.computed) work.insert(work.end(), g.node(n).operands.begin(), g.node(n).operands.end());
  for (NodeId n : plan.outputs) work.insert(work.end(), g.node(n).operands.begin(), g.node(n).operands.end());
  while (!work.empty()) {
    NodeId n = work.back();
    work.pop_back();
    if (plan.computed.count(n) || !seen.insert(n).second) continue;
    if (stored.count(n)) reads.insert(n);
    else work.insert(work.end(), g.node(n).operands.begin(), g.node(n).operands.end());
  }
  return reads;
}

// The nodes of plan p that depend on p's own values through other launches:
// they cannot run in the same launch as the rest of p.
std::set<NodeId> reachedThroughOthers(const Graph& g, const LaunchPlan& p, const std::vector<std::vector<NodeId>>& consumers,
                                      const std::set<NodeId>& elsewhere) {
  std::set<NodeId> late;
  std::set<std::pair<NodeId, bool>> seen;
  std::vector<std::pair<NodeId, bool>> work;  // (node, whether the path has left p)
  for (NodeId n : p.computed) work.push_back({n, false});
  while (!work.empty()) {
    auto [n, left] = work.back();
    work.pop_back();
    for (NodeId c : consumers[static_cast<size_t>(n)]) {
      bool inP = p.computed.count(c) > 0;
      if (inP && !left) continue;  // p's own dataflow
      if (inP) late.insert(c);
      bool nowLeft = left || (!inP && elsewhere.count(c));
      if (seen.insert({c, nowLeft}).second) work.push_back({c, nowLeft});
    }
  }
  (void)g;
  return late;
}

// The launch zeroing `id` (named `idName`) before launch `launchName` of
// kernel `kernel` adds into it atomically.
ScheduledLaunch clearLaunch(const std::string& launchName, int kernel, NodeId id, const std::string& idName) {
  ScheduledLaunch clear;
  clear.plan.kind = LaunchPlan::Kind::Clear;
  clear.plan.name = fmt::format("{}_clear_{}", launchName, idName);
  clear.plan.outputs = {id};
  clear.kernel = kernel;
  clear.role = "clear";
  return clear;
}

// Splits the first tile launch not yet ordered (`done`) that has a part
// depending on itself through other launches: that part becomes a launch of
// its own, right after it, and what it reads of the rest is stored. False
// where no launch can be split so.
bool splitLaunchOnItself(const Graph& g, std::vector<ScheduledLaunch>& plans, const std::vector<bool>& done,
                         const std::vector<std::vector<NodeId>>& consumers, std::set<NodeId>& stored) {
  for (size_t i = 0; i < plans.size(); ++i) {
    if (done[i] || plans[i].plan.kind != LaunchPlan::Kind::Tile) continue;
    std::set<NodeId> elsewhere;
    for (size_t j = 0; j < plans.size(); ++j)
      if (j != i) elsewhere.insert(plans[j].plan.computed.begin(), plans[j].plan.computed.end());
    std::set<NodeId> late = reachedThroughOthers(g, plans[i].plan, consumers, elsewhere);
    if (late.empty() || late.size() == plans[i].plan.computed.size()) continue;
    ScheduledLaunch early = plans[i], rest = plans[i];
    early.plan.computed.clear();
    early.plan.outputs.clear();
    rest.plan.computed = late;
    rest.plan.outputs.clear();
    rest.plan.name += "_late";
    for (NodeId n : plans[i].plan.computed)
      if (!late.count(n)) early.plan.computed.insert(n);
    // What the late part reads of the early part is stored.
    for (NodeId r : readsOf(g, rest.plan, early.plan.computed)) stored.insert(r), early.plan.outputs.push_back(r);
    for (NodeId o : plans[i].plan.outputs) {
      if (late.count(o)) rest.plan.outputs.push_back(o);
      else if (std::find(early.plan.outputs.begin(), early.plan.outputs.end(), o) == early.plan.outputs.end())
        early.plan.outputs.push_back(o);
    }
    for (ScheduledLaunch* part : {&early, &rest}) {
      std::vector<Axis> group;
      for (const Axis& a : part->plan.groupAxes)
        if (std::any_of(part->plan.outputs.begin(), part->plan.outputs.end(),
                        [&](NodeId o) { return g.node(o).type.has(a.name); }))
          group.push_back(a);
      part->plan.groupAxes = group;
    }
    // A late part that sums a whole array to a scalar adds it up across the
    // grid by atomics (isGridSum) where the launch as a whole did not: the
    // sum is zeroed first, as kernelLaunches zeroes a whole launch's.
    const bool newGridSum = isGridSum(g, rest.plan) && !isGridSum(g, plans[i].plan);
    plans[i] = early;
    plans.insert(plans.begin() + static_cast<std::ptrdiff_t>(i) + 1, rest);
    if (newGridSum) {
      const NodeId sum = wholeArraySumOf(g, rest.plan.outputs, rest.plan.computed);
      plans.insert(plans.begin() + static_cast<std::ptrdiff_t>(i),
                   clearLaunch(rest.plan.name, rest.kernel, sum, printedNames(g)[static_cast<size_t>(sum)]));
    }
    return true;
  }
  return false;
}

// A launch that holds rows whole (planning/staged_rows.h) and writes an
// array like one it reads, along those rows (the classifier's logits'
// gradient beside the logits), can write it there (emit_cuda.cpp,
// stagedRowInPlace) only as the array's last reader: where another launch
// ready now reads the array too (the loss's gather of the target's logit),
// that one goes first. `next`: the launch that would run; `ready(i)`:
// whether launch i may run now.
size_t laterReaderFirst(const Graph& g, const std::vector<ScheduledLaunch>& plans, const std::set<NodeId>& stored,
                        size_t next, const std::function<bool(size_t)>& ready) {
  const LaunchPlan& plan = plans[next].plan;
  if (plan.kind != LaunchPlan::Kind::Tile || !plan.streamAxis.empty()) return next;
  std::set<std::string> split;
  for (const auto& [axis, perBlock] : plan.splitTiles) split.insert(axis);
  const std::string held = heldRowAxis(g, plan.computed, plan.groupAxes, split);
  if (held.empty()) return next;
  for (NodeId read : readsOf(g, plan, stored)) {
    if (!g.node(read).type.has(held) ||
        std::none_of(plan.outputs.begin(), plan.outputs.end(), [&](NodeId o) { return g.node(o).type == g.node(read).type; }))
      continue;
    for (size_t j = 0; j < plans.size(); ++j)
      if (j != next && ready(j) && readsOf(g, plans[j].plan, stored).count(read)) return j;
  }
  return next;
}

// Launch order: a launch after those that write what it reads, and after
// earlier writers of what it writes (a clear before its scatter). An array
// in `writtenWith` is written by the launches that write the arrays listed
// for it: a concatenation made where its parts lie by its parts', a value
// made by another launch alike (mergeTwins) by that one. Where the fusion
// made kernels that need each other's results, the part of a kernel that
// depends on another launch moves to a launch of its own, after it.
std::vector<size_t> orderLaunches(const Graph& g, std::vector<ScheduledLaunch>& plans, std::set<NodeId>& stored,
                                  const std::map<NodeId, std::vector<NodeId>>& writtenWith) {
  std::vector<std::vector<NodeId>> consumers(g.nodes.size());
  for (const Node& n : g.nodes)
    for (NodeId o : n.operands) consumers[static_cast<size_t>(o)].push_back(n.id);
  for (;;) {
    std::map<NodeId, std::vector<size_t>> writers;
    for (size_t i = 0; i < plans.size(); ++i)
      for (NodeId o : plans[i].plan.outputs) writers[o].push_back(i);
    for (const auto& [holder, parts] : writtenWith)
      for (NodeId part : parts) {
        const std::vector<size_t> w = writers[part];
        writers[holder].insert(writers[holder].end(), w.begin(), w.end());
      }
    std::vector<std::set<size_t>> after(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
      for (NodeId r : readsOf(g, plans[i].plan, stored))
        for (size_t w : writers[r]) after[i].insert(w);
      for (NodeId o : plans[i].plan.outputs)
        for (size_t w : writers[o])
          if (w < i) after[i].insert(w);
    }
    std::vector<size_t> order;
    std::vector<bool> done(plans.size(), false);
    auto ready = [&](size_t i) {
      return !done[i] && std::all_of(after[i].begin(), after[i].end(), [&](size_t d) { return done[d]; });
    };
    while (order.size() < plans.size()) {
      size_t next = plans.size();
      for (size_t i = 0; i < plans.size() && next == plans.size(); ++i)
        if (ready(i)) next = i;
      if (next == plans.size()) break;
      next = laterReaderFirst(g, plans, stored, next, ready);
      done[next] = true;
      order.push_back(next);
    }
    if (order.size() == plans.size()) return order;

    // Split the first tile launch left that has a part depending on itself.
    if (!splitLaunchOnItself(g, plans, done, consumers, stored)) {
      std::string cycle;
      for (size_t i = 0; i < plans.size(); ++i)
        if (!done[i]) cycle += " " + plans[i].plan.name;
      throw std::logic_error("emit cuda: these launches depend on each other in a cycle:" + cycle);
    }
  }
}

// Builds the launch list of planLaunches, one concern per method.
class LaunchPlanner {
 public:
  LaunchPlanner(const Graph& g, const std::vector<PlannedKernel>& kernels, const EmitOptions& options)
      : g_(g), kernels_(kernels), options_(options) {
    list_.names = printedNames(g);
  }

  LaunchList run() {
    readers_.assign(g_.nodes.size(), 0);
    for (const Node& n : g_.nodes)
      for (NodeId x : n.operands) ++readers_[static_cast<size_t>(x)];
    storedValues();
    for (const PlannedKernel& pk : kernels_) kernelLaunches(pk);
    mergeTwins();
    assembleConcats();
    outputCopies();
    std::map<NodeId, std::vector<NodeId>> writtenWith;
    for (const auto& [part, where] : partOf_) writtenWith[where.holder].push_back(part);
    for (const auto& [twin, original] : twinOf_) writtenWith[twin].push_back(original);
    const std::vector<size_t> order = orderLaunches(g_, plans_, list_.stored, writtenWith);
    storage(order);
    for (size_t i : order) list_.launches.push_back(std::move(plans_[i]));
    return std::move(list_);
  }

 private:
  const std::string& name(NodeId id) const { return list_.names[static_cast<size_t>(id)]; }

  // What is stored in GMEM: the graph's inputs, what crosses kernels, the
  // scatter-adds (accumulated by atomics), and graph outputs no kernel makes.
  void storedValues() {
    list_.stored.insert(g_.inputs.begin(), g_.inputs.end());
    for (const PlannedKernel& pk : kernels_) {
      list_.stored.insert(pk.kernel.outputs.begin(), pk.kernel.outputs.end());
      for (NodeId id : pk.kernel.nodes)
        if (g_.node(id).op == Op::ScatterAdd) list_.stored.insert(id), atomics_.insert(id);
    }
  }

  // Zeroes the f32 array that kernel k's atomic adds accumulate into.
  void clearBefore(const Kernel& k, NodeId id) {
    if (!cleared_.insert(id).second) return;  // split-K and a grid sum both add atomically into it
    plans_.push_back(clearLaunch(k.name, k.id, id, name(id)));
  }

  // A planned kernel's launches: its scatter-adds, then its tile launch with
  // the clears its atomics need before it.
  void kernelLaunches(const PlannedKernel& pk) {
    const Kernel& k = pk.kernel;
    std::set<NodeId> nodes(k.nodes.begin(), k.nodes.end());
    // A scatter-add is a launch of its own over its values, into an array
    // zeroed first; the kernel's other work reads its result from GMEM.
    for (NodeId id : k.nodes) {
      if (!atomics_.count(id)) continue;
      clearBefore(k, id);
      ScheduledLaunch scatter;
      scatter.plan.kind = LaunchPlan::Kind::Scatter;
      scatter.plan.name = fmt::format("{}_scatter_{}", k.name, name(id));
      scatter.plan.outputs = {id};
      scatter.plan.computed = ancestorsWithin(g_, id, nodes);
      scatter.kernel = k.id;
      scatter.role = "scatter";
      plans_.push_back(scatter);
    }
    ScheduledLaunch tile;
    tile.plan.name = k.name;
    tile.kernel = k.id;
    tile.role = "tile";
    for (NodeId id : k.nodes)
      if (!atomics_.count(id)) tile.plan.computed.insert(id);
    for (NodeId id : k.outputs)
      if (!atomics_.count(id)) tile.plan.outputs.push_back(id);
    if (tile.plan.outputs.empty()) return;
    for (const Axis& a : pk.shape.groupAxes) {
      bool used = std::any_of(tile.plan.outputs.begin(), tile.plan.outputs.end(),
                              [&](NodeId o) { return g_.node(o).type.has(a.name); });
      if (!used) continue;
      tile.plan.groupAxes.push_back(a);
      auto t = pk.partition.groupTiles.find(a.name);
      tile.plan.tiles[a.name] = t == pk.partition.groupTiles.end() ? a.size : std::min(t->second, a.size);
    }
    if (pk.scan) {
      // Fusion gives a scan its prologue alone (fusion.cpp, holdsScan).
      if (tile.plan.outputs != std::vector<NodeId>{pk.scan->scan})
        throw std::logic_error(fmt::format("emit cuda: scan kernel {} stores more than its scan", k.name));
      tile.plan.kind = LaunchPlan::Kind::Scan;
      tile.plan.scan = pk.scan;
    }
    tile.plan.streamAxis = k.streamAxis;
    tile.plan.streamChunk = pk.partition.streamChunk;
    tile.plan.gemmTile = pk.gemmTile;
    splitK(pk, tile.plan);
    for (NodeId o : tile.plan.outputs)
      if (!tile.plan.splitTiles.empty() && addsPartialSums(g_.node(o).type, tile.plan.splitTiles)) {
        splitSums_.insert(o);
        clearBefore(k, o);
      }
    // A row product's blocks each add their rows' share (planning/row_products.h).
    for (NodeId o : rowProductOutputs(g_, tile.plan.outputs, k.nodes, k.streamAxis)) {
      splitSums_.insert(o);
      clearBefore(k, o);
    }
    // A sum of a whole array to a scalar adds up across the grid by atomics,
    // into an f32 array zeroed first.
    if (isGridSum(g_, tile.plan)) {
      const NodeId sum = wholeArraySumOf(g_, tile.plan.outputs, tile.plan.computed);
      gridSums_.insert(sum);
      clearBefore(k, sum);
    }
    plans_.push_back(tile);
  }

  // Split-K where the partition shares a reduced axis out across blocks and
  // every output is a plain sum over it (partial sums added atomically into
  // f32 arrays zeroed first) or lies along it (each block its share).
  void splitK(const PlannedKernel& pk, LaunchPlan& plan) const {
    for (const auto& [axis, perBlock] : pk.partition.splitTiles) {
      const StreamAnalysis sums = analyzeStream(g_, plan.computed, axis);
      const bool plainSums = sums.streamable && sums.tail.empty() &&
                             std::all_of(plan.outputs.begin(), plan.outputs.end(), [&](NodeId o) {
                               return sharesStreamOut(g_, sums, plan.computed, o, axis);
                             });
      int64_t extent = 0;
      for (NodeId id : plan.computed)
        for (NodeId o : g_.node(id).operands)
          if (const Axis* a = g_.node(o).type.find(axis)) extent = a->size;
      if (plainSums && perBlock < extent) plan.splitTiles[axis] = perBlock;
    }
  }

  // Graph outputs that are views or constants: copied into an array of their
  // own, by a launch counted with the kernel that writes what it reads (its
  // time a helper's, emit_cuda.cpp), but where the output is its source's
  // bytes (sameBytes) or its parts' (concat_parts.h). A block copies at least
  // kCopyElementsPerBlock elements, whole innermost axes first, so that its
  // accesses coalesce and a small head dimension is no grid of tiny blocks.
  static constexpr int64_t kCopyElementsPerBlock = 4096;
  void outputCopies() {
    for (const GraphOutput& o : g_.outputs) {
      if (list_.stored.count(o.node)) continue;
      if (const NodeId source = sameBytes(o.node); source >= 0) {
        aliasOf_[o.node] = source;  // the output is its source's buffer (storage(), graphOutputs)
        continue;
      }
      list_.stored.insert(o.node);
      if (placeParts(o)) continue;
      ScheduledLaunch copy;
      copy.plan.name = fmt::format("copy_{}", name(o.node));
      copy.plan.outputs = {o.node};
      copy.plan.computed = {o.node};
      copy.role = "copy";
      copy.kernel = writerOf(o.node);
      const Type& t = g_.node(o.node).type;
      copy.plan.groupAxes = t.axes;
      int64_t elements = 1;
      for (size_t i = t.axes.size(); i-- > 0;) {
        const int64_t tile = std::clamp<int64_t>(ceilDiv(kCopyElementsPerBlock, elements), 1, t.axes[i].size);
        copy.plan.tiles[t.axes[i].name] = tile;
        elements *= tile;
      }
      plans_.push_back(copy);
    }
  }

  // Each part of an output concatenated from parts along its first axis
  // written where it lies in the output, with no copy (concat_parts.h):
  // true where `o` is one. Parts kept in f32 (atomics' sums, statistics)
  // cannot lie in an output stored in bf16; an output kept in f32 keeps its
  // parts so. Each part is one block of the output (the data-parallel
  // reduction averages it there).
  bool placeParts(const GraphOutput& o) {
    if (readers_[static_cast<size_t>(o.node)] != 0) return false;
    const bool f32 = options_.storage == StorageType::F32 || options_.f32Values.count(o.name) > 0;
    std::set<NodeId> excluded;
    for (const auto& [output, source] : aliasOf_) excluded.insert(source);
    if (!f32) excluded = keptInF32(std::move(excluded));
    for (const auto& [part, where] : partOf_) excluded.insert({part, where.holder});  // one level of parts
    const std::vector<PlacedPart> parts = partsInPlace(g_, o.node, list_.stored, excluded, readers_);
    if (parts.empty() || !std::all_of(parts.begin(), parts.end(), [](const PlacedPart& p) { return p.contiguous; }))
      return false;
    for (const PlacedPart& p : parts) partOf_[p.array] = {o.node, p};
    return true;
  }

  // `excluded` and the arrays held in f32 whatever the storage: what atomics
  // accumulate into, statistics, scalars.
  std::set<NodeId> keptInF32(std::set<NodeId> excluded) const {
    for (const std::set<NodeId>* kept : {&atomics_, &gridSums_, &splitSums_}) excluded.insert(kept->begin(), kept->end());
    for (NodeId id : list_.stored)
      if (isStatistic(g_, id) || g_.node(id).type.axes.empty()) excluded.insert(id);
    return excluded;
  }

  // A kernel whose launch makes only values that another kernel's launch
  // makes too makes no launch: its arrays are that launch's (one buffer, in
  // storage()), and what reads them runs after it (orderLaunches). The
  // recompute pass copies a value remade for the backward once for each
  // stream that reads it (ir/recompute.h); where a copy's stream could not
  // take it after all (the unfuse stage split a LoRA adapter's d·Aᵀ out of the
  // stream of its data gradient), two kernels compute it alike and were
  // launched twice. The lowering prices the kernel at nothing (lowering.cpp).
  // Both must be one plain tile launch (no atomics, which would need clears;
  // no split: their sums are kept in f32) of values stored alike, none a
  // graph output (its buffer is the caller's); the kept launch may make more,
  // where it does not wait on the other's values (waitsOn): what reads them
  // then waits for it, and no launch comes to wait on itself. A forward
  // value and its copy remade for the backward stay apart: the recompute
  // pass remade it so as not to hold it from the forward to the backward,
  // across the step's peak of memory (a chain of four contractions: 5.8
  // MiB at its peak, 11.1 with its forward products held).
  void mergeTwins() {
    const std::set<NodeId> f32 = keptInF32({});
    std::set<int> merged, kept;  // kernels without a launch now; kernels whose launch holds others' values
    // A round per merge (erasing a launch moves the others), until none merges:
    // a chain of remade copies merges link by link.
    for (bool again = true; again;) {
      again = false;
      const std::map<int, const ScheduledLaunch*> sole = soleTileLaunches();
      // Pairs of kernels (twin, original) with an output alike, found among
      // outputs of one op and type only: a d48 step has 2,500 kernels.
      std::map<std::string, std::vector<std::pair<int, NodeId>>> byShape;
      for (const auto& [kernel, launch] : sole)
        for (NodeId o : launch->plan.outputs) byShape[shapeKey(o)].push_back({kernel, o});
      std::set<std::pair<int, int>> pairs;
      for (const auto& [key, outputs] : byShape)
        for (const auto& [k1, o1] : outputs)
          for (const auto& [k2, o2] : outputs)
            if (k1 != k2 && sameValue(g_, o1, o2)) pairs.insert({k1, k2});
      for (const auto& [twinKernel, originalKernel] : pairs) {
        if (merged.count(twinKernel) || kept.count(twinKernel) || merged.count(originalKernel)) continue;
        const ScheduledLaunch& twin = *sole.at(twinKernel);
        const ScheduledLaunch& original = *sole.at(originalKernel);
        std::map<NodeId, NodeId> found;
        std::set<NodeId> taken;
        for (NodeId o : twin.plan.outputs)
          for (NodeId x : original.plan.outputs)
            if (!found.count(o) && !taken.count(x) && f32.count(o) == f32.count(x) &&
                g_.node(o).adjoint == g_.node(x).adjoint && sameValue(g_, o, x))
              found[o] = x, taken.insert(x);
        if (found.size() != twin.plan.outputs.size() || waitsOn(original, twin.plan.outputs)) continue;
        twinOf_.insert(found.begin(), found.end());
        merged.insert(twinKernel);
        kept.insert(originalKernel);
        plans_.erase(std::remove_if(plans_.begin(), plans_.end(),
                                    [&](const ScheduledLaunch& l) { return l.kernel == twinKernel; }),
                     plans_.end());
        again = true;
        break;
      }
    }
  }

  // Each kernel's launch where it is one plain tile launch of values stored
  // alike whatever the storage (none accumulated by atomics, none a graph
  // output, some made); kernels with other launches are left out.
  std::map<int, const ScheduledLaunch*> soleTileLaunches() const {
    std::map<int, const ScheduledLaunch*> sole;
    std::set<int> others;
    for (const ScheduledLaunch& l : plans_) {
      const bool plain = l.role == "tile" && l.plan.kind == LaunchPlan::Kind::Tile && l.plan.splitTiles.empty() &&
                         !l.plan.outputs.empty() &&
                         std::none_of(l.plan.outputs.begin(), l.plan.outputs.end(), [&](NodeId o) {
                           return isGraphOutput(o) || atomics_.count(o) || gridSums_.count(o) || splitSums_.count(o);
                         });
      if (!plain || !sole.emplace(l.kernel, &l).second) others.insert(l.kernel);
    }
    for (int kernel : others) sole.erase(kernel);
    return sole;
  }

  // What two values alike share: their op and type.
  std::string shapeKey(NodeId id) const {
    const Node& n = g_.node(id);
    std::string key = fmt::format("{} {}", static_cast<int>(n.op), static_cast<int>(n.type.dtype));
    for (const Axis& a : n.type.axes) key += fmt::format(" {}:{}", a.name, a.size);
    return key;
  }

  bool isGraphOutput(NodeId id) const {
    return std::any_of(g_.outputs.begin(), g_.outputs.end(), [&](const GraphOutput& o) { return o.node == id; });
  }

  // Whether launch `l` reads any of `values` or what a launch made from them
  // makes, through any number of launches (a merged twin read as its
  // original): merging values into its outputs, what reads them would then
  // wait for it and it for them.
  bool waitsOn(const ScheduledLaunch& l, const std::vector<NodeId>& values) const {
    // Each launch's reads once, then a walk from the values to their readers.
    std::map<NodeId, std::vector<const ScheduledLaunch*>> readersOf;
    for (const ScheduledLaunch& x : plans_)
      for (NodeId r : readsOf(g_, x.plan, list_.stored)) readersOf[twinOf_.count(r) ? twinOf_.at(r) : r].push_back(&x);
    std::vector<NodeId> work(values.begin(), values.end());
    std::set<NodeId> reached(values.begin(), values.end());
    std::set<const ScheduledLaunch*> done;
    while (!work.empty()) {
      const NodeId v = work.back();
      work.pop_back();
      for (const ScheduledLaunch* x : readersOf[v]) {
        if (x == &l) return true;
        if (!done.insert(x).second) continue;
        for (NodeId o : x->plan.outputs)
          if (reached.insert(o).second) work.push_back(o);
      }
    }
    return false;
  }

  // A kernel that only concatenates stored arrays the step reads makes no
  // launch where the parts can lie in its array (concat_parts.h): each
  // part's launch writes it there, at the concatenation's strides
  // (StoredArray::strides), and what reads the concatenation runs after
  // them all. The lowering prices the kernel at nothing (lowering.cpp).
  // Not for parts zeroed and added into by atomics (the zeroing clears a
  // block), nor for parts whose launch takes flat points (8 consecutive
  // elements of the flattened index are not consecutive in the array).
  void assembleConcats() {
    std::set<NodeId> excluded = keptInF32({});
    excluded.insert(cleared_.begin(), cleared_.end());
    for (const PlannedKernel& pk : kernels_) {
      const Kernel& k = pk.kernel;
      if (k.nodes.size() != 1 || k.outputs != k.nodes || g_.node(k.nodes[0]).op != Op::Concat) continue;
      const NodeId concat = k.nodes[0];
      if (excluded.count(concat) ||
          std::any_of(g_.outputs.begin(), g_.outputs.end(), [&](const GraphOutput& o) { return o.node == concat; }))
        continue;
      const std::vector<PlacedPart> parts = partsInPlace(g_, concat, list_.stored, excluded, readers_);
      if (parts.empty() || !std::all_of(parts.begin(), parts.end(), [&](const PlacedPart& p) { return writtenInPlace(p.array); }))
        continue;
      plans_.erase(std::remove_if(plans_.begin(), plans_.end(), [&](const ScheduledLaunch& l) { return l.kernel == k.id; }),
                   plans_.end());
      // Parts lie in one level: neither this join nor its parts become a part or a join again.
      excluded.insert(concat);
      for (const PlacedPart& p : parts) {
        partOf_[p.array] = {concat, p};
        excluded.insert(p.array);
      }
    }
  }

  // Whether `array` is written by a tile or scan launch that addresses it
  // position by position (its strides within a concatenation may then be
  // any): not by flat points.
  bool writtenInPlace(NodeId array) const {
    for (const ScheduledLaunch& l : plans_) {
      if (std::find(l.plan.outputs.begin(), l.plan.outputs.end(), array) == l.plan.outputs.end()) continue;
      if (l.plan.kind != LaunchPlan::Kind::Tile && l.plan.kind != LaunchPlan::Kind::Scan) return false;
      const bool plain = l.plan.streamAxis.empty() && l.plan.splitTiles.empty() && l.plan.kind == LaunchPlan::Kind::Tile;
      if (plain && options_.storage == StorageType::BF16 &&
          takesFlatPoints(g_, l.plan.computed, list_.stored, l.plan.outputs, l.plan.groupAxes, [](NodeId) -> int64_t { return 2; }))
        return false;
      return true;
    }
    return false;
  }

  // The stored array whose bytes an output that is a view holds as they lie
  // (renames, splits, merges and transposes that keep every element where it
  // is: grouped-query attention's heads merged back from groups and
  // members), which then holds the output too, with no copy; -1 where the
  // view moves, converts or repeats elements, where something else reads
  // the array, or where it is an input, another output, summed by atomics or
  // kept in f32 as a statistic (the output would be stored otherwise).
  NodeId sameBytes(NodeId output) const {
    // Nothing else reads the array or the views on the way (a gradient all-
    // reduced in place while another launch reads it would race): each has
    // one reader, the next view, and the output none.
    const std::vector<int>& readers = readers_;
    if (readers[static_cast<size_t>(output)] != 0) return -1;
    NodeId at = output;
    while (!list_.stored.count(at)) {
      const Node& n = g_.node(at);
      // (An index keeps them where its axis has one position: sameBytesAs
      // below counts the elements.)
      const bool keeps = n.op == Op::Rename || n.op == Op::Merge || n.op == Op::Split || n.op == Op::Transpose ||
                         n.op == Op::StopGradient || n.op == Op::Index;
      if (!keeps || n.operands.size() != 1 || readers[static_cast<size_t>(n.operands[0])] != 1) return -1;
      at = n.operands[0];
    }
    const Node& source = g_.node(at);
    if (source.op == Op::Input || source.type.dtype != g_.node(output).type.dtype || !isFloat(source.type.dtype) ||
        source.type.axes.empty() || atomics_.count(at) || gridSums_.count(at) || splitSums_.count(at) || twinOf_.count(at) ||
        isStatistic(g_, at) || isStatistic(g_, output) || options_.f32Values.count(g_.node(output).name))
      return -1;
    for (const GraphOutput& o : g_.outputs)
      if (o.node == at || (aliasOf_.count(o.node) && aliasOf_.at(o.node) == at)) return -1;
    return sameBytesAs(g_, output, at, list_.stored) ? at : -1;
  }

  // The planned kernel that writes the last of the stored arrays `id` is
  // read from (through views); -1 where it reads none (a constant).
  int writerOf(NodeId id) const {
    int writer = -1;
    std::vector<NodeId> work = {id};
    std::set<NodeId> seen;
    while (!work.empty()) {
      const NodeId v = work.back();
      work.pop_back();
      if (!seen.insert(v).second) continue;
      if (v != id && list_.stored.count(v)) {
        for (const ScheduledLaunch& l : plans_)
          if (l.role == "tile" && std::count(l.plan.outputs.begin(), l.plan.outputs.end(), v)) writer = std::max(writer, l.kernel);
        continue;
      }
      for (NodeId o : g_.node(v).operands) work.push_back(o);
    }
    return writer;
  }

  // How each stored value is held (arrays, buffers): statistics, scalars and
  // the values options.f32Values names in f32 whatever the storage, and what
  // atomics accumulate into in f32 too.
  void storage(const std::vector<size_t>& order) {
    std::set<NodeId> keptWhole = namedF32Values(g_, options_);  // stored as f32 whatever the storage
    // A statistic that a contraction reads is a matmul operand like any other:
    // the tensor cores take bf16 (its staging copy or TMA reads the stored bytes).
    std::set<NodeId> contracted;
    for (const Node& n : g_.nodes)
      if (n.op == Op::Contract && isFloat(n.type.dtype))
        for (NodeId o : n.operands)
          for (contracted.insert(o); isView(g_.node(o)) && g_.node(o).operands.size() == 1; contracted.insert(o))
            o = g_.node(o).operands[0];
    for (NodeId id : list_.stored)
      if (g_.node(id).type.axes.empty() || (isStatistic(g_, id) && !contracted.count(id))) keptWhole.insert(id);
    for (const auto& [part, where] : partOf_)
      if (keptWhole.count(where.holder)) keptWhole.insert(part);
    auto storageOfValue = [&](NodeId id) {
      return storageOf(g_.node(id).type.dtype, keptWhole.count(id) ? StorageType::F32 : options_.storage,
                       atomics_.count(id) > 0 || gridSums_.count(id) > 0 || splitSums_.count(id) > 0);
    };
    for (NodeId id : list_.stored) {
      list_.arrays[id] = {"g_" + name(id), storageOfValue(id).ctype};
      if (const auto part = partOf_.find(id); part != partOf_.end() && !part->second.part.contiguous)
        list_.arrays[id].strides = part->second.part.strides;
    }
    std::function<void(NodeId)> addBuffer = [&](NodeId id) {
      if (list_.bufferOf.count(id)) return;
      const auto part = partOf_.find(id);
      if (part != partOf_.end()) addBuffer(part->second.holder);  // the holder first: its first part's write
      const Node& n = g_.node(id);
      Storage s = storageOfValue(id);
      BufferDesc b;
      b.node = id;
      b.name = name(id);
      b.dtype = s.dtype;
      b.ctype = s.ctype;
      b.axes = n.type.axes;
      b.elements = n.type.elementCount();
      b.bytes = b.elements * s.bytes;
      b.graphInput = n.op == Op::Input;
      for (const GraphOutput& o : g_.outputs)
        if (o.node == id || (aliasOf_.count(o.node) && aliasOf_.at(o.node) == id)) b.graphOutputs.push_back(o.name);
      if (part != partOf_.end()) {
        b.within = list_.bufferOf.at(part->second.holder);
        b.withinOffset = part->second.part.offsetElements;
        if (!part->second.part.contiguous) b.withinStrides = part->second.part.strides;
        if (list_.buffers[static_cast<size_t>(b.within)].ctype != b.ctype)
          throw std::logic_error(fmt::format("emit cuda: part {} is stored unlike the array it lies in", b.name));
      }
      list_.bufferOf[id] = static_cast<int>(list_.buffers.size());
      list_.buffers.push_back(b);
    };
    for (NodeId id : g_.inputs) addBuffer(id);
    for (size_t i : order)
      for (NodeId o : plans_[i].plan.outputs) addBuffer(o);
    for (const auto& [twin, original] : twinOf_) list_.bufferOf[twin] = list_.bufferOf.at(original);
  }

  const Graph& g_;
  const std::vector<PlannedKernel>& kernels_;
  const EmitOptions& options_;
  LaunchList list_;
  std::vector<ScheduledLaunch> plans_;  // in the order made; run() orders them
  std::set<NodeId> atomics_;    // scatter-adds: accumulated by atomics
  std::set<NodeId> cleared_;    // arrays a clear launch zeroes (one each)
  std::set<NodeId> gridSums_;   // isGridSum's outputs: accumulated by atomics too
  std::map<NodeId, NodeId> aliasOf_;  // outputs held by their source's buffer (sameBytes)
  std::map<NodeId, NodeId> twinOf_;   // values another launch makes alike, held in its buffer (mergeTwins)
  std::vector<int> readers_;  // per node, the nodes that take it as an operand
  struct Placement {
    NodeId holder = -1;  // the concatenation it lies in
    PlacedPart part;
  };
  std::map<NodeId, Placement> partOf_;  // part's array -> where it lies: placeParts, assembleConcats
  std::set<NodeId> splitSums_;  // outputs of split-K launches and row products: likewise
};

}  // namespace

LaunchList planLaunches(const Graph& graph, const std::vector<PlannedKernel>& kernels, const EmitOptions& options) {
  return LaunchPlanner(graph, kernels, options).run();
}

std::string describeLaunchList(const Graph& graph, const LaunchList& list) {
  auto names = [&](const auto& ids) {
    std::string out;
    for (NodeId id : ids) out += " " + list.names[static_cast<size_t>(id)];
    return out.empty() ? " -" : out;
  };
  std::string out;
  for (size_t i = 0; i < list.launches.size(); ++i) {
    const ScheduledLaunch& l = list.launches[i];
    out += fmt::format("launch {} {} ({}", i, l.plan.name, l.role);
    if (l.kernel >= 0) out += fmt::format(", kernel {}", l.kernel);
    out += ")\n  writes:" + names(l.plan.outputs) + "\n  reads:" + names(readsOf(graph, l.plan, list.stored)) + "\n";
  }
  for (size_t i = 0; i < list.buffers.size(); ++i) {
    const BufferDesc& b = list.buffers[i];
    out += fmt::format("buffer {} {}: {}[", i, b.name, b.dtype);
    for (size_t k = 0; k < b.axes.size(); ++k) out += fmt::format("{}{}:{}", k ? " " : "", b.axes[k].name, b.axes[k].size);
    out += fmt::format("], {} bytes{}", b.bytes, b.graphInput ? ", graph input" : "");
    if (b.within >= 0) out += fmt::format(", in {} from element {}", list.buffers[static_cast<size_t>(b.within)].name, b.withinOffset);
    if (!b.withinStrides.empty()) out += fmt::format(" at strides {}", fmt::join(b.withinStrides, " "));
    out += "\n";
  }
  return out;
}

std::set<NodeId> namedF32Values(const Graph& graph, const EmitOptions& options) {
  std::set<NodeId> named;
  for (NodeId id : graph.inputs)
    if (options.f32Values.count(graph.node(id).name)) named.insert(id);
  for (const GraphOutput& o : graph.outputs)
    if (options.f32Values.count(o.name)) named.insert(o.node);
  return named;
}

}  // namespace llmc
