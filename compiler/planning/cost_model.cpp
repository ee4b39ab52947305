#include "planning/cost_model.h"
#include "planning/thread_loads.h"
#include "planning/row_products.h"
#include "planning/staged_rows.h"
#include "planning/held_rows.h"
#include "planning/transposed_reads.h"
#include "planning/shifted_axes.h"

#include "planning/recomputed_work.h"
#include "ir/scalar_function.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <bit>
#include <cmath>
#include <numeric>
#include <set>

#include "analysis/step_skip.h"
#include "analysis/streamability.h"
#include "frontend/resource_limits.h"
#include "lowering/tensor_core_stream.h"

namespace llmc {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int dtypeBytes(DType d) {
  switch (d) {
    case DType::Bool: return 1;
    case DType::U16:
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I32:
    case DType::F32: return 4;
    case DType::F64: return 8;
  }
  return 4;
}



// Elements of an array's tile in one block (and one chunk): group axes by
// their tile, the stream axis by the chunk, other axes whole.
double tileElements(const Type& t, const KernelShape& s, const Partition& p) {
  double n = 1;
  for (const auto& a : t.axes) {
    if (auto g = p.groupTiles.find(a.name); g != p.groupTiles.end()) n *= static_cast<double>(std::min(g->second, a.size));
    else if (a.name == s.streamAxis && p.streamChunk > 0) n *= static_cast<double>(std::min(p.streamChunk, a.size));
    else if (std::find(s.loopAxes.begin(), s.loopAxes.end(), a.name) == s.loopAxes.end()) n *= static_cast<double>(a.size);
  }
  return n;
}



bool isSpecialFunction(const Node& n) {
  return n.op == Op::Unary && n.unary != UnaryOp::Neg && n.unary != UnaryOp::Abs;
}

}  // namespace

int elementBytes(const Type& t, const CostOptions& o) {
  return isFloat(t.dtype) && o.storageBytes > 0 ? o.storageBytes : dtypeBytes(t.dtype);
}

int storedElementBytes(const Graph& g, NodeId id, const CostOptions& o) {
  const Type& t = g.node(id).type;
  return isFloat(t.dtype) && o.f32Stored.count(id) ? 4 : elementBytes(t, o);
}

bool addsPartialSums(const Type& output, const std::map<std::string, int64_t>& splitTiles) {
  return std::any_of(splitTiles.begin(), splitTiles.end(), [&](const auto& split) { return !output.has(split.first); });
}

int64_t streamShare(const KernelShape& s, const Partition& p) {
  auto split = p.splitTiles.find(s.streamAxis);
  return split == p.splitTiles.end() ? s.streamExtent : std::min(s.streamExtent, split->second);
}

NodeWork nodeWork(const Graph& g, const Node& n, const Target& t, const CostOptions& o) {
  if (n.op == Op::Input || n.op == Op::Constant || n.op == Op::Pos || n.op == Op::StopGradient) return {"fp32", 0};
  std::vector<Axis> space = n.type.axes;
  for (NodeId op : n.operands)
    for (const auto& a : g.node(op).type.axes)
      if (std::none_of(space.begin(), space.end(), [&](const Axis& b) { return b.name == a.name; })) space.push_back(a);
  double elements = 1;
  for (const auto& a : space) elements *= static_cast<double>(a.size);
  // A reduction visits its operands' points; anything else one per point
  // of its result (a slice, a pad or a concat names its axes anew: their
  // operands' axes are not a space it loops over).
  if (n.op != Op::Contract && n.op != Op::Reduce) elements = static_cast<double>(n.type.elementCount());
  // A gather touches one row per index; a scatter-add one per value.
  if (n.op == Op::Gather) elements = static_cast<double>(n.type.elementCount());
  if (n.op == Op::ScatterAdd) elements = static_cast<double>(g.node(n.operands[0]).type.elementCount());
  const bool tensorCores = o.tensorCores && t.hasShapesFor(o.storageBytes == 2 ? "bf16" : "tf32");
  // On the CUDA cores a contraction's products read their operands through
  // L1 and L2 (the emitted code tiles nothing in shared memory): far below
  // the FMA units' peak, at the rate the target measured for it.
  // Where one operand spans the whole space (a matrix-vector product: each
  // product reads its own element of it, once, as the memory terms price),
  // nothing is re-read: the FMA units' own rate (a causal linear attention's
  // output, o[t e] = sum(state[t d e] * y[t d], d), was priced 4.9 us at the
  // measured contraction rate and ran 2.2). Not a gathered or broadcast
  // operand: its elements are a smaller array's, read again and again.
  if (n.op == Op::Contract && isFloat(n.type.dtype)) {
    const bool eachReadOnce = std::any_of(n.operands.begin(), n.operands.end(), [&](NodeId op) {
      const Node& operand = g.node(op);
      return operand.op != Op::Gather && operand.op != Op::Broadcast &&
             static_cast<double>(operand.type.elementCount()) >= elements;
    });
    return {tensorCores                                     ? (o.storageBytes == 2 ? "tensor_bf16" : "tensor_tf32")
            : t.hasUnit("fp32_contraction") && !eachReadOnce ? "fp32_contraction"
                                                            : "fp32",
            2 * elements};
  }
  if (isSpecialFunction(n)) return {"sfu", elements};
  // A user's scan operator is applied two to three times an element by the
  // blocked scan: in the thread's run, with everything before the run, and
  // in the slices' scan of their totals (codegen/cuda_writer_scan.cpp).
  if (n.combine) return {"fp32", 3 * elements * (scalarFunctionOperations(*n.combine) + 1)};
  return {"fp32", elements};
}

