#include "planning/data_parallel_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "planning/fusion.h"

namespace llmc {

DataParallelCost dataParallelCost(const Graph& step, const std::vector<PlannedKernel>& kernels, const Target& target,
                                  int gpus, int zero, int gradientBytesPerElement, int parameterBytesPerElement) {
  if (gpus < 1) throw std::invalid_argument("data-parallel cost: at least one GPU");
  if (zero != 0 && zero != 1) throw std::invalid_argument("data-parallel cost: ZeRO stage 0 or 1");
  DataParallelCost c;
  c.gpus = gpus;
  c.zero = zero;
  int64_t gradients = 0, parameters = 0;
  for (const GraphOutput& o : step.outputs)
    if (o.name.rfind("grad_", 0) == 0) gradients += step.node(o.node).type.elementCount();
  for (NodeId id : step.inputs)
    if (step.node(id).isParam) parameters += step.node(id).type.elementCount();
  if (gradients == 0) throw std::invalid_argument("data-parallel cost: the graph has no gradients (compile it with --grad)");
  c.gradientBytes = gradients * gradientBytesPerElement;
  c.parameterBytes = parameters * parameterBytesPerElement;
  const double share = static_cast<double>(gpus - 1) / gpus;
  if (zero == 0) {
    c.collectives = "ring all-reduce of the gradients";
    c.bytesPerGpu = 2 * share * static_cast<double>(c.gradientBytes);
  } else {
    c.collectives = "reduce-scatter of the gradients + all-gather of the parameters";
    c.bytesPerGpu = share * static_cast<double>(c.gradientBytes + c.parameterBytes);
  }
  if (gpus > 1 && target.interconnectAttainable <= 0)
    throw std::invalid_argument(fmt::format("target {} ({}) gives no interconnect figures for several GPUs", target.arch,
                                            target.device));
  c.seconds = gpus > 1 ? c.bytesPerGpu / target.interconnectAttainable : 0;
  for (const PlannedKernel& k : kernels)
    if (std::any_of(k.kernel.nodes.begin(), k.kernel.nodes.end(), [&](NodeId id) { return step.node(id).adjoint; }))
      c.backwardSeconds += k.cost.predicted;
  // When each gradient is final, as llmc-train averages it
  // (runtime/train/overlapped_reduction.h): a gradient stacked from
  // per-layer values by a concat travels value by value, each once the
  // kernel that writes it has run; any other once its own kernel has. The
  // transfers queue on the interconnect; what ends after the step's last
  // kernel is exposed. ZeRO-1 reduce-scatters after the step and all-gathers
  // after the optimizer: all of it exposed.
  std::map<NodeId, double> finishedAt;  // kernel outputs -> when their kernel ends
  double now = 0;
  for (const PlannedKernel& k : kernels) {
    now += k.cost.predicted;
    for (NodeId id : k.kernel.outputs) finishedAt[id] = now;
  }
  const double stepSeconds = now;
  if (zero == 1 || gpus == 1) {
    c.exposedSeconds = c.seconds;
  } else {
    std::vector<std::pair<double, int64_t>> ready;  // (time, elements)
    // A view (broadcast, transpose, ...) of one stored value is final when that value is.
    auto storedUnder = [&](NodeId id) {
      while (isView(step.node(id)) && step.node(id).operands.size() == 1 && !finishedAt.count(id))
        id = step.node(id).operands[0];
      return id;
    };
    auto finalAt = [&](NodeId id) {
      auto it = finishedAt.find(storedUnder(id));
      return it == finishedAt.end() ? stepSeconds : it->second;
    };
    for (const GraphOutput& o : step.outputs) {
      if (o.name.rfind("grad_", 0) != 0) continue;
      const Node& n = step.node(o.node);
      const bool stacked = n.op == Op::Concat && std::all_of(n.operands.begin(), n.operands.end(), [&](NodeId id) {
                             return finishedAt.count(storedUnder(id)) > 0;
                           });
      if (stacked)
        for (NodeId part : n.operands) ready.push_back({finalAt(part), step.node(part).type.elementCount()});
      else
        ready.push_back({finalAt(o.node), n.type.elementCount()});
    }
    std::sort(ready.begin(), ready.end());
    const double secondsPerElement = 2 * share * gradientBytesPerElement / target.interconnectAttainable;
    double linkFree = 0;
    for (const auto& [at, elements] : ready) linkFree = std::max(linkFree, at) + static_cast<double>(elements) * secondsPerElement;
    c.exposedSeconds = std::max(0.0, linkFree - stepSeconds);
  }
  return c;
}

std::string describeDataParallel(const DataParallelCost& c, const Target& target) {
  if (c.gpus == 1) return "data parallel: 1 GPU, nothing to communicate\n";
  return fmt::format(
      "data parallel over {} GPUs ({}, {:.0f} GB/s each way attainable), ZeRO-{}: {}\n"
      "  gradients {:.1f} MB, parameters {:.1f} MB; each GPU sends {:.1f} MB: {:.3f} ms\n"
      "  {}: {:.3f} ms exposed per step\n",
      c.gpus, target.interconnect, target.interconnectAttainable / 1e9, c.zero, c.collectives,
      static_cast<double>(c.gradientBytes) / 1e6, static_cast<double>(c.parameterBytes) / 1e6, c.bytesPerGpu / 1e6,
      c.seconds * 1e3,
      c.zero == 0 ? fmt::format("beside the backward pass ({:.3f} ms predicted), each gradient once final",
                                c.backwardSeconds * 1e3)
                  : std::string("after the step (reduce-scatter) and the optimizer (all-gather)"),
      c.exposedSeconds * 1e3);
}

}  // namespace llmc
