// The partition stage: each kernel fusion made (fusion.h) partitioned for the
// target by the cost model's search (cost_model.h, searchPartition) and
// priced under that partition, as if every contraction ran on the tensor
// cores where the target has them; the lowering stage (lowering/lowering.h)
// prices the engines it chooses.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planning/cost_model.h"
#include "planning/fusion.h"
#include "planning/partition_memo.h"
#include "planning/scan_layout.h"

namespace llmc {

// The tile a kernel lowered to a tensor-core GEMM runs with (the tile
// library's BM x BN, and how many units share each tile's k-steps), chosen
// and priced by the lowering stage (lowering/gemm_tiles.h); 0: not chosen,
// the writer takes the library's tile nearest the partition's.
struct GemmTile {
  int bm = 0, bn = 0, splits = 0;
  // sm_90a: the consumer warpgroups take whole tiles in turn, one's epilogue
  // beside the other's k-steps (ping-pong), rather than splitting each tile's rows.
  bool pingPong = false;
  // sm_90a: blocks of a cluster over consecutive row tiles, which read their
  // shared B tile from L2 once between them (TMA multicast); 1: no cluster.
  int cluster = 1;
  bool chosen() const { return bm > 0 && bn > 0 && splits > 0; }
};

struct PlannedKernel {
  Kernel kernel;
  KernelShape shape;
  Partition partition;
  KernelCost cost;
  GemmTile gemmTile;
  // A kernel whose anchor is a scan runs as this layout (no partition search).
  std::optional<ScanLayout> scan;
};

// Partitions and prices `kernels` (formKernels' result). Kernels that compute
// the same thing (the layers of a model) are searched once; with a memo,
// once across every call given it (the trials of the unfuse stage).
std::vector<PlannedKernel> partitionKernels(const Graph& graph, std::vector<Kernel> kernels, const Target& target,
                                            const CostOptions& options);
std::vector<PlannedKernel> partitionKernels(std::vector<Kernel> kernels, const CostOptions& options,
                                            PartitionMemo& memo);

// Fusion then partition: formKernels and partitionKernels.
std::vector<PlannedKernel> planKernels(const Graph& graph, const Target& target, const CostOptions& options,
                                       const FusionOptions& fusion = {});
std::vector<PlannedKernel> planKernels(const CostOptions& options, const FusionOptions& fusion, PartitionMemo& memo);

// A kernel's partition in one line, as the performance report prints it: the
// group tiles (axis/tile), then the stream's chunk if any, then the axes
// shared out across blocks (split/positions a block).
std::string partitionText(const Graph& graph, const PlannedKernel& kernel);

// Where a kernel comes from: the box it is anchored on (its first
// contraction, reduction, gather or scatter-add, else its first output), that
// box's composite call path ("block/attention/softmax", loop iterations as
// "i=3"; empty at the diagram's top), its pass (forward, or backward where
// autodiff made it) and its file:line:col.
struct KernelSource {
  std::vector<std::string> calls;  // the composite calls, outermost first
  std::string path, pass, location;  // path: the calls joined by '/'
};
KernelSource kernelSource(const Graph& graph, const PlannedKernel& kernel);

}  // namespace llmc
