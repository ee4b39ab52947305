#include "lowering/lowering.h"

#include <algorithm>
#include <set>
#include <map>

namespace llmc {

namespace {

bool pricedOnTensorCores(const KernelCost& cost) {
  return std::any_of(cost.work.begin(), cost.work.end(),
                     [](const auto& w) { return w.first.rfind("tensor", 0) == 0 && w.second > 0; });
}

// What the emitted module made of each planned kernel: whether its tile
// launch runs on the tensor cores, which engine, and its helper launches.
struct LaunchesOfKernel {
  bool tile = false, tensorCores = false;
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
      k.engine = l.gemm                           ? (l.gemm->library == TensorCoreGemm::Library::Sm90 ? "tensor-core GEMM (sm90)"
                                                                                                : "tensor-core GEMM (sm80)")
                 : k.tensorCores                  ? "tensor-core stream"
                 : l.instructions.kind == InstructionChoice::Kind::Elementwise ? "CUDA cores (elementwise)"
                                                                               : "CUDA cores";
    } else if (l.predictedSeconds > 0) {
      k.helperSeconds += l.predictedSeconds;
      ++k.helpers;
    }
  }
  return out;
}

// Prices every kernel on the engine the module runs it on: a kernel planned
// for the tensor cores whose launch stays on the CUDA cores is partitioned
// again without them; helper launches add their time.
void priceAsLowered(const Graph& graph, std::vector<PlannedKernel>& kernels, const CudaModule& module,
                    const Target& target, const CostOptions& cost) {
  const std::map<int, LaunchesOfKernel> lowered = launchesByKernel(module);
  for (PlannedKernel& pk : kernels) {
    auto it = lowered.find(pk.kernel.id);
    if (it == lowered.end()) continue;
    const LaunchesOfKernel& l = it->second;
    if (l.tile && !l.tensorCores && pricedOnTensorCores(pk.cost)) {
      CostOptions cudaCores = cost;
      cudaCores.tensorCores = false;
      pk.shape = kernelShape(graph, pk.kernel, target, cudaCores);
      pk.partition = searchPartition(graph, pk.kernel, pk.shape, target, cudaCores);
      pk.cost = evaluate(graph, pk.kernel, pk.shape, pk.partition, target, cudaCores);
    }
    pk.cost.engine = l.engine;
    pk.cost.helperLaunches = l.helpers;
    if (l.helperSeconds > 0) {
      pk.cost.seconds["helpers"] = l.helperSeconds;
      pk.cost.predicted += l.helperSeconds;
    }
  }
}

double totalSeconds(const std::vector<PlannedKernel>& kernels) {
  double total = 0;
  for (const PlannedKernel& k : kernels) total += k.cost.predicted;
  return total;
}

// The reductions anchoring streams that hold a contraction but run on the
// CUDA cores (a chain of contractions; a normalisation's statistics streamed
// with the matmul it feeds): fusion's candidates to leave unstreamed, their
// contractions then tensor-core GEMMs of their own.
std::set<NodeId> streamsOffTensorCores(const Graph& graph, const std::vector<PlannedKernel>& kernels) {
  std::set<NodeId> anchors;
  for (const PlannedKernel& pk : kernels) {
    const Kernel& k = pk.kernel;
    if (k.streamAxis.empty() || pricedOnTensorCores(pk.cost)) continue;
    int contractions = 0;
    for (NodeId id : k.nodes) contractions += graph.node(id).op == Op::Contract;
    if (contractions == 0) continue;
    for (NodeId id : k.nodes) {
      const Node& n = graph.node(id);
      if ((n.op == Op::Contract || n.op == Op::Reduce) &&
          std::find(n.axes.begin(), n.axes.end(), k.streamAxis) != n.axes.end())
        anchors.insert(id);
    }
  }
  return anchors;
}

// The operands of contractions in kernels on the CUDA cores that the kernel
// computes itself (a prologue: a ReLU remade for a weight gradient): fusion's
// candidates to store instead, so that the contraction reads them from GMEM.
std::set<NodeId> prologuesOffTensorCores(const Graph& graph, const std::vector<PlannedKernel>& kernels) {
  std::set<NodeId> operands;
  for (const PlannedKernel& pk : kernels) {
    if (pricedOnTensorCores(pk.cost) || pk.cost.engine.rfind("CUDA cores", 0) != 0) continue;
    const std::set<NodeId> members(pk.kernel.nodes.begin(), pk.kernel.nodes.end());
    for (NodeId id : pk.kernel.nodes) {
      const Node& n = graph.node(id);
      if (n.op != Op::Contract || !isFloat(n.type.dtype)) continue;
      for (NodeId o : n.operands) {
        while (isView(graph.node(o)) && members.count(o)) o = graph.node(o).operands[0];
        if (members.count(o) && !isAnchor(graph.node(o))) operands.insert(o);
      }
    }
  }
  return operands;
}

}  // namespace

EmitOptions emitOptionsFor(const CostOptions& cost) {
  EmitOptions e;
  e.storage = cost.storageBytes == 4 ? StorageType::F32 : StorageType::BF16;
  return e;
}

std::vector<PlannedKernel> lowerKernels(const Graph& graph, const Target& target, const CostOptions& cost,
                                        const EmitOptions& emit) {
  FusionOptions fusion;
  std::vector<PlannedKernel> kernels = planKernels(graph, target, cost, fusion);
  priceAsLowered(graph, kernels, emitCuda(graph, kernels, target, emit), target, cost);
  // Each round leaves more streams unfused; a few rounds reach every chain.
  for (int round = 0; round < 4; ++round) {
    const std::set<NodeId> streams = streamsOffTensorCores(graph, kernels);
    const std::set<NodeId> prologues = prologuesOffTensorCores(graph, kernels);
    FusionOptions trial = fusion;
    const size_t before = trial.unstreamed.size() + trial.stored.size();
    trial.unstreamed.insert(streams.begin(), streams.end());
    trial.stored.insert(prologues.begin(), prologues.end());
    if (trial.unstreamed.size() + trial.stored.size() == before) break;
    std::vector<PlannedKernel> separate = planKernels(graph, target, cost, trial);
    priceAsLowered(graph, separate, emitCuda(graph, separate, target, emit), target, cost);
    if (totalSeconds(separate) >= totalSeconds(kernels)) break;
    fusion = std::move(trial);
    kernels = std::move(separate);
  }
  return kernels;
}

}  // namespace llmc