double stagedTensorContractionSeconds(double operations, double stagedBytes, const Target& t, const CostOptions& o) {
  const std::string input = o.storageBytes == 2 ? "bf16" : "tf32";
  if (!o.tensorCores || !t.hasShapesFor(input)) return std::numeric_limits<double>::infinity();
  return operations / t.unit("tensor_" + input).attainable + 2 * stagedBytes / t.level("GMEM").attainableBandwidth;
}

double clearLaunchSeconds(const Type& type, const Target& target) {
  return target.graphLaunchOverhead + 4 * static_cast<double>(type.elementCount()) / target.level("GMEM").attainableBandwidth;
}

double storedBytes(const Type& type, const CostOptions& o) {
  return static_cast<double>(type.elementCount()) * elementBytes(type, o);
}

const LevelCost& KernelCost::level(const std::string& name) const {
  for (const auto& l : levels)
    if (l.level == name) return l;
  throw std::out_of_range("no level " + name);
}


namespace {

// What a kernel moves and holds (evaluate): bytes through each level, the
// on-chip tiles, the launches and atomics its outputs need.
struct Traffic {
  double moved = 0, unique = 0, smemBytes = 0, smemTraffic = 0;
  double loaded = 0;        // bytes read from GMEM
  double loads = 0;         // of the largest share of an input a block reads
  double clearSeconds = 0;  // the launches zeroing what atomics add into
  double atomicAdds = 0;
  double pairAtomicAdds = 0;  // 8-byte reductions of f32 pairs (row products)
  double accumulator = 0, intermediate = 0;  // tiles in registers
  bool stagedRows = false;  // rows held in shared memory, a point at a time (plainTileStaging)
};

// The blocks and the chunks each runs (cost.blocks, cost.chunks); returns
// the blocks sharing one output tile (split-K). wholeArraySum: the kernel's
// whole-array sum (fusion.h), or -1.
int64_t blocksAndChunks(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, NodeId wholeArraySum,
                        KernelCost& cost) {
  cost.blocks = 1;
  for (const auto& a : s.groupAxes) cost.blocks = sizeProduct(cost.blocks, ceilDiv(a.size, p.groupTiles.at(a.name)), "a kernel's blocks");
  cost.chunks = p.streamChunk > 0 && s.streamExtent > 0 ? ceilDiv(s.streamExtent, p.streamChunk) : 1;
  int64_t splits = 1;  // blocks sharing one output tile
  // The stream shared out across blocks: each block streams its share.
  if (auto split = p.splitTiles.find(s.streamAxis); split != p.splitTiles.end() && split->second < s.streamExtent) {
    splits = ceilDiv(s.streamExtent, split->second);
    cost.chunks = p.streamChunk > 0 ? ceilDiv(split->second, std::min(p.streamChunk, split->second)) : 1;
  }
  cost.synced = cost.chunks;
  for (const auto& [axis, extent] : s.loopExtent) {
    auto split = p.splitTiles.find(axis);
    int64_t perBlock = split == p.splitTiles.end() ? extent : split->second;
    cost.chunks = sizeProduct(cost.chunks, perBlock, "a kernel's steps");
    splits = sizeProduct(splits, ceilDiv(extent, perBlock), "a kernel's split blocks");
  }
  cost.blocks = sizeProduct(cost.blocks, splits, "a kernel's blocks");
  // A whole array summed to one value runs over the whole grid, each thread
  // through its grid-strided share, 8 consecutive elements at a time (a
  // scalar's 1): no chunks, no stream in one block.
  if (wholeArraySum >= 0) {
    cost.blocks = wholeArraySumBlocks(g.node(g.node(wholeArraySum).operands.at(0)).type);
    cost.chunks = cost.synced = 1;
  }
  return splits;
}


// An array whose innermost axes are tiled under its coalescing segment moves
// whole segments: its bytes times the segment over the tiles' share of it,
// axis by axis from the innermost (addTileMultiples: a short axis takes its
// part of the segment whole, the next the rest).
double segmentsMoved(const Type& ty, const KernelShape& s, const Partition& p, const CostOptions& o) {
  if (s.coalescingBytes == 0) return 1.0;
  int64_t segment = s.coalescingBytes / elementBytes(ty, o);
  double factor = 1.0;
  for (auto a = ty.axes.rbegin(); a != ty.axes.rend() && segment > 1; ++a) {
    auto tile = p.groupTiles.find(a->name);
    if (!s.segment.count(a->name) || tile == p.groupTiles.end()) break;
    const int64_t run = std::min(segment, a->size);
    if (tile->second < run) factor *= static_cast<double>(run) / static_cast<double>(tile->second);
    segment = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(ceilDiv(segment, a->size))));
  }
  return factor;
}

