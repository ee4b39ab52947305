#include "lowering/lowering.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "codegen/emit_cuda.h"
#include "codegen/launch_list.h"
#include "lowering/gemm_tiles.h"
#include "lowering/unfuse.h"

namespace llmc {

namespace {

// What the emitted module made of each planned kernel: whether its tile
// launch runs on the tensor cores, which engine, and its helper launches.
struct LaunchesOfKernel {
  bool tile = false, tensorCores = false;
  const TensorCoreGemm* gemm = nullptr;      // the tile launch's GEMM, if it runs as one
  const TensorCoreStream* stream = nullptr;  // its tensor-core stream, if it runs as one
  std::string engine;
  double helperSeconds = 0;
  int helpers = 0;
};

std::map<int, LaunchesOfKernel> launchesByKernel(const CudaModule& module) {
  std::map<int, LaunchesOfKernel> out;
  for (const KernelLaunch& l : module.launches) {
    if (l.kernel < 0) continue;
    LaunchesOfKernel& k = out[l.kernel];
    if (l.role == "tile") {
      k.tile = true;
      k.tensorCores = !l.instructions.tensorCores.empty();
      k.gemm = l.gemm ? &*l.gemm : nullptr;
      k.stream = l.stream ? &*l.stream : nullptr;
      k.engine = l.gemm                           ? (l.gemm->library == TensorCoreGemm::Library::Sm90 ? "tensor-core GEMM (sm90)"
                                                                                                : "tensor-core GEMM (sm80)")
                 : k.tensorCores                  ? "tensor-core stream"
                 : l.instructions.kind == InstructionChoice::Kind::Elementwise ? "CUDA cores (elementwise)"
                                                                               : "CUDA cores";
    } else if (l.predictedSeconds > 0 && l.role != "clear") {  // (the cost model prices clears itself)
      k.helperSeconds += l.predictedSeconds;
      ++k.helpers;
    }
    if (l.role == "scatter" && k.engine.empty()) k.engine = "CUDA cores (scatter-add)";
  }
  return out;
}

// A tensor-core stream's blocks step through their positions one step after
// another, each step waiting for its products before its elementwise work
// (the running max, exp, the rescale) and for the next stage: a step takes
// the target's tensorStreamStepSeconds for each product it accumulates
// (the elementwise work that makes its weights, measured to grow with them)
// beside its share of the tensor work on one SM. The block that runs the
// most steps (KernelShape::longestSteps: a causal mask's last rows all of
// them, a window's its width's) is the shortest the launch can take; the
// blocks resident on the SMs (the stream's residentBlocks), stepping side by
// side, bound it from the other end; and the first tiles of every block,
// loaded at once, take the target's tileFillSeconds before any step. Fitted
// on the H200 (2026-12-02, benchmarks/diagrams): RoPE attention's forward
// (one product) 16 steps in 19.5 us, its dK/dV (two) in 37; a window of 256
// keys (5 steps) 11.9 and 17.4; GPT-2's full grids are bound by their work.
void addStreamStepLatency(KernelCost& cost, const KernelShape& shape, const Partition& p, const TensorCoreStream& stream,
                          const Target& t) {
  const auto work = cost.work.find("tensor_bf16");
  if (t.tensorStreamStepSeconds <= 0 || work == cost.work.end() || p.streamChunk <= 0 || cost.blocks <= 0) return;
  const auto split = p.splitTiles.find(shape.streamAxis);
  const int64_t share = split == p.splitTiles.end() ? shape.streamExtent : std::min(split->second, shape.streamExtent);
  double steps = std::ceil(static_cast<double>(share) / static_cast<double>(p.streamChunk));
  const double blockSteps = static_cast<double>(cost.blocks) * steps * shape.stepsRun;
  if (blockSteps <= 0) return;
  if (shape.longestSteps > 0) steps = std::min(steps, static_cast<double>(shape.longestSteps));
  const double perSM = t.unit("tensor_bf16").warpMmaAttainable / t.smCount;
  const double products = static_cast<double>(std::max<size_t>(1, stream.products.size()));
  const double step = t.tensorStreamStepSeconds * products + work->second / blockSteps / perSM;
  const double resident = std::max(1, stream.residentBlocks);  // as the writer launches it
  const double stepped = t.tileFillSeconds + std::max(steps * step, blockSteps * step / (t.smCount * resident));
  cost.seconds["steps"] = stepped;
  const double fixed = cost.seconds["sync"] + cost.seconds["launch"];
  if (stepped > cost.predicted - fixed) {
    cost.predicted = stepped + fixed;
    cost.bottleneck = "steps";
  }
}


// A kernel that runs as a tensor-core stream, priced with the stream's tiles:
// kStreamRowsPerBlock rows a block, one position of each batch axis,
// kStreamPositionsPerStep positions a step (the partition search's own tiles
// need not be the stream's). Where its outputs are plain sums over the
// stream (attention's dq, dk and dv) and its blocks leave SMs idle (few
// rows: multi-query attention's 40 blocks of queries), the stream may be
// shared out across blocks in whole steps, halving from the whole while the
// blocks fit the SMs at once: the cheapest share is kept. Not on a grid that
// fills the SMs: there the steps priced for the longest block (all of them)
// are not what a causal or windowed block runs, and sharing them out ran
// slower on the H200 (2026-12-02: a window's dk 18 -> 31 us, RoPE's
// causal dk 30 -> 27 but dq 22 -> 24).
void priceTensorCoreStream(const Graph& graph, PlannedKernel& kernel, const TensorCoreStream& stream,
                           const Target& target, const CostOptions& options) {
  Partition p = kernel.partition;
  for (const Axis& a : kernel.shape.groupAxes)
    if (a.name == stream.rows.name) p.groupTiles[a.name] = std::min<int64_t>(kStreamRowsPerBlock, a.size);
    else if (std::any_of(stream.batch.begin(), stream.batch.end(), [&](const Axis& b) { return b.name == a.name; }))
      p.groupTiles[a.name] = 1;
  const bool streamed = kernel.shape.streamAxis == stream.stream.name;
  if (streamed) p.streamChunk = std::min<int64_t>(kStreamPositionsPerStep, kernel.shape.streamExtent);
  p.splitTiles.clear();
  std::vector<int64_t> shares = {0};
  const int64_t slots = static_cast<int64_t>(target.smCount) * std::max(1, stream.residentBlocks);
  if (streamed && stream.share == 0 && stream.grid < target.smCount && outputsSumOverStream(graph, kernel)) {
    const int64_t steps = (kernel.shape.streamExtent + kStreamPositionsPerStep - 1) / kStreamPositionsPerStep;
    for (int64_t splits = 2; splits <= steps && stream.grid * splits <= slots; splits *= 2)
      shares.push_back((steps + splits - 1) / splits * kStreamPositionsPerStep);
  }
  for (int64_t share : shares) {
    Partition trial = p;
    if (share > 0) trial.splitTiles[stream.stream.name] = share;
    KernelCost cost = evaluate(graph, kernel.kernel, kernel.shape, trial, target, options);
    addStreamStepLatency(cost, kernel.shape, trial, stream, target);
    if (share == 0 || cost.predicted < kernel.cost.predicted) {
      kernel.partition = trial;
      kernel.cost = cost;
    }
  }
}

// A kernel the module makes no launch for costs nothing: a concatenation
// whose parts their own launches write where it has them
// (codegen/concat_parts.h), a kernel whose every value is stored by others,
// a kernel whose values another kernel's launch makes alike (launch_list.cpp,
// mergeTwins).
KernelCost withoutLaunch(const KernelCost& planned) {
  KernelCost none;
  none.levels = planned.levels;
  for (LevelCost& l : none.levels) l.memoryBytes = l.movedBytes = l.seconds = 0;
  none.bottleneck = "no launch";
  none.engine = "none (no launch)";
  none.launched = false;
  return none;
}

// Prices every kernel on the engine the module runs it on: a kernel planned
// for the tensor cores whose launch stays on the CUDA cores is partitioned
// again without them, one that runs as a GEMM takes the library's cheapest
// tile, one that runs as a tensor-core stream is priced with the stream's
// tiles (gemm_tiles.h); helper launches add their time.
void priceAsLowered(std::vector<PlannedKernel>& kernels, const CudaModule& module, const CostOptions& cost,
                    PartitionMemo& memo) {
  const Graph& graph = memo.graph();
  const Target& target = memo.target();
  const std::map<int, LaunchesOfKernel> lowered = launchesByKernel(module);
  for (PlannedKernel& pk : kernels) {
    auto it = lowered.find(pk.kernel.id);
    if (it == lowered.end()) {
      pk.cost = withoutLaunch(pk.cost);
      continue;
    }
    const LaunchesOfKernel& l = it->second;
    if (l.tile && !l.tensorCores && pricedOnTensorCores(pk.cost)) {
      CostOptions cudaCores = cost;
      cudaCores.tensorCores = false;
      pk.shape = kernelShape(graph, pk.kernel, target, cudaCores);
      pk.partition = memo.search(pk.kernel, pk.shape, cudaCores);
      pk.cost = evaluate(graph, pk.kernel, pk.shape, pk.partition, target, cudaCores);
    }
    if (l.gemm) chooseGemmTile(graph, pk, *l.gemm, target, cost);
    if (l.stream) priceTensorCoreStream(graph, pk, *l.stream, target, cost);
    pk.cost.engine = l.engine;
    pk.cost.helperLaunches = l.helpers;
    if (l.helperSeconds > 0) {
      pk.cost.seconds["helpers"] = l.helperSeconds;
      pk.cost.predicted += l.helperSeconds;
    }
  }
}

}  // namespace

// Whether every output of the kernel is a plain sum over the stream axis:
// what blocks sharing the stream out can add atomically (as launch_list.cpp's
// split-K asks).
bool outputsSumOverStream(const Graph& graph, const PlannedKernel& kernel) {
  const std::string& axis = kernel.shape.streamAxis;
  if (axis.empty()) return false;
  const std::set<NodeId> members(kernel.kernel.nodes.begin(), kernel.kernel.nodes.end());
  const StreamAnalysis sums = analyzeStream(graph, members, axis);
  if (!sums.streamable || !sums.tail.empty()) return false;
  for (const AccumulatorSlot& slot : sums.slots)
    if (slot.kind != AccumulatorSlot::Kind::Sum || slot.rescaledBy >= 0) return false;
  return std::all_of(kernel.kernel.outputs.begin(), kernel.kernel.outputs.end(), [&](NodeId o) {
    return std::count(sums.aggregates.begin(), sums.aggregates.end(), o) > 0;
  });
}

void recordLaunches(std::vector<PlannedKernel>& kernels, const CudaModule& module) {
  std::map<int, const KernelLaunch*> tileOf;
  for (const KernelLaunch& l : module.launches)
    if (l.kernel >= 0 && l.role == "tile") tileOf[l.kernel] = &l;
  for (PlannedKernel& pk : kernels) {
    auto it = tileOf.find(pk.kernel.id);
    if (it == tileOf.end()) continue;
    const KernelLaunch& l = *it->second;
    pk.cost.launchedBlocks = l.grid[0] * l.grid[1] * l.grid[2];
    pk.cost.launchedSmemBytes = l.instructions.tensorCores.empty() ? -1 : l.dynamicSmemBytes;
  }
}

bool pricedOnTensorCores(const KernelCost& cost) {
  return std::any_of(cost.work.begin(), cost.work.end(),
                     [](const auto& w) { return w.first.rfind("tensor", 0) == 0 && w.second > 0; });
}

EmitOptions emitOptionsFor(const CostOptions& cost) {
  EmitOptions e;
  e.storage = cost.storageBytes == 4 ? StorageType::F32 : StorageType::BF16;
  return e;
}

void chooseEngines(const Graph& graph, std::vector<PlannedKernel>& kernels, const Target& target,
                   const CostOptions& cost, const EmitOptions& emit) {
  PartitionMemo memo(graph, target);
  chooseEngines(kernels, cost, emit, memo);
}

void chooseEngines(std::vector<PlannedKernel>& kernels, const CostOptions& cost, const EmitOptions& emit,
                   PartitionMemo& memo) {
  const CudaModule module = emitCuda(memo.graph(), kernels, memo.target(), emit);
  priceAsLowered(kernels, module, cost, memo);
}

CostOptions pricedAsWritten(const Graph& graph, CostOptions cost, const EmitOptions& emit) {
  if (emit.storage == StorageType::F32) return cost;
  cost.f32Stored = namedF32Values(graph, emit);
  // What scatter-adds accumulate into: f32 atomics, read as f32 after.
  for (const Node& n : graph.nodes)
    if (n.op == Op::ScatterAdd) cost.f32Stored.insert(n.id);
  return cost;
}

std::vector<PlannedKernel> lowerKernels(const Graph& graph, const Target& target, const CostOptions& options,
                                        const EmitOptions& emit) {
  const CostOptions cost = pricedAsWritten(graph, options, emit);
  PartitionMemo memo(graph, target);
  std::vector<PlannedKernel> kernels = planKernels(cost, {}, memo);
  chooseEngines(kernels, cost, emit, memo);
  return unfuseOffTensorCores(std::move(kernels), cost, emit, memo);
}

}  // namespace llmc
