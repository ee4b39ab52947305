#include "lowering/gemm_tiles.h"

#include "lowering/lowering.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <regex>
#include <tuple>
#include <vector>

namespace llmc {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The bytes every row of `p` starts aligned to in GMEM, up to 128: what its
// leading dimension, offset and batch strides (bf16 elements) share.
int rowAlignmentBytes(const GemmOperandPlacement& p) {
  int64_t common = 64;  // 128 bytes
  for (int64_t e : {p.ld, p.offset, p.batchOuterStride, p.batchInnerStride}) common = std::gcd(common, e);
  return static_cast<int>(2 * common);
}

// A ping-pong block's units end to end (gemm_sm90.cuh): consumers take
// alternate units, their k-steps in turn (one unit's after the previous
// one's), each unit's epilogue after its own k-steps on its consumer alone.
double pingPongSeconds(int64_t units, double kSteps, double epilogue) {
  double mainloopFree = 0, end = 0;
  double consumerFree[2] = {0, 0};
  for (int64_t u = 0; u < units; ++u) {
    double& consumer = consumerFree[u % 2];
    mainloopFree = std::max(consumer, mainloopFree) + kSteps;
    consumer = mainloopFree + epilogue;
    end = std::max(end, consumer);
  }
  return end;
}

// The tile library's GEMM as its blocks run it, beside what evaluate() prices
// (the traffic through each level over the whole device): a block walks its
// units (tiles, or a tile's slice of the k-steps) one after another, each
// k-step as long as its wgmmas or filling its stage from L2 take on one SM,
// each unit's accumulators then drained by the epilogue and its elementwise
// work done there, at the rate its warps issue it (beside the other
// consumer's k-steps where they ping-pong); the first stage's load and the
// last epilogue are not hidden behind anything. The TMA reads rows whose
// starts are not 128-byte aligned at a device-wide rate of their own
// (target.unalignedRowBandwidth). Without that, 1000x2056x776 GEMMs were
// predicted at 11 us and ran 20 (H200, 2026-12-02). A cluster of blocks over
// consecutive row tiles reads their B tile from L2 once (multicast): each
// block loads its A tile and its share of B, and walks its cluster's tiles.
void addTilePipeline(KernelCost& cost, const TensorCoreGemm& gemm, const GemmTile& tile, const Target& t,
                     double epilogueOps, double operandBytes) {
  if (t.tileLoadBytesPerSecondPerSM <= 0 || t.tileEpilogueBytesPerSecondPerSM <= 0 || !t.hasUnit("tensor_bf16")) return;
  const int64_t tilesM = ceilDiv(gemm.M, tile.bm), tilesN = ceilDiv(gemm.N, tile.bn);
  const int64_t cluster = tile.cluster;
  const int64_t units = ceilDiv(tilesM, cluster) * tilesN * gemm.batches() * tile.splits;
  // sm_90a's grid is persistent (a block an SM, or a cluster of blocks, walks
  // the units); sm_80's has a block a tile, one resident an SM at these
  // tiles' shared memory.
  const int64_t unitsPerSM = ceilDiv(units, std::min<int64_t>(units, t.smCount / cluster));
  const int64_t kSteps = ceilDiv(ceilDiv(gemm.K, gemm.BK), tile.splits);
  const double bm = tile.bm, bn = tile.bn, bk = gemm.BK;
  const double tensorPerSM = t.unit("tensor_bf16").attainable / t.smCount;
  const double step =
      std::max(2 * bm * bn * bk / tensorPerSM, 2 * (bm + bn / static_cast<double>(cluster)) * bk / t.tileLoadBytesPerSecondPerSM);
  const double kStepSeconds = static_cast<double>(unitsPerSM * kSteps) * step;
  const double epilogue = 4 * bm * bn / t.tileEpilogueBytesPerSecondPerSM +
                          (t.tileEpilogueOpsPerSecondPerSM > 0 ? epilogueOps * bm * bn / t.tileEpilogueOpsPerSecondPerSM : 0);
  // Cooperative consumers drain each unit together after its k-steps;
  // ping-pong ones each drain a whole unit alone (twice as long) beside the
  // other's k-steps, which hides it only where those are as long.
  const double epilogueSeconds =
      tile.pingPong ? pingPongSeconds(unitsPerSM, static_cast<double>(kSteps) * step, 2 * epilogue) - kStepSeconds
                    : static_cast<double>(unitsPerSM) * epilogue;
  double unaligned = 0;
  auto reads = [&](const GemmOperandPlacement& p, double bytes) {
    const int align = rowAlignmentBytes(p);
    const int level = align >= 64 ? 2 : align >= 32 ? 1 : 0;
    if (align < 128 && t.unalignedRowBandwidth[level] > 0) unaligned += bytes / t.unalignedRowBandwidth[level];
  };
  const double batches = static_cast<double>(gemm.batches());
  reads(gemm.a, batches * static_cast<double>(tilesN) * 2.0 * static_cast<double>(gemm.M * gemm.K));
  // B's elements the tiles read from L2: every row tile all of B, a cluster's tiles once between them.
  const double bElementsRead = batches * static_cast<double>(tilesM) * static_cast<double>(gemm.N * gemm.K);
  reads(gemm.b, 2.0 * bElementsRead / static_cast<double>(cluster));

  const double fixed = cost.seconds["sync"] + cost.seconds["launch"];
  double busiest = cost.predicted - fixed;
  // A cluster's blocks read B's tiles once between them: the L2 traffic the
  // partition priced (each tile reading its own, at evaluate()'s bytes an
  // element) less the copies they share.
  const double sharedB = bElementsRead * operandBytes * (1.0 - 1.0 / static_cast<double>(cluster));
  // The stages fill from L2 through the TMA, at a rate of its own where the
  // target has one: the busiest term taken again over the others.
  if (t.tileL2BytesPerSecond > 0 || sharedB > 0) {
    for (LevelCost& level : cost.levels) {
      if (level.level != "L2") continue;
      const double moved = std::max(0.0, level.movedBytes - sharedB);
      level.seconds = t.tileL2BytesPerSecond > 0 ? moved / t.tileL2BytesPerSecond
                      : level.movedBytes > 0      ? level.seconds * moved / level.movedBytes
                                                  : level.seconds;
      level.movedBytes = moved;
      cost.seconds["L2"] = level.seconds;
    }
    busiest = 0;
    for (const auto& [term, seconds] : cost.seconds)
      if (term != "sync" && term != "launch" && seconds / cost.waveEfficiency > busiest)
        busiest = seconds / cost.waveEfficiency, cost.bottleneck = term;
  }
  cost.seconds["k-steps"] = kStepSeconds;
  cost.seconds["epilogue"] = epilogueSeconds;
  cost.seconds["fill"] = t.tileFillSeconds;
  if (unaligned > 0) cost.seconds["unaligned rows"] = unaligned;
  const double streamed = std::max({busiest, kStepSeconds, unaligned});
  if (streamed == kStepSeconds && kStepSeconds > busiest) cost.bottleneck = "k-steps";
  if (streamed == unaligned && unaligned > busiest) cost.bottleneck = "unaligned rows";
  if (epilogueSeconds + t.tileFillSeconds > streamed) cost.bottleneck = "fill/epilogue";
  // A split's units add their partial tiles atomically after their k-steps:
  // the adds of the last wave follow its k-steps with nothing left to hide
  // them (the earlier waves' run beside later k-steps, within the whole
  // kernel's "atomics" term). Measured on the H200 (2026-12-06), splits
  // priced without it ran 1.5-2.4x their price where the units fit in one
  // wave: a gated MLP's 1000 x 771 projection over 2051 split 2 ways 25.5 us
  // against 12.4 unsplit, priced 13.7 and 16.0.
  double atomicTail = 0;
  if (const auto atomics = cost.seconds.find("atomics"); tile.splits > 1 && atomics != cost.seconds.end())
    atomicTail = atomics->second * static_cast<double>(std::min<int64_t>(units, t.smCount)) / static_cast<double>(units);
  if (atomicTail > 0) cost.seconds["atomics, last wave"] = atomicTail;
  cost.predicted = streamed + epilogueSeconds + atomicTail + t.tileFillSeconds + fixed;
}

// Cuts `tile` positions of a GEMM dimension over its axes (outermost first),
// innermost first: an axis shorter than what is left is taken whole.
void cutAlong(const std::vector<Axis>& axes, int64_t tile, std::map<std::string, int64_t>& tiles) {
  int64_t left = tile;
  for (size_t i = axes.size(); i-- > 0;) {
    const int64_t size = axes[i].size;
    tiles[axes[i].name] = std::min(left, size);
    left = left > size ? ceilDiv(left, size) : 1;
  }
}

// The k axes `splits` units of a tile share, each with the positions a unit
// takes (the library cuts the k-steps of the collapsed k dimension; an axis
// a unit takes whole is left out); empty where the kernel's outputs are not
// plain sums over those axes (KernelShape::splitAxes; the stream axis, a
// GEMM's only k axis where the rows have no batch axis, where
// outputsSumOverStream: asked only of a split that cuts it), or splits is 1.
std::map<std::string, int64_t> splitTilesOf(const Graph& graph, const PlannedKernel& kernel, const TensorCoreGemm& gemm,
                                            int splits) {
  std::map<std::string, int64_t> cut, out;
  if (splits <= 1) return out;
  cutAlong(gemm.k, ceilDiv(ceilDiv(gemm.K, gemm.BK), splits) * gemm.BK, cut);
  const auto& splittable = kernel.shape.splitAxes;
  for (const Axis& a : gemm.k) {
    if (cut.at(a.name) >= a.size) continue;
    if (std::find(splittable.begin(), splittable.end(), a.name) == splittable.end() &&
        (a.name != kernel.shape.streamAxis || !outputsSumOverStream(graph, kernel)))
      return {};
    out[a.name] = cut.at(a.name);
  }
  return out;
}

// The elementwise operations the epilogue makes at each output point: the
// kernel's elementwise nodes over the contraction's output points (a
// prologue's have a k axis), each expression counted once, as the CUDA writer
// defines it once (per-stream copies the recompute pass made of one chain
// land in one epilogue).
double epilogueOperations(const Graph& graph, const PlannedKernel& kernel, const TensorCoreGemm& gemm) {
  const Node& c = graph.node(gemm.contraction);
  using Expression = std::tuple<Op, int, int, int, int, double, std::vector<NodeId>>;
  std::map<Expression, NodeId> first;  // each expression's first node
  std::map<NodeId, NodeId> same;       // a later node -> the first of its expression
  for (NodeId id : kernel.kernel.nodes) {
    const Node& n = graph.node(id);
    if (n.op != Op::Unary && n.op != Op::Binary && n.op != Op::Select && n.op != Op::Compare && n.op != Op::Cast)
      continue;
    if (std::any_of(c.axes.begin(), c.axes.end(), [&](const std::string& a) { return n.type.has(a); })) continue;
    std::vector<NodeId> operands;
    for (NodeId o : n.operands) operands.push_back(same.count(o) ? same.at(o) : o);
    const Expression e{n.op,    static_cast<int>(n.unary), static_cast<int>(n.binary), static_cast<int>(n.compare),
                       static_cast<int>(n.type.dtype), n.value, std::move(operands)};
    if (auto [it, added] = first.try_emplace(e, id); !added) same[id] = it->second;
  }
  return static_cast<double>(first.size());
}

}  // namespace