// The kernel's inputs: their bytes through GMEM and L2, their tiles in SMEM.
void inputTraffic(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, const CostOptions& o,
                  double loadBytes, const KernelCost& cost, Traffic& tr) {
  for (NodeId in : k.inputs) {
    // An input read through shifting views (a padded sequence's windows)
    // is tiled along the group axes its axes become.
    const auto shifted = s.shiftedInputs.find(in);
    const Type& ty = shifted == s.shiftedInputs.end() ? g.node(in).type : shifted->second;
    // Along an axis it reaches a group axis by, such an input is read only
    // where the group axis goes (a slice of it: a padded sequence's
    // gradient, 3000 rows of which the unpadded 1000 are copied, was
    // priced at all 3000, 7.8 us for a 2.1 us copy).
    double elements = 1;
    for (const Axis& a : ty.axes) {
      const auto group = std::find_if(s.groupAxes.begin(), s.groupAxes.end(), [&](const Axis& x) { return x.name == a.name; });
      elements *= static_cast<double>(shifted != s.shiftedInputs.end() && group != s.groupAxes.end()
                                          ? std::min(a.size, group->size) : a.size);
    }
    const int each = storedElementBytes(g, in, o);
    double bytes = elements * each;
    // A table read through a gather moves only the rows gathered, each by
    // the block whose positions index it.
    bool gathered = false;
    for (NodeId id : k.nodes) {
      const Node& n = g.node(id);
      if (n.op == Op::Gather && n.operands[0] == in) {
        bytes = std::min(bytes, static_cast<double>(n.type.elementCount()) * each);
        gathered = true;
      }
    }
    bytes *= segmentsMoved(ty, s, p, o);
    tr.unique += bytes;
    tr.loaded += bytes;
    double replication = 1;
    for (const auto& a : s.groupAxes)
      if (!ty.has(a.name) && !gathered) replication *= static_cast<double>(ceilDiv(a.size, p.groupTiles.at(a.name)));
    // A stream's steps that a condition on positions skips load nothing
    // (KernelShape::stepsRun): a window's keys, a causal mask's later ones.
    if (!s.streamAxis.empty() && ty.has(s.streamAxis)) replication *= s.stepsRun;
    tr.moved += bytes * replication;
    double tile = tileElements(ty, s, p) * each;
    for (NodeId id : k.nodes) {  // a gathered table holds only the rows of this tile
      const Node& n = g.node(id);
      if (n.op == Op::Gather && n.operands[0] == in) tile = tileElements(n.type, s, p) * each;
    }
    // What the block's threads may share out: its whole stream and the
    // positions it loops over, not only a chunk.
    double reach = tile;
    if (const Axis* streamed = ty.find(s.streamAxis); streamed && p.streamChunk > 0)
      reach *= static_cast<double>(std::min(streamed->size, streamShare(s, p))) /
               static_cast<double>(std::min(p.streamChunk, streamed->size));
    for (const auto& [axis, extent] : s.loopExtent)
      if (ty.has(axis)) reach *= static_cast<double>(p.splitTiles.count(axis) ? p.splitTiles.at(axis) : extent);
    tr.loads = std::max(tr.loads, std::ceil(reach / loadBytes));
    bool streamed = (ty.has(s.streamAxis) && p.streamChunk > 0) ||
                    std::any_of(s.loopAxes.begin(), s.loopAxes.end(), [&](const std::string& a) { return ty.has(a); });
    tr.smemBytes += tile * (streamed ? 2 : 1);  // a chunk in use and the next one in flight
    tr.smemTraffic += tile * static_cast<double>(streamed ? cost.chunks : 1) * static_cast<double>(cost.blocks);
  }
}

