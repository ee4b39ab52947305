// A kernel's shape for the cost model (kernelShape): its group axes, the
// axes it loops over and those the blocks may share out, the stream's extent
// and splits, the tile multiples coalescing and the tensor cores ask for.
#include "planning/cost_model.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <set>

#include "analysis/step_skip.h"
#include "analysis/streamability.h"
#include "lowering/tensor_core_stream.h"
#include "planning/recomputed_work.h"
#include "planning/row_products.h"
#include "planning/shifted_axes.h"

namespace llmc {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool hasGroupAxis(const KernelShape& s, const std::string& a) {
  return std::any_of(s.groupAxes.begin(), s.groupAxes.end(), [&](const Axis& g) { return g.name == a; });
}

void requireMultiple(std::map<std::string, int64_t>& m, const std::string& axis, int64_t multiple) {
  if (multiple <= 1) return;
  int64_t& current = m[axis];
  current = current == 0 ? multiple : std::lcm(current, multiple);
}

}  // namespace

namespace {

// kernelShape's parts, in its order.

void addStreamSplit(KernelShape& s, const Graph& g, const Kernel& k, const std::set<NodeId>& members) {
  // A stream whose slots are plain sums, read by the outputs as they are,
  // may be shared out across blocks like a looped axis (each block's partial
  // sums added atomically; an output along the stream, each block's share
  // of its positions stored): few long rows (a sum along the only long axis
  // of a few rows) then fill the device. Not a kernel with a contraction (a
  // GEMM's k, split by its own loop axes; a tensor-core stream).
  if (!s.streamAxis.empty()) {
    bool contraction = false;
    for (NodeId id : k.nodes)
      if (g.node(id).op == Op::Contract) contraction = true;
    const StreamAnalysis stream = analyzeStream(g, members, s.streamAxis);
    const bool plainSums = stream.streamable && stream.tail.empty() && !stream.slots.empty() &&
                           std::all_of(stream.slots.begin(), stream.slots.end(), [](const AccumulatorSlot& slot) {
                             return slot.kind == AccumulatorSlot::Kind::Sum && slot.rescaledBy < 0;
                           }) &&
                           std::all_of(k.outputs.begin(), k.outputs.end(), [&](NodeId o) {
                             return sharesStreamOut(g, stream, members, o, s.streamAxis);
                           }) &&
                           // Each aggregate it stores one slot as it is, scaled by no other
                           // aggregate: a softmax's gradient sum over its own normaliser squared
                           // (-S1 / S0^2) is no sum of the blocks' shares.
                           std::all_of(k.outputs.begin(), k.outputs.end(), [&](NodeId o) {
                             const auto terms = stream.aggregateTerms.find(o);
                             return terms == stream.aggregateTerms.end() ||
                                    (terms->second.size() == 1 && terms->second[0].scale.empty());
                           });
    if (plainSums && !contraction && s.streamExtent >= 2 * kSplitPositionsMin &&
        !isWholeArraySum(g, k.outputs, members))  // that one is written over the whole grid already
      s.splitAxes.push_back(s.streamAxis);
  }
}

void addPerPositionContractions(KernelShape& s, const Graph& g, const Kernel& k, const std::set<NodeId>& members) {
  // A contraction evaluated at each position of the stream (attention's scores, over the
  // channels while the keys stream) makes the kernel a tensor-core stream (evaluate prices it).
  // Such a stream runs only the steps a comparison of positions leaves changing some slot
  // (step_skip.h: a causal mask's keys past a block's queries): its work is that fraction of
  // the whole, in the tensor-core streams' blocks of rows and steps of positions, whatever the
  // partition.
  std::string rowAxis;
  std::set<std::string> scoreAxes;  // the axes of the per-position contractions' operands
  std::vector<NodeId> rowWeights;   // the row products' weights: skipped steps must leave them 0
  for (NodeId id : k.nodes) {
    const Node& n = g.node(id);
    if (n.op != Op::Contract || s.streamAxis.empty() || !n.type.has(s.streamAxis) ||
        std::find(n.axes.begin(), n.axes.end(), s.streamAxis) != n.axes.end())
      continue;
    // A row product (planning/row_products.h) sums over the rows: one more
    // product a step, not a score that says which axis the rows are.
    if (isRowProduct(g, n, s.streamAxis, [&](NodeId m) { return members.count(m) > 0; })) {
      rowWeights.push_back(members.count(n.operands[0]) ? n.operands[0] : n.operands[1]);
      continue;
    }
    s.perPosition = true;
    const Type& x = g.node(n.operands[0]).type;
    const Type& y = g.node(n.operands[1]).type;
    const Type& rows = x.has(s.streamAxis) ? y : x;
    const Type& columns = x.has(s.streamAxis) ? x : y;
    rowAxis = streamRowAxis(rows, columns, s.groupAxes);
    for (const Type* t : {&x, &y})
      for (const Axis& a : t->axes) scoreAxes.insert(a.name);
  }
  // An output axis no per-position contraction's operand has is the channels
  // of a product along the stream (attention's values' axis): held whole by
  // each block, as the contracted channels are, not tiled across the grid
  // (which would recompute the scores once per tile). Whether it shares its
  // name with the contracted channels (attention's d) or not (e) makes no
  // difference.
  if (s.perPosition)
    std::erase_if(s.groupAxes, [&](const Axis& a) { return !scoreAxes.count(a.name); });
  if (s.perPosition && !rowAxis.empty()) {
    // As the tensor-core stream plans it (tensor_core_stream.cpp): skipped
    // steps leave the row products' weights and the outputs along the stream 0.
    std::vector<NodeId> zeroWhenSkipped = rowWeights;
    for (NodeId out : outputsAlongStream(g, k.outputs, k.nodes, s.streamAxis)) zeroWhenSkipped.push_back(out);
    std::optional<StreamStepSkip> skip =
        skipKeepingZeros(g, findStepSkip(g, analyzeStream(g, members, s.streamAxis), rowAxis, s.streamAxis), zeroWhenSkipped);
    if (skip) {
      const auto row = std::find_if(s.groupAxes.begin(), s.groupAxes.end(), [&](const Axis& a) { return a.name == rowAxis; });
      const StepsRun run = stepsRun(*skip, rowAxis, row->size, s.streamExtent, kStreamRowsPerBlock, kStreamPositionsPerStep);
      s.stepsRun = run.fraction;
      s.longestSteps = run.longest;
    }
  }
}

void addTileMultiples(KernelShape& s, const Graph& g, const Kernel& k, const Target& target, const CostOptions& o) {
  // Coalescing: every array in GMEM moves in whole segments (128 bytes: 64
  // bf16 values) of its innermost axes where they are tiled. An innermost
  // axis shorter than a segment (a pair's two halves, a window's 3 taps) is
  // tiled whole, and the segment continues on the axis outside it.
  // Arrays asking an axis for different multiples (a segment of 32 from
  // one, the whole of a 36-long axis from another) ask at most for the
  // whole axis: one tile, not a tile of their common multiple (288) whose
  // points past the axis' end do nothing.
  s.coalescingBytes = target.coalescingBytes;
  auto require = [&](const Axis& a, int64_t multiple) {
    requireMultiple(s.tileMultiple, a.name, multiple);
    if (auto m = s.tileMultiple.find(a.name); m != s.tileMultiple.end() && m->second > a.size) m->second = a.size;
  };
  auto coalesce = [&](const Type& t) {
    int64_t segment = target.coalescingBytes / elementBytes(t, o);
    for (auto a = t.axes.rbegin(); a != t.axes.rend() && segment > 1; ++a) {
      if (!hasGroupAxis(s, a->name) && a->name != s.streamAxis) return;
      if (a->size >= segment) {
        require(*a, segment);
        return;
      }
      require(*a, a->size);
      segment = std::bit_ceil(static_cast<uint64_t>(ceilDiv(segment, a->size)));
    }
  };
  for (NodeId in : k.inputs) coalesce(g.node(in).type);
  for (NodeId out : k.outputs) coalesce(g.node(out).type);
  for (const auto& [axis, multiple] : s.tileMultiple)
    if (hasGroupAxis(s, axis)) s.segment[axis] = multiple;

  // Tensor cores: the instruction's m, n and k divide the tiles of the axes
  // that play those parts in each contraction.
  std::vector<TensorCoreShape> shapes = target.shapesFor(o.storageBytes == 2 ? "bf16" : "tf32");
  if (shapes.empty() || !o.tensorCores) return;
  // An axis a contraction constrains takes no tile under a segment (the
  // tensor cores' shapes divide its tiles).
  for (NodeId id : k.nodes) {
    const Node& n = g.node(id);
    if (n.op != Op::Contract || !isFloat(n.type.dtype)) continue;
    for (NodeId op : n.operands)
      for (const Axis& a : g.node(op).type.axes) s.segment.erase(a.name);
  }
  const TensorCoreShape& mma = *std::max_element(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
    return a.m < b.m;  // the largest m: wgmma's on Hopper
  });
  for (NodeId id : k.nodes) {
    const Node& n = g.node(id);
    if (n.op != Op::Contract || !isFloat(n.type.dtype)) continue;
    const Type& a = g.node(n.operands[0]).type;
    const Type& b = g.node(n.operands[1]).type;
    for (auto it = a.axes.rbegin(); it != a.axes.rend(); ++it)  // innermost axis of A only: m
      if (!b.has(it->name) && hasGroupAxis(s, it->name) && it->size >= mma.m) {
        requireMultiple(s.tileMultiple, it->name, mma.m);
        break;
      }
    for (auto it = b.axes.rbegin(); it != b.axes.rend(); ++it)  // of B only: n
      if (!a.has(it->name) && (hasGroupAxis(s, it->name) || it->name == s.streamAxis) && it->size >= mma.nStep) {
        requireMultiple(s.tileMultiple, it->name, mma.nStep);
        break;
      }
    for (const auto& c : n.axes)  // contracted: k
      if (c == s.streamAxis) requireMultiple(s.tileMultiple, c, mma.k);
  }
}

}  // namespace