Partition gemmTilePartition(const Graph& graph, const PlannedKernel& kernel, const TensorCoreGemm& gemm,
                            const GemmTile& tile) {
  Partition p = kernel.partition;
  for (const Axis& a : gemm.batch) p.groupTiles[a.name] = 1;
  cutAlong(gemm.m, tile.bm, p.groupTiles);
  cutAlong(gemm.n, tile.bn, p.groupTiles);
  for (const Axis& a : kernel.shape.groupAxes)
    if (a.size == 1) p.groupTiles[a.name] = 1;
  if (!kernel.shape.streamAxis.empty()) p.streamChunk = std::min<int64_t>(gemm.BK, kernel.shape.streamExtent);
  p.splitTiles = splitTilesOf(graph, kernel, gemm, tile.splits);
  return p;
}

KernelCost priceGemmTile(const Graph& graph, const PlannedKernel& kernel, const TensorCoreGemm& gemm,
                         const GemmTile& tile, const Target& target, const CostOptions& options) {
  KernelCost cost = evaluate(graph, kernel.kernel, kernel.shape, gemmTilePartition(graph, kernel, gemm, tile), target, options);
  // The library's tiles fit by construction (libraryTiles): evaluate's
  // registers assume 256 threads a block, where the library's consumers hold
  // up to 128 accumulators each (a 256 x 128 tile over two warpgroups).
  cost.fits = true;
  addTilePipeline(cost, gemm, tile, target, epilogueOperations(graph, kernel, gemm),
                  options.storageBytes > 0 ? options.storageBytes : 4);
  return cost;
}