// The kernel's outputs, and its scatter-adds, launched apart.
void outputTraffic(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, const Target& t,
                   const CostOptions& o, int64_t splits, bool wholeArraySum, const KernelCost& cost, Traffic& tr) {
  // Outputs added into atomically are zeroed first by a launch of their own
  // (codegen/launch_list.cpp, clearBefore): a graph node more, and the zeros' bytes.
  auto zeroedFirst = [&](const Type& ty) { tr.clearSeconds += clearLaunchSeconds(ty, t); };
  const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
  for (NodeId out : k.outputs) {
    const Node& n = g.node(out);
    const Type& ty = n.type;
    const int each = storedElementBytes(g, out, o);
    tr.unique += static_cast<double>(ty.elementCount()) * each * segmentsMoved(ty, s, p, o);
    if (isRowProduct(g, n, s.streamAxis, [&](NodeId m) { return members.count(m) > 0; })) {
      // A row product (planning/row_products.h): each block of rows adds
      // its share at the steps it runs into an array zeroed first: a pair of
      // neighbours a reduction where the channels (the values' own axis) are
      // the output's innermost of an even length, else an f32 atomic an
      // element (as codegen/cuda_writer_row_products.cpp adds them).
      const double shares = static_cast<double>(ceilDiv(g.node(n.operands[0]).type.find(n.axes[0])->size, kStreamRowsPerBlock)) * s.stepsRun;
      tr.moved += 2 * 4 * static_cast<double>(ty.elementCount()) * shares;
      const Axis& inner = ty.axes.back();
      const bool valuesInner = g.node(n.operands[0]).type.has(inner.name) != g.node(n.operands[1]).type.has(inner.name);
      if (inner.name != s.streamAxis && valuesInner && inner.size % 2 == 0 && t.pairAtomicAddsPerSecond > 0)
        tr.pairAtomicAdds += static_cast<double>(ty.elementCount()) / 2 * shares;
      else tr.atomicAdds += static_cast<double>(ty.elementCount()) * shares;
      zeroedFirst(ty);
      continue;
    }
    if (n.op == Op::ScatterAdd) {
      // An f32 atomic read-modify-write in L2 per value added; nothing held.
      tr.moved += 2 * 4 * static_cast<double>(g.node(n.operands[0]).type.elementCount());
      continue;
    }
    // Split blocks add their partial results: an f32 atomic per element each
    // (a whole-array sum: one per block; the elementwise outputs beside it
    // are stored as its loop passes them).
    const bool gridAdded = wholeArraySum && ty.axes.empty();
    if (gridAdded) tr.moved += 2 * 4 * static_cast<double>(cost.blocks);
    else if (wholeArraySum) tr.moved += static_cast<double>(ty.elementCount()) * each;
    else if (splits > 1 && addsPartialSums(ty, p.splitTiles)) {
      tr.moved += 2 * 4 * static_cast<double>(ty.elementCount()) * static_cast<double>(splits);
      tr.atomicAdds += static_cast<double>(ty.elementCount()) * static_cast<double>(splits);
    } else
      tr.moved += static_cast<double>(ty.elementCount()) * each * segmentsMoved(ty, s, p, o);
    if (gridAdded || (!wholeArraySum && splits > 1 && addsPartialSums(ty, p.splitTiles))) zeroedFirst(ty);
  }
  // A scatter-add is launched apart from its kernel's other work, into an
  // array zeroed first, whether or not the kernel stores it as an output.
  for (NodeId id : k.nodes)
    if (g.node(id).op == Op::ScatterAdd) {
      zeroedFirst(g.node(id).type);
      tr.atomicAdds += static_cast<double>(g.node(g.node(id).operands[0]).type.elementCount());
    }
}

