// The partition search (declared in cost_model.h): every legal combination
// of tiles, loop shares, stream shares and chunks a kernel's shape allows,
// each priced by evaluate(); the fastest (or the one moving least) is kept.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "frontend/resource_limits.h"
#include "parallel_for.h"
#include "planning/cost_model.h"

namespace llmc {

namespace {

// Below this many partitions a thread, the search prices them on one:
// starting a thread costs about what pricing a few dozen does.
constexpr size_t kCandidatesPerThreadMin = 64;

struct PartitionChoice {
  Partition partition;
  int64_t blocks = 0;
};

// What the search keeps of a partition's cost.
struct PricedBrief {
  double predicted = 0, l2Moved = 0, smemBytes = 0;
  int64_t blocks = 0;
  bool fits = false;
  std::string trace;  // LLMC_DBG_SEARCH's line
};

std::string traceText(const Partition& p, const KernelCost& c) {
  std::string d;
  for (auto& [a, v] : p.groupTiles) d += a + "/" + std::to_string(v) + " ";
  for (auto& [a, v] : p.splitTiles) d += "split " + a + "/" + std::to_string(v) + " ";
  d += "chunk " + std::to_string(p.streamChunk);
  std::string terms;
  for (auto& [a, v] : c.seconds) terms += a + "=" + std::to_string(v*1e6).substr(0,5) + " ";
  char line[4096];
  snprintf(line, sizeof line, "  cand %s: %.2f us (%s) blocks %lld %s\n", d.c_str(), c.predicted * 1e6,
           c.bottleneck.c_str(), (long long)c.blocks, terms.c_str());
  return line;
}

// Whether a kernel's threads wait on the memory's latency far longer than
// anything else takes it: the latency term more than twice every other but
// the launch and the barriers.
bool latencyBoundByFar(const KernelCost& c) {
  const auto latency = c.seconds.find("latency");
  if (latency == c.seconds.end()) return false;
  double others = 0;
  for (const auto& [term, seconds] : c.seconds)
    if (term != "latency" && term != "launch" && term != "sync") others = std::max(others, seconds);
  return latency->second > 2 * others;
}

}  // namespace

// (Written so that nothing overflows for any extent: past 2^62 a doubling
// wrapped, and the loop never ended.)
std::vector<int64_t> tileCandidates(int64_t extent, int64_t multiple, int64_t growthDivisor) {
  const int64_t step = std::max<int64_t>(1, multiple);
  const int64_t tiles = extent / step + (extent % step != 0);
  const int64_t whole = checkedMul(tiles, step).value_or(extent / step * step);
  std::vector<int64_t> out;
  for (int64_t t = step; t < whole;) {
    out.push_back(t);
    // t is a multiple of step: the next candidate grows by 1/growthDivisor,
    // rounded down to a multiple of step, and by at least one step.
    const int64_t growth = step == 1 ? t : std::max(step, t / growthDivisor / step * step);
    if (growth >= whole - t) break;
    t += growth;
  }
  out.push_back(whole);
  return out;
}

namespace {

// The fastest legal partition over every combination of `options` (one list
// a group axis, a loop axis, and where it is shared out, the stream) and
// `chunks`.
PartitionChoice searchOptions(const Graph& g, const Kernel& k, const KernelShape& s, const Target& t,
                              const CostOptions& o, Objective objective,
                              const std::vector<std::vector<int64_t>>& options, const std::vector<int64_t>& chunks) {
  // Partitions priced within 1% of the fastest are taken as equal, and among
  // them the fastest whose blocks hold at least kFullBlockPoints points is
  // kept where one does: what the model leaves out — a block's launch and
  // its index arithmetic, redone by every block — is small against a block
  // whose 256 threads take 8 points each, not against tiny ones (RoPE's
  // rotation, [b h t i r:2], in blocks of 128 points: 8000 blocks issuing 91
  // instructions a point, 5.7 us on the H200 against 2 predicted). Not the
  // fewest blocks: of two partitions priced alike, transposing a
  // classifier's logits, 777 rows a block ran 4x slower than 128 (L1 no
  // longer held the sectors the threads come back to).
  constexpr int64_t kFullBlockPoints = 2048;
  struct Priced {
    Partition partition;
    double score;
    bool full;
    int64_t blocks;
  };
  // Every combination, in the order the search walks them, priced on the
  // machine's cores; then walked in that order, so that the partition kept
  // is the same for any number of threads.
  std::vector<Partition> candidates;
  std::vector<size_t> pick(options.size(), 0);
  while (true) {
    for (int64_t chunk : chunks) {
      Partition& p = candidates.emplace_back();
      for (size_t i = 0; i < options.size(); ++i) {
        if (i < s.groupAxes.size()) p.groupTiles[s.groupAxes[i].name] = options[i][pick[i]];
        else if (i < s.groupAxes.size() + s.loopAxes.size()) p.splitTiles[s.loopAxes[i - s.groupAxes.size()]] = options[i][pick[i]];
        else p.splitTiles[s.streamAxis] = options[i][pick[i]];
      }
      p.streamChunk = chunk;
    }
    size_t i = 0;
    while (i < pick.size() && ++pick[i] == options[i].size()) pick[i++] = 0;
    if (i == pick.size()) break;
  }
  const bool traced = getenv("LLMC_DBG_SEARCH") != nullptr;
  if (traced) fprintf(stderr, "search %s (stream %s)\n", k.name.c_str(), s.streamAxis.c_str());
  std::vector<PricedBrief> costs(candidates.size());
  parallelFor(candidates.size(), kCandidatesPerThreadMin, [&](size_t i) {
    const KernelCost c = evaluate(g, k, s, candidates[i], t, o);
    costs[i] = {c.predicted, c.level("L2").movedBytes, c.level("SMEM").memoryBytes, c.blocks, c.fits,
                traced ? traceText(candidates[i], c) : std::string()};
  });
  std::vector<Priced> legal;
  Partition smallest;
  double bestTime = INFINITY, smallestMemory = INFINITY;
  for (size_t n = 0; n < candidates.size(); ++n) {
    const Partition& p = candidates[n];
    const PricedBrief& c = costs[n];
    if (traced) fprintf(stderr, "%s", c.trace.c_str());
    double memory = c.smemBytes;
    double score = objective == Objective::Time ? c.predicted : c.l2Moved;
    // A tile under its axis' segment is taken only where it gains more than
    // 1%: what it adds (partial segments) the model prices only in part.
    for (const auto& [axis, segment] : s.segment)
      if (p.groupTiles.at(axis) < segment) {
        score *= 1.01;
        break;
      }
    if (c.fits) {
      bestTime = std::min(bestTime, score);
      int64_t points = 1;
      for (const auto& [axis, tile] : p.groupTiles) points = checkedMul(points, tile).value_or(kFullBlockPoints);
      if (score <= bestTime * 1.01) legal.push_back({p, score, points >= kFullBlockPoints, c.blocks});
    }
    if (memory < smallestMemory) smallestMemory = memory, smallest = p;
  }
  if (std::isinf(bestTime)) return {smallest, evaluate(g, k, s, smallest, t, o).blocks};
  const Priced* best = nullptr;
  for (const Priced& c : legal)
    if (c.score <= bestTime * 1.01 && (!best || (c.full && !best->full) || (c.full == best->full && c.score < best->score)))
      best = &c;
  return {best->partition, best->blocks};
}

}  // namespace

Partition searchPartition(const Graph& g, const Kernel& k, const KernelShape& s, const Target& t, const CostOptions& o,
                          Objective objective) {
  // Minimising transfers alone is cheap to evaluate and wants a fine grid (the
  // closed forms); the time search walks a coarser one over more axes.
  const int64_t growth = objective == Objective::Transfers ? 16 : 4;
  std::vector<std::vector<int64_t>> options;
  for (const auto& a : s.groupAxes) {
    auto m = s.tileMultiple.find(a.name);
    std::vector<int64_t> tiles = tileCandidates(a.size, m == s.tileMultiple.end() ? 1 : m->second, growth);
    if (auto seg = s.segment.find(a.name); seg != s.segment.end() && objective == Objective::Time) {
      std::vector<int64_t> below;
      for (int64_t t = 1; t < seg->second && t < a.size; t *= 2) below.push_back(t);
      tiles.insert(tiles.begin(), below.begin(), below.end());
    }
    options.push_back(tiles);
  }
  // Split-K candidates: positions per block, halving from the whole axis.
  for (const auto& axis : s.loopAxes) {
    std::vector<int64_t> perBlock;
    const bool splits = std::find(s.splitAxes.begin(), s.splitAxes.end(), axis) != s.splitAxes.end();
    for (int64_t n = s.loopExtent.at(axis); n >= 1 && (splits || perBlock.empty()); n /= 2) perBlock.push_back(n);
    options.push_back(perBlock);
  }
  std::vector<int64_t> chunks = {0};
  if (!s.streamAxis.empty() && s.streamExtent > 0) {
    auto m = s.tileMultiple.find(s.streamAxis);
    chunks = tileCandidates(s.streamExtent, m == s.tileMultiple.end() ? 1 : m->second, growth);
  }
  const PartitionChoice whole = searchOptions(g, k, s, t, o, objective, options, chunks);
  // The stream's share a block takes, halving from the whole stream; only
  // where the best partition without it leaves SMs without a block (few
  // rows, or few columns of a column sum): a grid that fills the device
  // keeps its stream whole (GPT-2's bias gradients, 768 blocks of column
  // sums, ran 52 us whole and 75 with the stream split 8 ways on the H200,
  // 2026-12-01, at the same predicted time). A layernorm's gain gradient
  // over 333 rows of 771 channels, 13 blocks whole, ran 22 us where its
  // model said 9.5: each thread walked 84 rows, a load in flight a row.
  // Also where the grid fills the SMs with blocks of a thread or two, their
  // loads too few to hide the memory's latency (latency more than twice any
  // other term), if shared out it is priced at most 2/3 of whole: a split
  // stream beside a full grid ran 1.4x the time priced whole (the bias
  // gradients above). A layernorm's gain gradient over 256 channels, a
  // block a channel of one thread walking 4096 rows, priced 902 us whole
  // and 58 shared out; GPT-2's, their latency 1.3x their bytes' time, stay
  // whole.
  const bool streamSplits = std::find(s.splitAxes.begin(), s.splitAxes.end(), s.streamAxis) != s.splitAxes.end();
  if (!streamSplits) return whole.partition;
  const bool fills = whole.blocks >= t.smCount;
  const KernelCost wholeCost = fills ? evaluate(g, k, s, whole.partition, t, o) : KernelCost{};
  if (fills && !latencyBoundByFar(wholeCost)) return whole.partition;
  std::vector<int64_t> perBlock;
  for (int64_t n = s.streamExtent; n >= kSplitPositionsMin; n /= 2) perBlock.push_back(n);
  options.push_back(perBlock);
  const Partition shared = searchOptions(g, k, s, t, o, objective, options, chunks).partition;
  if (fills && evaluate(g, k, s, shared, t, o).predicted * 1.5 > wholeCost.predicted) return whole.partition;
  return shared;
}

}  // namespace llmc
