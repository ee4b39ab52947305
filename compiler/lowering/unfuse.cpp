#include "lowering/unfuse.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "lowering/lowering.h"
#include "planning/row_products.h"

namespace llmc {

namespace {

double totalSeconds(const std::vector<PlannedKernel>& kernels) {
  double total = 0;
  for (const PlannedKernel& k : kernels) total += k.cost.predicted;
  return total;
}

// The reductions over its stream axis of each kernel that `candidate` takes
// and that streams a contraction: what FusionOptions::unstreamed names.
std::set<NodeId> streamAnchors(const Graph& graph, const std::vector<PlannedKernel>& kernels,
                                const std::function<bool(const PlannedKernel&)>& candidate) {
  std::set<NodeId> anchors;
  for (const PlannedKernel& pk : kernels) {
    const Kernel& k = pk.kernel;
    if (k.streamAxis.empty() || !candidate(pk)) continue;
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

// The reductions anchoring streams that hold a contraction but run on the
// CUDA cores (a chain of contractions; a normalisation's statistics streamed
// with the matmul it feeds): fusion's candidates to leave unstreamed, their
// contractions then tensor-core GEMMs of their own.
std::set<NodeId> streamsOffTensorCores(const Graph& graph, const std::vector<PlannedKernel>& kernels) {
  return streamAnchors(graph, kernels, [](const PlannedKernel& pk) { return !pricedOnTensorCores(pk.cost); });
}

// The reductions anchoring tensor-core streams bound by their blocks' steps
// (a small grid stepping one step at a time: multi-query attention's 40
// blocks over 1000 keys): where the scores are few, their GEMMs and a
// softmax of their own may take less.
std::set<NodeId> streamsBoundBySteps(const Graph& graph, const std::vector<PlannedKernel>& kernels) {
  return streamAnchors(graph, kernels, [](const PlannedKernel& pk) {
    return pricedOnTensorCores(pk.cost) && pk.cost.bottleneck == "steps";
  });
}

// The reductions of kernels that leave SMs without a block or wait on the
// memory's latency, where what the kernel makes from the reduction keeps its
// reduced axes from being shared out over the grid: held whole for what reads
// the reduction along them (a column's mean subtracted from its rows: a block
// a tile of columns, each thread walking every row), or streamed whole by each
// block for a value it makes from the finished sum (a channel's scale from its
// mean: a block a channel, each walking all the images). Fusion's candidates
// to keep apart (FusionOptions::apart): the statistic is then a sum the blocks
// share out, adding their parts, and its readers a kernel of their own.
// `heldSeconds`: the time those kernels take.
std::set<NodeId> heldAxesLeavingSMsIdle(const Graph& graph, const std::vector<PlannedKernel>& kernels,
                                         int smCount, double& heldSeconds) {
  std::set<NodeId> reductions;
  heldSeconds = 0;
  for (const PlannedKernel& pk : kernels) {
    const Kernel& k = pk.kernel;
    if (pricedOnTensorCores(pk.cost)) continue;
    if (pk.cost.blocks >= smCount && pk.cost.bottleneck != "latency") continue;
    // A stream that holds a contraction is the trials' below (unstreamed,
    // its contraction a GEMM of its own), which start from this one's plan.
    const bool streamed = !k.streamAxis.empty();
    if (streamed && std::any_of(k.nodes.begin(), k.nodes.end(), [&](NodeId m) { return graph.node(m).op == Op::Contract; }))
      continue;
    bool holds = false;
    for (NodeId id : k.nodes) {
      const Node& r = graph.node(id);
      if (r.op != Op::Reduce) continue;
      const bool readAlong = std::any_of(k.outputs.begin(), k.outputs.end(), [&](NodeId o) {
        return std::any_of(r.axes.begin(), r.axes.end(), [&](const std::string& x) { return graph.node(o).type.has(x); });
      });
      const bool readInKernel = std::any_of(k.nodes.begin(), k.nodes.end(), [&](NodeId m) {
        const std::vector<NodeId>& operands = graph.node(m).operands;
        return m != id && std::find(operands.begin(), operands.end(), id) != operands.end();
      });
      if (streamed ? readInKernel : readAlong) reductions.insert(id), holds = true;
    }
    if (holds) heldSeconds += pk.cost.predicted;
  }
  return reductions;
}

// The reductions anchoring tensor-core streams whose blocks take a quarter
// of the SMs or fewer.
std::set<NodeId> streamsOnFewBlocks(const Graph& graph, const std::vector<PlannedKernel>& kernels, int smCount) {
  return streamAnchors(graph, kernels, [&](const PlannedKernel& pk) {
    return pricedOnTensorCores(pk.cost) && pk.cost.blocks * 4 <= smCount;
  });
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

// Whether two plans fuse the graph into the same kernels (the same nodes,
// inputs, outputs and stream axes, in any order): then their partitions and
// lowerings are the same too, and a trial that fuses as the plan it would
// replace needs no lowering of its own.
bool sameKernels(const std::vector<PlannedKernel>& a, const std::vector<PlannedKernel>& b) {
  if (a.size() != b.size()) return false;
  auto kernels = [](const std::vector<PlannedKernel>& plan) {
    std::vector<std::tuple<std::vector<NodeId>, std::vector<NodeId>, std::vector<NodeId>, std::string>> out;
    for (const PlannedKernel& pk : plan)
      out.emplace_back(pk.kernel.nodes, pk.kernel.inputs, pk.kernel.outputs, pk.kernel.streamAxis);
    std::sort(out.begin(), out.end());
    return out;
  };
  return kernels(a) == kernels(b);
}

}  // namespace

// Plans the kernels fused with `trial`, then leaves unfused, as well, what
// the new kernels still keep off the tensor cores (a chain unstreamed leaves
// its first contraction streamed with the mask it sums against), a few
// rounds, before the plan is compared with the one it would replace.
std::vector<PlannedKernel> planUnfused(FusionOptions& trial, const CostOptions& cost, const EmitOptions& emit,
                                       PartitionMemo& memo, const std::vector<PlannedKernel>& current) {
  const Graph& graph = memo.graph();
  std::vector<PlannedKernel> kernels = planKernels(cost, trial, memo);
  if (sameKernels(kernels, current)) return current;  // fusion kept every stream: nothing to lower again
  chooseEngines(kernels, cost, emit, memo);
  for (int round = 0; round < 3; ++round) {
    const std::set<NodeId> streams = streamsOffTensorCores(graph, kernels);
    const std::set<NodeId> prologues = prologuesOffTensorCores(graph, kernels);
    const size_t before = trial.unstreamed.size() + trial.stored.size();
    trial.unstreamed.insert(streams.begin(), streams.end());
    trial.stored.insert(prologues.begin(), prologues.end());
    if (trial.unstreamed.size() + trial.stored.size() == before) break;
    std::vector<PlannedKernel> next = planKernels(cost, trial, memo);
    if (sameKernels(next, kernels)) break;
    chooseEngines(next, cost, emit, memo);
    kernels = std::move(next);
  }
  return kernels;
}

std::vector<PlannedKernel> unfuseOffTensorCores(const Graph& graph, std::vector<PlannedKernel> kernels,
                                                const Target& target, const CostOptions& cost,
                                                const EmitOptions& emit) {
  PartitionMemo memo(graph, target);
  return unfuseOffTensorCores(std::move(kernels), cost, emit, memo);
}

namespace {

std::vector<PlannedKernel> unfuseStreams(std::vector<PlannedKernel> kernels, const CostOptions& asked,
                                         const EmitOptions& emit, PartitionMemo& memo) {
  const Graph& graph = memo.graph();
  // Row products run on tensor-core streams alone (lowering/tensor_core_stream.h):
  // where a kernel holding one stays off them (no wgmma, f32 storage), fusion
  // makes none.
  CostOptions cost = asked;
  if (cost.rowProducts && std::any_of(kernels.begin(), kernels.end(), [&](const PlannedKernel& pk) {
        const Kernel& k = pk.kernel;
        return !pricedOnTensorCores(pk.cost) && !rowProductOutputs(graph, k.outputs, k.nodes, k.streamAxis).empty();
      })) {
    cost.rowProducts = false;
    kernels = planKernels(cost, {}, memo);
    chooseEngines(kernels, cost, emit, memo);
  }
  FusionOptions fusion;  // what `kernels` were fused with
  // First the statistics held whole over an axis in kernels that leave SMs
  // idle, all at once (one trial, made only where there are such): apart,
  // the kernels that read them may be streams the trials below look at.
  // Taken where it saves a third of those kernels' time at least: apart, the
  // statistics take launches of their own and their readers read them back
  // (a layernorm over 100 rows of 1600, a warp a row on 100 SMs: 6.5 us
  // held, 6.1 priced in three launches).
  double heldSeconds = 0;
  const std::set<NodeId> held = heldAxesLeavingSMsIdle(graph, kernels, memo.target().smCount, heldSeconds);
  if (!held.empty()) {
    FusionOptions trial;
    trial.apart = held;
    std::vector<PlannedKernel> separate = planUnfused(trial, cost, emit, memo, kernels);
    if (!sameKernels(separate, kernels)) {
      if (totalSeconds(separate) < totalSeconds(kernels) - heldSeconds / 3)
        fusion = std::move(trial), kernels = std::move(separate);
    }
  }
  // Each round leaves more streams unfused; a few rounds reach every chain.
  for (int round = 0; round < 4; ++round) {
    const std::set<NodeId> streams = streamsOffTensorCores(graph, kernels);
    const std::set<NodeId> prologues = prologuesOffTensorCores(graph, kernels);
    FusionOptions trial = fusion;
    const size_t before = trial.unstreamed.size() + trial.stored.size();
    trial.unstreamed.insert(streams.begin(), streams.end());
    trial.stored.insert(prologues.begin(), prologues.end());
    if (trial.unstreamed.size() + trial.stored.size() == before) break;
    std::vector<PlannedKernel> separate = planUnfused(trial, cost, emit, memo, kernels);
    if (totalSeconds(separate) >= totalSeconds(kernels)) break;
    fusion = std::move(trial);
    kernels = std::move(separate);
  }
  // Then the step-bound tensor-core streams, all at once (one more trial,
  // made only where there are such streams); then, of the plan that leaves,
  // those on a quarter of the SMs or fewer, bound by whatever (a batch
  // normalisation's gradients streamed with the matmul they read, a block
  // for all 64 channels walking 100000 rows, bound by that block's loads).
  const int smCount = memo.target().smCount;
  for (int trialKind = 0; trialKind < 2; ++trialKind) {
    const std::set<NodeId> streams =
        trialKind == 0 ? streamsBoundBySteps(graph, kernels) : streamsOnFewBlocks(graph, kernels, smCount);
    if (streams.empty()) continue;
    FusionOptions trial = fusion;
    trial.unstreamed.insert(streams.begin(), streams.end());
    std::vector<PlannedKernel> separate = planKernels(cost, trial, memo);
    if (!sameKernels(separate, kernels)) {
      chooseEngines(separate, cost, emit, memo);
      if (totalSeconds(separate) < totalSeconds(kernels)) fusion = std::move(trial), kernels = std::move(separate);
    }
  }
  return kernels;
}

// Whether fusion might join a row product to its stream: a kernel of one
// contraction whose weights a streamed kernel makes, over that stream's rows
// (the fuser's joinRowProducts, fusion_row_products.cpp, without its check
// that the graph of kernels stays acyclic). Read off the kernels at hand:
// fusing the graph again to find out took GPT-2 d12's planning 3.2 → 3.9 s.
bool mayJoinRowProducts(const Graph& graph, const std::vector<PlannedKernel>& kernels) {
  std::map<NodeId, const Kernel*> madeBy;
  for (const PlannedKernel& pk : kernels)
    for (NodeId id : pk.kernel.nodes) madeBy[id] = &pk.kernel;
  for (const PlannedKernel& pk : kernels) {
    const Kernel& k = pk.kernel;
    if (k.nodes.size() != 1 || graph.node(k.nodes[0]).op != Op::Contract) continue;
    const Node& c = graph.node(k.nodes[0]);
    for (NodeId operand : c.operands) {
      auto stream = madeBy.find(operand);
      if (stream == madeBy.end() || stream->second->streamAxis.empty()) continue;
      const Kernel& s = *stream->second;
      if (isRowProduct(graph, c, s.streamAxis, [&](NodeId id) { return std::count(s.nodes.begin(), s.nodes.end(), id) > 0; }))
        return true;
    }
  }
  return false;
}

// The kernels fused with row products (planning/row_products.h), lowered and
// unfused as without, where fusion might make any and they price cheaper than
// `kernels` (CostOptions::rowProductsWhereCheaper).
std::vector<PlannedKernel> withRowProductsWhereCheaper(std::vector<PlannedKernel> kernels, const CostOptions& asked,
                                                       const EmitOptions& emit, PartitionMemo& memo) {
  if (asked.rowProducts || !asked.rowProductsWhereCheaper || !mayJoinRowProducts(memo.graph(), kernels)) return kernels;
  CostOptions with = asked;
  with.rowProducts = true;
  std::vector<PlannedKernel> folded = planKernels(with, {}, memo);
  chooseEngines(folded, with, emit, memo);
  folded = unfuseOffTensorCores(std::move(folded), with, emit, memo);
  return totalSeconds(folded) < totalSeconds(kernels) ? folded : kernels;
}

}  // namespace

std::vector<PlannedKernel> unfuseOffTensorCores(std::vector<PlannedKernel> kernels, const CostOptions& asked,
                                                const EmitOptions& emit, PartitionMemo& memo) {
  return withRowProductsWhereCheaper(unfuseStreams(std::move(kernels), asked, emit, memo), asked, emit, memo);
}

}  // namespace llmc
