#include "planning/scan_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace llmc {

namespace {

// A block of 256 threads, more (up to 1024) where a line's slices need them:
// the rounds wait on loads, so the threads resident on an SM (its 2048) are
// what keeps bytes in flight.
constexpr int kScanBlockThreads = 256;
constexpr int kScanBlockThreadsMax = 1024;
// Positions a thread takes a round: its loads of them are independent, so
// they are in flight at once (Little's law), and scanned in registers. A
// round waits a load's latency, so more a round means fewer rounds; the
// layout takes the count the cost model prices cheapest.
constexpr int kPerSliceChoices[] = {4, 8, 16};

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The least power of two at least n (n >= 1), at most `cap`.
int powerOfTwoAtLeast(int64_t n, int cap) {
  int p = 1;
  while (p < n && p < cap) p *= 2;
  return p;
}

// The greatest power of two at most n (1 where n < 1).
int powerOfTwoAtMost(int64_t n) {
  int p = 1;
  while (static_cast<int64_t>(p) * 2 <= n && p < (1 << 20)) p *= 2;
  return p;
}

// Seconds of one round of a block: a load's latency, and the barriers
// around the slices' totals (two a step of their scan, two more).
double roundSeconds(const ScanLayout& l, const Target& t) {
  int steps = 0;
  for (int d = 1; d < l.slices; d *= 2) ++steps;
  const int syncs = l.slices > 1 ? 2 * steps + 2 : 0;
  const double latency = t.level("GMEM").latency;
  return latency + syncs * t.blockSyncSeconds(std::max(1, l.threads() / std::max(1, t.warpSize)));
}

// What a scan moves: each array once through HBM, and through L2 to the
// SMs what its warps access a point (a line at a position): an array along
// the axis adjacent threads walk its element, one the 32 threads read at
// one address a 32-byte sector among them (1 byte).
struct ScanBytes {
  double hbm = 0;
  double perPoint = 0;
};

KernelCost priced(const ScanBytes& b, double operations, const ScanLayout& l, const Target& t) {
  KernelCost cost;
  const MemoryLevel& gmem = t.level("GMEM");
  const double bytes = b.hbm;
  const double accessed = b.perPoint * static_cast<double>(l.lineCount) * static_cast<double>(l.positions);
  // The SMs the grid occupies move those bytes at the rate a scan's warps
  // reach (Target::scanBytesPerSecondPerSM, fitted on the H200 on sums: a
  // pass bound by its instructions a point, not by the bytes). An element of
  // two parts takes twice them, and twice the registers (H200, 2026-12-04:
  // 2-part scans of 3 and 4 arrays measured 1.9-2.0x and 1.75x a price
  // without the factor).
  const double perSM = t.scanBytesPerSecondPerSM > 0 ? t.scanBytesPerSecondPerSM
                                                     : gmem.attainableBandwidth / std::max(1, t.smCount);
  const double activeSMs = static_cast<double>(std::min<int64_t>(t.smCount, l.blocks));
  cost.blocks = l.blocks;
  cost.chunks = l.rounds;
  cost.synced = l.slices > 1 ? l.rounds : 0;
  LevelCost global{"GMEM", 0, static_cast<double>(gmem.capacity), bytes, bytes / gmem.attainableBandwidth};
  LevelCost l2{"L2", 0, static_cast<double>(t.level("L2").capacity), accessed,
               accessed * l.parts / (perSM * activeSMs)};
  const double smemBytes = l.slices > 1 ? 4.0 * l.parts * l.threads() : 0;
  LevelCost smem{"SMEM", smemBytes, static_cast<double>(t.level("SMEM").maxPerBlock), 0, 0};
  LevelCost reg{"REG", 4.0 * (l.perSlice * l.parts + 4), static_cast<double>(t.level("REG").maxPerThread), 0, 0};
  cost.levels = {global, l2, smem, reg};
  cost.onChipBytes = smemBytes + reg.memoryBytes * l.threads();
  cost.work["fp32"] = operations;
  cost.seconds["GMEM"] = global.seconds;
  cost.seconds["L2"] = l2.seconds;
  cost.seconds["fp32"] = operations / t.unit("fp32").attainable;
  // The blocks resident at once step through their rounds side by side; a
  // grid beyond them runs in turns.
  const int warps = std::max(1, l.threads() / std::max(1, t.warpSize));
  const int64_t blocksPerSM = std::max(1, std::min(t.maxBlocksPerSM, t.maxWarpsPerSM / warps));
  const int64_t waves = ceilDiv(l.blocks, static_cast<int64_t>(t.smCount) * blocksPerSM);
  cost.waveEfficiency = static_cast<double>(l.blocks) / static_cast<double>(ceilDiv(l.blocks, t.smCount) * t.smCount);
  cost.seconds["rounds"] = static_cast<double>(waves * l.rounds) * roundSeconds(l, t);
  double busiest = 0;
  for (const auto& [term, sec] : cost.seconds)
    if (sec > busiest) busiest = sec, cost.bottleneck = term;
  cost.seconds["launch"] = t.graphLaunchOverhead;
  cost.predicted = busiest + t.graphLaunchOverhead;
  cost.engine = "CUDA cores (scan)";
  return cost;
}

// The kernel's bytes (ScanBytes): its inputs read and outputs written once
// through HBM; a point's accesses by the axis adjacent threads walk.
ScanBytes kernelBytes(const Graph& g, const Kernel& k, const ScanLayout& l, const CostOptions& o) {
  const Node& scan = g.node(l.scan);
  const std::string walked = l.positionsInnermost || l.lines.empty() ? l.along : l.lines.back().name;
  ScanBytes b;
  for (NodeId id : k.inputs) {
    const Type& t = g.node(id).type;
    b.hbm += storedBytes(t, o);
    const bool along = t.has(walked) || (walked == l.along && t.has(scan.axes[0]));
    b.perPoint += along ? elementBytes(t, o) : 1.0;
  }
  for (NodeId id : k.outputs) {
    b.hbm += storedBytes(g.node(id).type, o);
    b.perPoint += elementBytes(g.node(id).type, o);
  }
  return b;
}

ScanLayout layoutWith(const Type& result, const std::string& along, int perSlice, const Target& t) {
  ScanLayout l;
  l.perSlice = perSlice;
  l.along = along;
  for (const Axis& a : result.axes) {
    if (a.name == l.along) l.positions = a.size;
    else l.lines.push_back(a), l.lineCount *= a.size;
  }
  l.positionsInnermost = !result.axes.empty() && result.axes.back().name == l.along && l.positions > 1;
  const int64_t resident = std::max<int64_t>(kScanBlockThreads, int64_t{t.smCount} * t.maxWarpsPerSM * t.warpSize);
  if (l.positionsInnermost) {
    // Adjacent threads take adjacent runs of one line: as many slices as
    // the line has runs, the rest of the block other lines.
    l.slices = powerOfTwoAtLeast(ceilDiv(l.positions, l.perSlice), kScanBlockThreadsMax);
  } else {
    // Adjacent threads take adjacent lines (a warp's loads one segment);
    // slices where the lines are too few to fill the device, at most as
    // many as leave a warp's 32 lines a block (or all of them), and no more
    // than the positions' runs.
    const int linesAtLeast = powerOfTwoAtLeast(std::min<int64_t>(l.lineCount, 32), 32);
    const int cap = std::min(kScanBlockThreadsMax / linesAtLeast, powerOfTwoAtMost(ceilDiv(l.positions, l.perSlice)));
    l.slices = std::max(1, std::min(cap, powerOfTwoAtLeast(ceilDiv(resident, std::max<int64_t>(1, l.lineCount)), cap)));
  }
  const int linesAtLeast = l.positionsInnermost ? 1 : powerOfTwoAtLeast(std::min<int64_t>(l.lineCount, 32), 32);
  l.linesPerBlock = static_cast<int>(std::min<int64_t>(powerOfTwoAtLeast(l.lineCount, kScanBlockThreads),
                                                       std::max(linesAtLeast, kScanBlockThreads / l.slices)));
  l.blocks = ceilDiv(l.lineCount, l.linesPerBlock);
  l.rounds = ceilDiv(l.positions, int64_t{l.slices} * l.perSlice);
  return l;
}

// From the most positions a thread down: where the bytes bound every
// choice, the fewest rounds (the fewest barriers) are kept.
template <class Bytes>
ScanLayout cheapestLayout(const Type& result, const std::string& along, int parts, const Target& t, Bytes bytesOf) {
  ScanLayout best;
  double fastest = 0;
  for (auto it = std::rbegin(kPerSliceChoices); it != std::rend(kPerSliceChoices); ++it) {
    ScanLayout l = layoutWith(result, along, *it, t);
    l.parts = parts;
    const double seconds = priced(bytesOf(l), 0, l, t).predicted;
    if (best.perSlice == 1 || seconds < fastest) best = l, fastest = seconds;
  }
  return best;
}

ScanBytes valueBytes(const Type& input, const Type& result, const CostOptions& o) {
  return {storedBytes(input, o) + storedBytes(result, o), static_cast<double>(elementBytes(input, o) + elementBytes(result, o))};
}

}  // namespace