// The tiles that live in registers: the accumulators and the largest intermediate.
void registerTiles(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, Traffic& tr) {
  // The accumulators: the tiles of the kernel's reductions that outlive a
  // chunk, in f32. Outputs made from them elementwise (a bias, GELU) are
  // written as they are made.
  for (NodeId id : k.nodes) {
    const Node& n = g.node(id);
    const bool chunkLocal = !s.streamAxis.empty() && n.type.has(s.streamAxis);
    if ((n.op == Op::Contract || n.op == Op::Reduce) && !chunkLocal) tr.accumulator += tileElements(n.type, s, p) * 4;
  }
  std::set<NodeId> boundary(k.inputs.begin(), k.inputs.end());
  boundary.insert(k.outputs.begin(), k.outputs.end());
  for (NodeId id : k.nodes)
    if (!boundary.count(id)) tr.intermediate = std::max(tr.intermediate, tileElements(g.node(id).type, s, p) * 4);
}

// Rows neither staged nor held in registers (planning/held_rows.h) are
// read again by every pass over them after the first, through L2: a row of
// a point's lanes that several passes read, past the registers a thread
// gives them (kHeldRowRegisters). The lanes and their 8 positions as the
// CUDA writer takes them (a warp a point; 8 positions a lane where bf16
// storage and the row's length allow; a row shorter than a warp's 256
// positions is a chunk a lane, held).
void rereadRows(const Graph& g, const Kernel& k, const KernelShape& s, const std::string& laneAxis,
                const CostOptions& o, Traffic& tr) {
  if (laneAxis.empty()) return;
  const std::set<NodeId> computed(k.nodes.begin(), k.nodes.end()), stored(k.inputs.begin(), k.inputs.end());
  const std::vector<NodeId> rows = pointRowArrays(g, computed, stored, s.groupAxes, laneAxis, [](NodeId) { return true; });
  if (rows.empty()) return;
  const int64_t extent = g.node(rows.front()).type.axes.back().size;
  if (extent < 256) return;
  auto bytes = [&](NodeId array) { return static_cast<int64_t>(storedElementBytes(g, array, o)); };
  const HeldRows heldRows = llmc::heldRows(g, computed, k.outputs, rows, laneAxis, 32,
                                           o.storageBytes == 2 && extent % 8 == 0, bytes);
  for (NodeId row : rows) {
    if (heldRows.holds(row)) continue;
    const int passes = lanePassesReading(g, computed, k.outputs, laneAxis, row);
    if (passes > 1)
      tr.moved += static_cast<double>(passes - 1) * static_cast<double>(g.node(row).type.elementCount()) *
                  static_cast<double>(bytes(row));
  }
}

// A plain tile (no stream, no split) loads its points' values straight into
// registers; only its transposed reads (planning/transposed_reads.h) go
// through shared memory, copied in and read back once, after a barrier. Their
// tiles must fit a kernel's static shared memory.
void plainTileStaging(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, const Target& t,
                      const CostOptions& o, KernelCost& cost, Traffic& tr) {
  std::vector<Axis> axes;  // the group axes the outputs have, as the launch tiles them (codegen/launch_list.cpp)
  std::map<std::string, int64_t> tiles;
  for (const Axis& a : s.groupAxes) {
    if (std::none_of(k.outputs.begin(), k.outputs.end(), [&](NodeId out) { return g.node(out).type.has(a.name); }))
      continue;
    axes.push_back(a);
    auto t = p.groupTiles.find(a.name);
    tiles[a.name] = t == p.groupTiles.end() ? a.size : std::min(t->second, a.size);
  }
  const std::set<NodeId> computed(k.nodes.begin(), k.nodes.end()), stored(k.inputs.begin(), k.inputs.end());
  const std::vector<TransposedRead> reads = transposedReads(
      g, computed, stored, k.outputs, axes, tiles, [&](NodeId array) { return storedElementBytes(g, array, o); });
  const double bytes = static_cast<double>(transposedTileBytes(reads));
  tr.smemBytes = bytes;
  tr.smemTraffic = 2 * bytes * static_cast<double>(cost.blocks);
  if (!reads.empty()) cost.synced += 1;
  if (bytes > static_cast<double>(kTransposedTileBytesMax)) cost.fits = false;
  // Rows held whole in shared memory (planning/staged_rows.h), a point at a
  // time: each copied in once and read by every pass over the held axis;
  // a barrier either side of the copy, two for each reduction's warps.
  const std::string held = heldRowAxis(g, computed, s.groupAxes, {});
  const StagedRows rows = stagedRows(g, computed, stored, s.groupAxes, held,
                                     [&](NodeId array) { return storedElementBytes(g, array, o); },
                                     [](NodeId) { return true; }, stagedRowsLimit(t.level("SMEM").maxPerBlock));
  if (rows.empty()) {
    rereadRows(g, k, s, held, o, tr);
    return;
  }
  int64_t points = 1, reductions = 0;
  for (const auto& [axis, tile] : tiles) points *= tile;
  for (NodeId id : k.nodes)
    if (const Node& n = g.node(id); (n.op == Op::Reduce || n.op == Op::Contract) &&
                                     std::find(n.axes.begin(), n.axes.end(), held) != n.axes.end())
      ++reductions;
  tr.stagedRows = true;
  tr.smemBytes += static_cast<double>(rows.bytes);
  tr.smemTraffic += static_cast<double>(rows.bytes) * static_cast<double>(1 + std::max<int64_t>(1, reductions)) *
                    static_cast<double>(points) * static_cast<double>(cost.blocks);
  cost.synced += points * (2 + 2 * reductions);
}

}  // namespace

