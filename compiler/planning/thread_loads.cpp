#include "planning/thread_loads.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "analysis/streamability.h"
#include "planning/flat_points.h"

namespace llmc {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A group axis' tile: the whole axis where the partition leaves it untiled
// (an axis of size 1 has no entry).
int64_t tileOf(const Partition& p, const Axis& a) {
  const auto it = p.groupTiles.find(a.name);
  return it == p.groupTiles.end() ? a.size : it->second;
}

// Whether the CUDA writer deals the stream's positions out to slices of the
// block's threads (CudaWriter::streamSlices): its slots one per point
// (their factors along the group axes and the stream's alone, the same axes
// looped inside each position), joined by +, max, or rescaled to a joined
// running maximum. `afterwards`: set where outputs along the stream read its
// results, each slice then walking its positions a second time; `rescaled`:
// where a sum is rescaled by a running maximum (no 8 points a thread then).
bool dealtToSlices(const Graph& g, const Kernel& k, const KernelShape& s, bool& afterwards, bool& rescaled) {
  const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
  const StreamAnalysis a = analyzeStream(g, members, s.streamAxis);
  if (!a.streamable || a.slots.empty()) return false;
  std::set<std::string> group;
  for (const Axis& x : s.groupAxes) group.insert(x.name);
  std::vector<std::string> inner;
  if (!slotsOnePerPoint(g, a, group)) return false;
  for (size_t i = 0; i < a.slots.size(); ++i) {
    const AccumulatorSlot& slot = a.slots[i];
    rescaled = rescaled || slot.rescaledBy >= 0;
    std::vector<std::string> own;
    for (const std::string& x : slot.axes)
      if (x != s.streamAxis) own.push_back(x);
    if (i == 0) inner = own;
    else if (own != inner) return false;
  }
  afterwards = std::any_of(k.outputs.begin(), k.outputs.end(), [&](NodeId o) {
    return g.node(o).type.has(s.streamAxis) && readsStreamResults(g, a, members, o);
  });
  return true;
}

// How a stream dealt to slices lies in its block: a thread's points (8 where
// they take 8 adjacent ones) and the slices, doubled while the block stays
// within its threads, the blocks resident at once within the device's, and
// each slice 8 positions or more (CudaWriter::streamSlices).
struct SlicesDealt {
  bool eight = false;
  double threadPoints = 1, slices = 1;
};

SlicesDealt slicesDealt(const KernelShape& s, const Partition& p, const Target& t, const CostOptions& o, bool rescaled,
                        double positions, const LoadsCounted& in) {
  SlicesDealt d;
  double points = 1;
  for (const auto& [axis, tile] : p.groupTiles) points *= static_cast<double>(tile);
  // (No group axis, or a last one the partition leaves untiled: a tile of its whole size.)
  const Axis* last = s.groupAxes.empty() ? nullptr : &s.groupAxes.back();
  const int64_t lastTile = last ? tileOf(p, *last) : 1;
  d.eight = o.storageBytes == 2 && !rescaled && last && lastTile % 8 == 0 && last->size % 8 == 0;
  d.threadPoints = std::ceil(points / (d.eight ? 8 : 1));
  const double residentBlocks = std::min<double>(static_cast<double>(in.cost.blocks),
                                                 static_cast<double>(t.smCount) * t.maxBlocksPerSM);
  const double residentThreads = static_cast<double>(t.smCount) * t.maxWarpsPerSM * t.warpSize;
  while (d.threadPoints * d.slices * 2 <= in.threads && residentBlocks * d.threadPoints * d.slices * 2 <= residentThreads &&
         positions / (d.slices * 2) >= 8)
    d.slices *= 2;
  return d;
}

}  // namespace

