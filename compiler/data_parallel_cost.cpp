#include "data_parallel_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

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
  // llmc-train reduces the gradients after the step's last kernel (the plan
  // writes every gradient output in its last launches, so there is nothing
  // for buckets to overlap yet): all of it is exposed.
  c.exposedSeconds = c.seconds;
  return c;
}

std::string describeDataParallel(const DataParallelCost& c, const Target& target) {
  if (c.gpus == 1) return "data parallel: 1 GPU, nothing to communicate\n";
  return fmt::format(
      "data parallel over {} GPUs ({}, {:.0f} GB/s each way attainable), ZeRO-{}: {}\n"
      "  gradients {:.1f} MB, parameters {:.1f} MB; each GPU sends {:.1f} MB: {:.3f} ms\n"
      "  after the backward pass ({:.3f} ms predicted), not beside it: {:.3f} ms exposed per step\n",
      c.gpus, target.interconnect, target.interconnectAttainable / 1e9, c.zero, c.collectives,
      static_cast<double>(c.gradientBytes) / 1e6, static_cast<double>(c.parameterBytes) / 1e6, c.bytesPerGpu / 1e6,
      c.seconds * 1e3, c.backwardSeconds * 1e3, c.exposedSeconds * 1e3);
}

}  // namespace llmc