// A split along the stream (outputsSumOverStream: the only k axis of rows
// without a batch axis, a linear layer's weight gradient over its tokens) is
// taken only where it is priced at most 2/3 of the best tile without one, as
// partition_search takes a CUDA-core stream's split: it is what fills the
// SMs where the tiles are few (N=65536 rows, 128 x 64 outputs: 2 tiles, 409
// us priced unsplit), and near a tie the atomics it adds are the likelier
// price to be wrong.
constexpr double kStreamSplitGain = 2.0 / 3.0;

std::string gemmTileName(const GemmTile& tile) {
  return fmt::format("{}x{}{}", tile.bm, tile.bn, tile.pingPong ? "p" : tile.cluster > 1 ? fmt::format("c{}", tile.cluster) : "");
}

std::string gemmTileOverride() {
  const char* value = std::getenv("LLMC_GEMM_TILE");
  if (!value || !*value) return "";
  if (!std::regex_match(value, std::regex("[0-9]{1,4}x[0-9]{1,4}(p|c2)?")))
    throw TargetError(fmt::format("LLMC_GEMM_TILE='{}': expected BMxBN, BMxBNp (ping-pong consumers) or BMxBNc2 "
                                  "(clusters of two blocks sharing B), such as 128x256",
                                  value));
  return value;
}