LaneStream laneStream(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, const Target& t,
                      const CostOptions& o, int64_t blocks) {
  LaneStream out;
  constexpr int64_t kLaneAxisMin = 32;  // the CUDA writer's
  // The positions a block streams: all, or its share of a split stream.
  int64_t extent = s.streamExtent;
  for (const auto& [axis, perBlock] : p.splitTiles)
    if (axis == s.streamAxis) extent = std::min(extent, perBlock);
  if (s.streamAxis.empty() || p.streamChunk < kLaneAxisMin || extent < kLaneAxisMin) return out;
  std::set<std::string> group;
  for (const Axis& a : s.groupAxes) group.insert(a.name);
  // Not where an array read along the stream is contiguous along the axis the
  // tile's threads walk (the last group axis): those stay a thread a point.
  int bytes = 0;
  bool bf16Along = false;
  for (NodeId in : k.inputs) {
    const Type& ty = g.node(in).type;
    if (!ty.has(s.streamAxis) || ty.axes.empty()) continue;
    if (!s.groupAxes.empty() && ty.axes.back().name == s.groupAxes.back().name) return out;
    bytes = std::max(bytes, elementBytes(ty, o));
    bf16Along = bf16Along || (isFloat(ty.dtype) && o.storageBytes == 2 && ty.axes.back().name == s.streamAxis);
  }
  const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
  const StreamAnalysis a = analyzeStream(g, members, s.streamAxis);
  if (!a.streamable || a.slots.empty()) return out;
  if (!slotsOnePerPoint(g, a, group)) return out;
  // The blocks may share out the stream, or an axis the slots loop at each
  // position (CudaWriter::laneAxis), no other.
  for (const auto& [axis, perBlock] : p.splitTiles)
    if (axis != s.streamAxis && perBlock < s.loopExtent.at(axis) &&
        std::find(a.slots[0].axes.begin(), a.slots[0].axes.end(), axis) == a.slots[0].axes.end())
      return out;
  // (With slots looping other axes at each position: only along a stream
  // every array read along lies contiguous along, CudaWriter::laneAxis.)
  const bool looped = std::any_of(a.slots.begin(), a.slots.end(), [](const AccumulatorSlot& x) { return x.axes.size() > 1; });
  for (NodeId in : k.inputs)
    if (looped && g.node(in).type.has(s.streamAxis) && g.node(in).type.axes.back().name != s.streamAxis) return out;
  std::set<std::string> kept;  // the group axes the slots keep: their factors' (and pivots')
  bool mixedInnerAxes = false;  // slots looping different other reduced axes at each position
  for (const AccumulatorSlot& slot : a.slots) {
    mixedInnerAxes = mixedInnerAxes || slot.axes != a.slots[0].axes;
    for (const StreamFactor& f : slot.core) {
      for (const Axis& x : g.node(f.node).type.axes) kept.insert(x.name);
      if (f.pivoted())
        for (const Axis& x : g.node(f.pivotOf).type.axes)
          if (g.node(f.pivotKeeps).type.has(x.name)) kept.insert(x.name);
    }
  }
  // The warps walk rows, the positions of the kept axes: the slots are made
  // once a row, the row's lanes then spread over the tile's other group axes
  // (CudaWriter::spreadAxes).
  int64_t points = 1;
  bool remainder = false;
  for (const Axis& x : s.groupAxes) {
    if (kept.count(x.name)) points *= tileOf(p, x);
    remainder = remainder || x.size % tileOf(p, x) != 0;
  }
  out.lanes = 32;
  if (bf16Along && extent % 8 == 0 && extent < 256 && !remainder) {
    int lanes = 1;
    while (16 * lanes <= extent) lanes *= 2;
    if (points % (32 / lanes) == 0) out.lanes = lanes;
  }
  if (out.lanes == 32 && !remainder && !mixedInnerAxes) {  // (CudaWriter::streamLanes: CudaWriter::scalarSlots)
    const int64_t deviceThreads = int64_t{t.smCount} * t.maxWarpsPerSM * t.warpSize;
    const int64_t residentBlocks = std::min<int64_t>(blocks, int64_t{t.smCount} * t.maxBlocksPerSM);
    int64_t inner = 1;  // the values a position adds: one, or the other reduced axes' positions
    for (const std::string& x : a.slots[0].axes)
      if (auto loop = s.loopExtent.find(x); loop != s.loopExtent.end()) inner *= loop->second;
    while (points * out.lanes * 2 <= 256 && residentBlocks * points * out.lanes * 2 <= deviceThreads &&
           extent * inner / (out.lanes * 2) >= 32 && out.lanes * 2 <= extent)
      out.lanes *= 2;
  }
  out.threads = std::min<int64_t>(256, points * out.lanes);
  // 8 positions a lane, fewer where the row is shorter than 8 a lane.
  out.bytesInFlight = static_cast<double>(std::min<int64_t>(8, ceilDiv(extent, out.lanes))) * std::max(bytes, 1);
  return out;
}