NodeId scanOf(const Graph& g, const Kernel& k) {
  for (NodeId id : k.nodes)
    if (g.node(id).op == Op::Scan) return id;
  return -1;
}

ScanLayout scanLayout(const Graph& g, const Kernel& k, NodeId scan, const Target& t, const CostOptions& o) {
  const Node& n = g.node(scan);
  const int parts = isLinearScan(n) || isMonoidScan(n) ? 2 : 1;
  ScanLayout l = cheapestLayout(n.type, n.newAxes.at(0), parts, t, [&](ScanLayout candidate) {
    candidate.scan = scan;
    return kernelBytes(g, k, candidate, o);
  });
  l.scan = scan;
  return l;
}

ScanLayout scanLayout(const Type& input, const Type& result, const std::string& along, const Target& t,
                      const CostOptions& o) {
  return cheapestLayout(result, along, 1, t, [&](const ScanLayout&) { return valueBytes(input, result, o); });
}

KernelCost scanCost(const Graph& g, const Kernel& k, const ScanLayout& l, const Target& t, const CostOptions& o) {
  double operations = 0;
  for (NodeId id : k.nodes) operations += nodeWork(g, g.node(id), t, o).operations;
  return priced(kernelBytes(g, k, l, o), operations, l, t);
}

double scanSeconds(const Type& input, const Type& result, const ScanLayout& l, const Target& t, const CostOptions& o) {
  return priced(valueBytes(input, result, o), static_cast<double>(result.elementCount()), l, t).predicted;
}

std::string scanPartitionText(const ScanLayout& l) {
  return fmt::format("scan {} | lines {}/{} | slices {} x {} | rounds {}", l.along, l.lineCount, l.linesPerBlock,
                     l.slices, l.perSlice, l.rounds);
}

}  // namespace llmc