void chooseGemmTile(const Graph& graph, PlannedKernel& kernel, const TensorCoreGemm& gemm, const Target& target,
                    const CostOptions& options) {
  const int64_t kSteps = ceilDiv(gemm.K, gemm.BK);
  struct Choice {
    GemmTile tile;
    KernelCost cost;
  };
  std::optional<Choice> plain, alongStream;  // the cheapest without a split along the stream, and with one
  std::vector<GemmTile> tiles = libraryTiles(gemm);
  if (const std::string forced = gemmTileOverride(); !forced.empty()) {
    std::vector<GemmTile> named;
    for (const GemmTile& t : tiles)
      if (gemmTileName(t) == forced) named.push_back(t);
    if (!named.empty()) tiles = std::move(named);
  }
  if (!target.tileClusters && !(tiles.size() == 1 && tiles[0].cluster > 1))
    std::erase_if(tiles, [](const GemmTile& t) { return t.cluster > 1; });
  for (GemmTile tile : tiles)
    for (tile.splits = 1; tile.splits <= maxSplits(gemm); ++tile.splits) {
      // Splits that leave some unit without k-steps run as fewer; a split
      // needs outputs that are plain sums over what it cuts.
      const std::map<std::string, int64_t> cut = splitTilesOf(graph, kernel, gemm, tile.splits);
      if (tile.splits > 1 && (ceilDiv(kSteps, tile.splits) * (tile.splits - 1) >= kSteps || cut.empty() || tile.cluster > 1))
        continue;
      std::optional<Choice>& best = cut.count(kernel.shape.streamAxis) ? alongStream : plain;
      KernelCost cost = priceGemmTile(graph, kernel, gemm, tile, target, options);
      if (best && cost.predicted >= best->cost.predicted * (1 - 1e-9)) continue;
      best = Choice{tile, std::move(cost)};
    }
  std::optional<Choice>& chosen =
      alongStream && (!plain || alongStream->cost.predicted <= kStreamSplitGain * plain->cost.predicted) ? alongStream : plain;
  if (!chosen) return;
  kernel.gemmTile = chosen->tile;
  kernel.partition = gemmTilePartition(graph, kernel, gemm, chosen->tile);
  kernel.cost = std::move(chosen->cost);
}

}  // namespace llmc