// Latency (Little's law): a kernel on the CUDA cores loads straight into
// registers, a thread waiting for its load before the next (the
// tensor-core kernels keep stages of tiles in flight instead), so the
// device has at most its resident threads' loads in flight and moves
// them once per memory latency. A grid of few threads is bound by that,
// not by the bandwidth: GPT-2's position-embedding gradient, 192 blocks of
// 256 threads summing 50 MB over the batch, ran at 1.5 TB/s on the H200.
// The block's threads share the loads of the largest share of an
// input it reads (its tile along the whole stream and the axes it loops
// over): a thread walks its points' positions, all of them, or 8 where
// 16 positions or more and nothing is stored along the stream; at least a
// warp's threads, at most the block's. Streams dealt out to slices of the
// block's threads are counted below.
double latencySeconds(const Graph& g, const Kernel& k, const KernelShape& s, const Partition& p, const Target& t,
                      const CostOptions& o, const LaneStream& lanes, const LoadsCounted& in) {
  const bool tensorCoreWork = std::any_of(in.cost.work.begin(), in.cost.work.end(), [](const auto& w) {
    return w.first.rfind("tensor", 0) == 0 && w.second > 0;
  });
  const MemoryLevel& gmem = t.level("GMEM");
  if (tensorCoreWork || gmem.latency <= 0 || in.loaded <= 0) return 0;
  double positions = s.streamAxis.empty() ? 1 : static_cast<double>(streamShare(s, p));
  for (const auto& [axis, extent] : s.loopExtent)
    positions *= static_cast<double>(p.splitTiles.count(axis) ? p.splitTiles.at(axis) : extent);
  const bool storedInStream = std::any_of(k.outputs.begin(), k.outputs.end(),
                                          [&](NodeId out) { return g.node(out).type.has(s.streamAxis); });
  const double loadsPerThread = !storedInStream && positions >= 16 ? 8 : positions;
  double threadsUsed = std::clamp(std::ceil(in.loads / loadsPerThread), static_cast<double>(t.warpSize),
                                  static_cast<double>(in.threads));
  // Without a stream or loops every thread loads its own points' inputs
  // (8 points a thread with bf16 storage, CudaWriter::pointsTake8), read
  // a value at a time or not: the block's threads, not its largest tile
  // in 16-byte pieces.
  // A thread's bytes in flight: 16 where it takes 8 points at once (the
  // last group axis' tile and size multiples of 8), else a value for each
  // of the points its unrolled loop issues together (kPointsInFlight).
  double inFlight = in.loadBytes;
  if (s.streamAxis.empty() && s.loopAxes.empty()) {
    double points = 1;
    for (const auto& [axis, tile] : p.groupTiles) points *= static_cast<double>(tile);
    // (CudaWriter::pointsTake8: 8 adjacent points along the last group
    // axis, or over the last ones where the inner ones are tiled whole.)
    bool eight = false;
    int64_t whole = 1;
    for (auto a = s.groupAxes.rbegin(); a != s.groupAxes.rend() && o.storageBytes == 2; ++a) {
      if (std::none_of(k.outputs.begin(), k.outputs.end(), [&](NodeId out) { return g.node(out).type.has(a->name); }))
        continue;
      const int64_t tile = tileOf(p, *a), step = 8 / whole;
      if (tile % step == 0 && a->size % step == 0) {
        eight = true;
        break;
      }
      if (tile != a->size || step % a->size != 0) break;
      whole *= a->size;
    }
    // (Else flat points, planning/flat_points.h: 8 consecutive elements of the flattened index.)
    if (!eight && o.storageBytes == 2 && p.splitTiles.empty()) {
      const std::set<NodeId> computed(k.nodes.begin(), k.nodes.end()), stored(k.inputs.begin(), k.inputs.end());
      eight = takesFlatPoints(g, computed, stored, k.outputs, s.groupAxes,
                              [&](NodeId id) -> int64_t { return elementBytes(g.node(id).type, o); });
    }
    const double pointThreads = std::ceil(points / (eight ? 8 : 1));
    threadsUsed = std::max(threadsUsed, std::clamp(pointThreads, static_cast<double>(t.warpSize), static_cast<double>(in.threads)));
    if (!eight)
      inFlight = o.storageBytes * std::clamp(std::ceil(pointThreads / threadsUsed), 1.0, static_cast<double>(kPointsInFlight));
  }
  // A stream of plain sums, its positions dealt to slices of the block's
  // threads (CudaWriter::streamSlices): the tile's points (8 to a thread
  // where they take 8) times the slices, each thread with kPointsInFlight
  // positions of each input in flight. Counted as the loads' 16-byte
  // shares, a column sum over 41 rows of 64 channels had 41 threads.
  double chainSeconds = 0;  // the longest thread's loads, one round after another
  bool afterwards = false;     // outputs along the stream made after it: each slice walks its positions twice
  bool rescaled = false;
  const bool dealt = lanes.lanes == 0 && !s.streamAxis.empty() && s.loopAxes.empty() &&
                     dealtToSlices(g, k, s, afterwards, rescaled);
  // Counted so as well, slices or none: a stream of plain sums the blocks
  // may share out, storing nothing along it.
  const bool splittable = dealt && !storedInStream &&
                          std::find(s.splitAxes.begin(), s.splitAxes.end(), s.streamAxis) != s.splitAxes.end();
  // (The slices deal out the stream's positions; each walks the looped axes
  // whole at every one of its positions.)
  const double share = s.streamAxis.empty() ? 1 : static_cast<double>(streamShare(s, p));
  const SlicesDealt d = dealt ? slicesDealt(s, p, t, o, rescaled, share, in) : SlicesDealt{};
  if (dealt && (d.slices > 1 || splittable)) {
    const double slices = d.slices, threadPoints = d.threadPoints;
    const bool eight = d.eight;
    threadsUsed = std::min<double>(in.threads, slices > 1 ? threadPoints * slices : std::ceil(threadPoints / 32) * 32);
    double bytesPerPosition = 0;  // a thread's, over the inputs along the stream and the tile
    for (NodeId in : k.inputs) {    // (a row's statistic, the same for the whole warp, is one load)
      const Type& ty = g.node(in).type;
      if (ty.has(s.streamAxis) && std::any_of(s.groupAxes.begin(), s.groupAxes.end(),
                                              [&](const Axis& a) { return ty.has(a.name); }))
        bytesPerPosition += eight ? 16 : elementBytes(ty, o);
    }
    inFlight = kPointsInFlight * std::max(bytesPerPosition, 1.0);
    // A thread waits for its positions kPointsInFlight at a time: the
    // slices' share rounded up, then the rounds rounded up, whatever the
    // average over the device's threads (a column sum over 41 rows in 4
    // slices waits 3 rounds where the average says 2.2).
    const double rounds = std::ceil(std::ceil(share / slices) * (positions / share) / kPointsInFlight);
    chainSeconds = rounds * gmem.latency * (afterwards ? 2 : 1);
  }
  // A lane stream's threads: its points' lanes, 8 positions a lane in flight.
  if (lanes.lanes > 0) {
    threadsUsed = static_cast<double>(lanes.threads);
    inFlight = lanes.bytesInFlight;
  }
  const double residentBlocks = std::min<double>(static_cast<double>(in.cost.blocks),
                                                 static_cast<double>(t.smCount) * t.maxBlocksPerSM);
  const double resident = std::min(residentBlocks * threadsUsed,
                                   static_cast<double>(t.smCount) * t.maxWarpsPerSM * t.warpSize);
  const double latencyBound = in.loaded * gmem.latency / (resident * inFlight);
  return std::max(latencyBound, chainSeconds);
}

}  // namespace llmc