KernelCost evaluate(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, const Target& t,
                    const CostOptions& o) {
  KernelCost cost;
  const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
  const NodeId summed = wholeArraySumOf(g, k.outputs, members);
  const bool wholeArraySum = summed >= 0;
  const int64_t splits = blocksAndChunks(g, k, s, p, summed, cost);
  // A thread's load: 16 bytes of bf16 storage (8 values), one value of f32
  // storage (emit_cuda's loads).
  const double loadBytes = o.storageBytes == 2 ? t.vectorAccessBytes : 4;
  Traffic tr;
  inputTraffic(g, k, s, p, o, loadBytes, cost, tr);
  outputTraffic(g, k, s, p, t, o, splits, wholeArraySum, cost, tr);
  registerTiles(g, k, s, p, tr);
  if (wholeArraySum) {  // no tiles: values straight from GMEM, the warps' 32 partials in SMEM
    tr.smemBytes = 32 * 4;
    tr.smemTraffic = 2 * 32 * 4 * static_cast<double>(cost.blocks);
  } else if (s.streamAxis.empty() && std::none_of(p.splitTiles.begin(), p.splitTiles.end(), [&](const auto& split) {
               // (a split taking a loop axis whole shares nothing out: the writer drops it)
               const auto extent = s.loopExtent.find(split.first);
               return extent == s.loopExtent.end() || split.second < extent->second;
             })) {
    plainTileStaging(g, k, s, p, t, o, cost, tr);
  }
  // The accumulator and the intermediate tiles live in registers (a matmul's
  // accumulator fragments, attention's score tile).
  const double registerBytes = tr.accumulator + tr.intermediate;
  cost.onChipBytes = tr.smemBytes + registerBytes;

  const MemoryLevel& gmem = t.level("GMEM");
  const MemoryLevel& l2 = t.level("L2");
  const MemoryLevel& smem = t.level("SMEM");
  const MemoryLevel& reg = t.level("REG");
  const int threads = 256;
  cost.levels.push_back({"GMEM", tr.unique, static_cast<double>(gmem.capacity), tr.unique, tr.unique / gmem.attainableBandwidth});
  cost.levels.push_back({"L2", 0, static_cast<double>(l2.capacity), tr.moved, tr.moved / l2.attainableBandwidth});
  cost.levels.push_back({"SMEM", tr.smemBytes, static_cast<double>(smem.maxPerBlock), tr.smemTraffic,
                         tr.smemTraffic / smem.attainableBandwidth});
  double perThread = registerBytes / threads;
  cost.levels.push_back({"REG", perThread, static_cast<double>(reg.maxPerThread), tr.accumulator * static_cast<double>(cost.blocks),
                         0});
  cost.fits = cost.fits && tr.smemBytes <= static_cast<double>(smem.maxPerBlock) && perThread <= static_cast<double>(reg.maxPerThread);

  // A kernel with a contraction evaluated at each position of its stream (attention's scores, over
  // the channels while the keys stream) runs its contractions as a tensor-core stream
  // (tensor_core_stream.h): warp-level mma.sync, or on sm_90a the warpgroup's wgmma, which waits for
  // each step's products before the step's elementwise work, so the tensor cores idle through it.
  // Either way well under the GEMM library's rate: priced at the target's warp_mma_attainable
  // (measured with mma.sync), on the steps the stream runs (KernelShape::stepsRun). On the H200 (2026-11-30, wgmma + TMA
  // streams, exp as ex2.approx.ftz, d12's causal attention) that predicts the forward at 162 us a
  // layer against 165 measured, dQ 239 against 206, dK/dV 317 against 411 (all steps priced, the
  // predictions had been 298, 447 and 594). (A GEMM's one contraction is over the stream axis itself.)
  // On the CUDA cores, values are redone where the writer's loops redo them
  // (KernelShape::redone).
  // A lane stream (laneStream) issues 8 positions a lane whether its row
  // fills them or not (a 64-long row over 32 lanes issues 256), and sums a
  // row's lanes by log2(lanes) shuffles: the streamed work grows with the
  // first, the row by the second. A position issued past the row's end
  // costs its guard, not its load and product: a third of one, as fitted to
  // GPT-2's d_p (64 channels a head: 32 lanes a row ran 62 us where 8 lanes
  // ran 30, on the H200, 2026-12-02; issued 4x, 2.1x the time). A kernel
  // whose work is on the tensor cores is no lane stream: its contraction is a
  // GEMM's or a tensor-core stream's, whose k-steps the tiles price (a
  // contraction over heads and their channels, streamed over 64 channels a
  // head, was priced at twice its products).
  const bool tensorWork = std::any_of(k.nodes.begin(), k.nodes.end(), [&](NodeId id) {
    return nodeWork(g, g.node(id), t, o).unit.rfind("tensor", 0) == 0;
  });
  const LaneStream lanes = tensorWork ? LaneStream{} : laneStream(g, k, s, p, t, o, cost.blocks);
  double issued = 1;
  if (lanes.lanes > 0) {
    const int64_t extent = streamShare(s, p), perPass = int64_t{lanes.lanes} * 8;
    issued = 1 + (static_cast<double>(ceilDiv(extent, perPass) * perPass) / static_cast<double>(extent) - 1) / 3;
    const double rows = static_cast<double>(cost.blocks) * static_cast<double>(lanes.threads / lanes.lanes);
    cost.work["fp32"] += 2 * rows * lanes.lanes * std::log2(static_cast<double>(lanes.lanes));
  }
  for (NodeId id : k.nodes) {
    NodeWork w = nodeWork(g, g.node(id), t, o);
    const auto redo = s.redone.find(id);
    double times = o.tensorCores || redo == s.redone.end() ? 1.0 : redo->second;
    if (lanes.lanes > 0 && (g.node(id).type.has(s.streamAxis) || (g.node(id).op == Op::Contract || g.node(id).op == Op::Reduce)))
      times *= issued;
    if (w.operations > 0) cost.work[w.unit] += w.operations * times * s.stepsRun;
  }
  for (const auto& level : cost.levels)
    if (level.seconds > 0) cost.seconds[level.level] = level.seconds;
  for (const auto& [unit, ops] : cost.work)
    cost.seconds[unit] = ops / (s.perPosition && o.tensorCores ? t.unit(unit).warpMmaAttainable : t.unit(unit).attainable);
  // Rows held in shared memory (planning/staged_rows.h): a block copies a
  // point's rows, then its passes work on them between barriers, with one
  // or two blocks an SM. Copied through registers, four 16-byte loads at a
  // time, the copies and the work hardly overlapped: GPT-2's classifier
  // (d12): 3.07 GB each way and two exponentials an element ran 2.19 ms on
  // the H200 (2026-12-05), the bytes' 1.46 and the special functions' 0.79
  // one after the other. Copied by cp.async, all of a row's loads in flight
  // at once, the same kernel ran at its bytes' time: 2.59 -> 2.19 ms on an
  // H100 (2026-12-06), 6.15 GiB at its 3.0 TB/s; so there the larger alone.
  if (tr.stagedRows && !t.hasCpAsync) {
    double work = 0;
    for (const auto& [unit, ops] : cost.work) work = std::max(work, cost.seconds[unit]);
    cost.seconds["rows, then passes"] = tr.unique / gmem.attainableBandwidth + work;
  }
  // A scatter-add's atomics go at the rate the device completes them, well
  // under what its L2 moves of plain traffic (the token embedding's gradient:
  // 125 us against 20 at L2 bandwidth, on the H200).
  if (tr.atomicAdds > 0 && t.atomicAddsPerSecond > 0) cost.seconds["atomics"] = tr.atomicAdds / t.atomicAddsPerSecond;
  if (tr.pairAtomicAdds > 0) cost.seconds["atomics"] += tr.pairAtomicAdds / t.pairAtomicAddsPerSecond;
  // Blocks adding their partial sums into the same outputs wait for each
  // other: a whole-array sum's blocks at its one value; a split's blocks at
  // each 128-byte line of an output, whose adds L2 completes one after
  // another (a column sum of 64 channels split 2084 ways, each block adding
  // 32 values a line: 118 us on the H100, 2026-12-06; 129 ways: 9.8 us).
  // (A tensor-core GEMM's split adds its tiles as its blocks finish, priced
  // with its last wave: addTilePipeline.)
  const bool tensorCoreWork = std::any_of(cost.work.begin(), cost.work.end(), [](const auto& w) {
    return w.first.rfind("tensor", 0) == 0 && w.second > 0;
  });
  double addsPerLine = wholeArraySum ? static_cast<double>(cost.blocks) : tensorCoreWork ? static_cast<double>(splits) : 0;
  if (!wholeArraySum && !tensorCoreWork && splits > 1)
    for (NodeId out : k.outputs) {
      const Type& ty = g.node(out).type;
      if (!addsPartialSums(ty, p.splitTiles) || ty.axes.empty()) continue;
      const Axis& inner = ty.axes.back();
      const auto tile = p.groupTiles.find(inner.name);
      const int64_t along = tile == p.groupTiles.end() ? inner.size : std::min(inner.size, tile->second);
      addsPerLine = std::max(addsPerLine, static_cast<double>(splits) * static_cast<double>(std::min<int64_t>(32, along)));
    }
  if (addsPerLine > 1 && t.sameAddressAtomicSeconds > 0)
    cost.seconds["atomics"] = std::max(cost.seconds["atomics"], addsPerLine * t.sameAddressAtomicSeconds);

  // Blocks resident on an SM share its bandwidth and units, so an SM's time
  // grows with the blocks it is given: the busiest SM, with ceil(blocks/SMs),
  // sets the time (a grid smaller than the SMs leaves some idle).
  int64_t perSM = std::max<int64_t>(1, std::min<int64_t>(t.maxBlocksPerSM, static_cast<int64_t>(
                                                                              static_cast<double>(smem.capacity) / std::max(1.0, tr.smemBytes))));
  int64_t slots = static_cast<int64_t>(t.smCount) * perSM;
  int64_t waves = ceilDiv(cost.blocks, slots);
  cost.waveEfficiency = static_cast<double>(cost.blocks) /
                        static_cast<double>(ceilDiv(cost.blocks, t.smCount) * t.smCount);
  double busiest = 0;
  for (const auto& [term, sec] : cost.seconds)
    if (sec / cost.waveEfficiency > busiest) busiest = sec / cost.waveEfficiency, cost.bottleneck = term;

  // Latency (Little's law; planning/thread_loads.h).
  if (const double latency = latencySeconds(g, k, s, p, t, o, lanes, {tr.loaded, tr.loads, loadBytes, cost, threads});
      latency > 0) {
    cost.seconds["latency"] = latency;
    if (latency > busiest) busiest = latency, cost.bottleneck = "latency";
  }

  // Block dispatch: an SM starts the blocks it is given one after another,
  // so a grid of many small blocks, each with little to do, is bound by
  // ceil(blocks / SMs) starts (RoPE's backward rotations, 8000 blocks of 32
  // threads: 6.0 us where their bytes take 2.5).
  if (t.blockDispatchSeconds > 0) {
    const double dispatch = static_cast<double>(ceilDiv(cost.blocks, t.smCount)) * t.blockDispatchSeconds;
    cost.seconds["dispatch"] = dispatch;
    if (dispatch > busiest) busiest = dispatch, cost.bottleneck = "dispatch";
  }

  // A barrier a stream chunk (staged tiles in turn); the positions a block
  // loops over pass none (a row's lanes stride over them): counted per
  // position, a row statistic over 771 channels was priced 13.5 us and ran 3.9.
  double sync = static_cast<double>(cost.synced) * static_cast<double>(waves) * t.blockSyncSeconds(threads / t.warpSize);
  cost.seconds["sync"] = sync;
  cost.seconds["launch"] = t.graphLaunchOverhead + tr.clearSeconds;
  cost.predicted = busiest + sync + t.graphLaunchOverhead + tr.clearSeconds;
  if (cost.predicted - busiest > busiest) cost.bottleneck = "launch/sync";
  return cost;
}

}  // namespace llmc