KernelShape kernelShape(const Graph& g, const Kernel& k, const Target& target, const CostOptions& o) {
  KernelShape s;
  s.streamAxis = k.streamAxis;
  if (!o.tensorCores) s.redone = recomputationFactors(g, k);
  std::set<std::string> inner(k.innerAxes.begin(), k.innerAxes.end());
  // The blocks tile the outputs; a scatter-add's blocks tile the values it
  // adds (each added once, by an atomic add where the index points).
  for (NodeId out : k.outputs) {
    const Node& n = g.node(out);
    const Type& space = n.op == Op::ScatterAdd ? g.node(n.operands[0]).type : n.type;
    for (const auto& a : space.axes)
      if (a.name != s.streamAxis && !inner.count(a.name) && !hasGroupAxis(s, a.name)) s.groupAxes.push_back(a);
  }
  // An other reduced axis is looped over, one position at a time around the
  // stream, when it is too long to hold or when no output has it and the
  // kernel streams over it as well (a weight gradient's batch axis beside its
  // streamed positions); otherwise it is held whole in the tile.
  std::set<std::string> outputAxes;
  for (NodeId out : k.outputs)
    for (const auto& a : g.node(out).type.axes) outputAxes.insert(a.name);
  std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
  std::map<std::string, int64_t> innerExtent;
  for (NodeId id : k.nodes)
    for (NodeId op : g.node(id).operands) {
      if (const Axis* a = g.node(op).type.find(s.streamAxis)) s.streamExtent = a->size;
      for (const auto& name : k.innerAxes)
        if (const Axis* a = g.node(op).type.find(name)) innerExtent[name] = a->size;
    }
  // The channels a contraction at each position of the stream sums over
  // (attention's d in q·k) are held whole with each position's operands.
  std::set<std::string> perPositionChannels;
  for (NodeId id : k.nodes) {
    const Node& n = g.node(id);
    if (n.op == Op::Contract && !s.streamAxis.empty() && n.type.has(s.streamAxis))
      perPositionChannels.insert(n.axes.begin(), n.axes.end());
  }
  const StreamAnalysis mainStream = s.streamAxis.empty() ? StreamAnalysis{} : analyzeStream(g, members, s.streamAxis);
  for (const auto& name : k.innerAxes) {
    int64_t extent = innerExtent[name];
    if (perPositionChannels.count(name) && extent <= kInnerLimit) continue;
    StreamAnalysis stream = analyzeStream(g, members, name);
    // Outputs along it that read no result of this sum nor of the kernel's
    // stream: each block can make them at the positions it takes (a batch
    // normalisation's centred values stored beside their variance).
    const auto madeAtShare = [&](NodeId out) {
      return !g.node(out).type.has(name) ||
             (!readsStreamResults(g, stream, members, out) &&
              (!mainStream.streamable || !readsStreamResults(g, mainStream, members, out)));
    };
    const bool outputsAtShare = std::all_of(k.outputs.begin(), k.outputs.end(), madeAtShare);
    bool looped = extent > kInnerLimit || (!s.streamAxis.empty() && outputsAtShare && stream.streamable);
    if (!looped) continue;
    s.loopAxes.push_back(name);
    s.loopExtent[name] = extent;
    // Blocks may share the axis (split-K) when the outputs are plain sums
    // over it: partial sums then simply add up.
    bool linear = stream.streamable && stream.tail.empty() &&
                  std::all_of(stream.slots.begin(), stream.slots.end(), [](const AccumulatorSlot& slot) {
                    return slot.kind == AccumulatorSlot::Kind::Sum && slot.rescaledBy < 0;
                  });
    // (So they may with outputs along it made at their shares.)
    if (linear && outputsAtShare) s.splitAxes.push_back(name);
  }
  addStreamSplit(s, g, k, members);
  addPerPositionContractions(s, g, k, members);
  addTileMultiples(s, g, k, target, o);
  for (NodeId in : k.inputs)
    if (auto shifted = shiftedGroupAxes(g, k, in, s.groupAxes); !shifted.empty())
      s.shiftedInputs[in] = renamedAxes(g.node(in).type, shifted);
  return s;
}

}  // namespace llmc
