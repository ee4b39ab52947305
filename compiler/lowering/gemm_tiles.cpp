#include "lowering/gemm_tiles.h"

#include <algorithm>

namespace llmc {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

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
// plain sums over those axes (KernelShape::splitAxes), or splits is 1.
std::map<std::string, int64_t> splitTilesOf(const PlannedKernel& kernel, const TensorCoreGemm& gemm, int splits) {
  std::map<std::string, int64_t> cut, out;
  if (splits <= 1) return out;
  cutAlong(gemm.k, ceilDiv(ceilDiv(gemm.K, gemm.BK), splits) * gemm.BK, cut);
  const auto& splittable = kernel.shape.splitAxes;
  for (const Axis& a : gemm.k) {
    if (cut.at(a.name) >= a.size) continue;
    if (std::find(splittable.begin(), splittable.end(), a.name) == splittable.end()) return {};
    out[a.name] = cut.at(a.name);
  }
  return out;
}

}  // namespace

Partition gemmTilePartition(const PlannedKernel& kernel, const TensorCoreGemm& gemm, const GemmTile& tile) {
  Partition p = kernel.partition;
  for (const Axis& a : gemm.batch) p.groupTiles[a.name] = 1;
  cutAlong(gemm.m, tile.bm, p.groupTiles);
  cutAlong(gemm.n, tile.bn, p.groupTiles);
  for (const Axis& a : kernel.shape.groupAxes)
    if (a.size == 1) p.groupTiles[a.name] = 1;
  if (!kernel.shape.streamAxis.empty()) p.streamChunk = std::min<int64_t>(gemm.BK, kernel.shape.streamExtent);
  p.splitTiles = splitTilesOf(kernel, gemm, tile.splits);
  return p;
}

void chooseGemmTile(const Graph& graph, PlannedKernel& kernel, const TensorCoreGemm& gemm, const Target& target,
                    const CostOptions& options) {
  const int64_t kSteps = ceilDiv(gemm.K, gemm.BK);
  bool found = false;
  for (GemmTile tile : libraryTiles(gemm))
    for (tile.splits = 1; tile.splits <= maxSplits(gemm); ++tile.splits) {
      // Splits that leave some unit without k-steps run as fewer; a split
      // needs outputs that are plain sums over what it cuts.
      if (tile.splits > 1 && (ceilDiv(kSteps, tile.splits) * (tile.splits - 1) >= kSteps ||
                              splitTilesOf(kernel, gemm, tile.splits).empty()))
        continue;
      const Partition p = gemmTilePartition(kernel, gemm, tile);
      KernelCost cost = evaluate(graph, kernel.kernel, kernel.shape, p, target, options);
      if (found && cost.predicted >= kernel.cost.predicted * (1 - 1e-9)) continue;
      found = true;
      kernel.gemmTile = tile;
      kernel.partition = p;
      kernel.cost = std::move(cost);
    }
}

}  // namespace llmc
