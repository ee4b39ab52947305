// The back end, one stage after another:
//
//   fuse → partition → lower → unfuse → order → write → memory
//
// fuse (planning/fusion.h) cuts the graph into kernels; partition
// (planning/partition.h) partitions and prices each on the target; lower
// (lowering/lowering.h) chooses each kernel's engine and prices it there;
// unfuse (lowering/unfuse.h) tries kernels left off the tensor cores again
// as separate kernels and keeps the cheaper graph of kernels; order
// (codegen/launch_list.h) makes the launches, their order and how each array
// is stored; write (codegen/emit_cuda.h) writes each launch's code into the
// module; memory (planning/memory_plan.h) places the module's arrays in one
// arena. lowerKernels and emitCuda run the same stages for library callers.
#include "driver/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "codegen/emit_cuda.h"
#include "ir/print.h"
#include "lowering/lowering.h"
#include "lowering/unfuse.h"
#include "planning/fusion.h"

namespace llmc {

const std::vector<std::string>& backendStageNames() {
  static const std::vector<std::string> names = {"fuse", "partition", "lower", "unfuse", "order", "write", "memory"};
  return names;
}

namespace {

size_t stageIndex(const std::string& name) {
  const std::vector<std::string>& names = backendStageNames();
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

std::string nameList(const std::vector<std::string>& names, const std::vector<NodeId>& ids) {
  std::string out;
  for (NodeId id : ids) out += " " + names[static_cast<size_t>(id)];
  return out.empty() ? " -" : out;
}

// After fuse: each kernel's nodes, what it reads and writes, its stream.
std::string describeKernels(const Graph& graph, const std::vector<Kernel>& kernels) {
  const std::vector<std::string> names = printedNames(graph);
  std::string out;
  for (const Kernel& k : kernels) {
    out += fmt::format("kernel {} {}", k.id, k.name);
    if (!k.streamAxis.empty()) out += fmt::format(", streamed over {}", k.streamAxis);
    out += "\n  nodes:" + nameList(names, k.nodes) + "\n  reads:" + nameList(names, k.inputs) + "\n  writes:" +
           nameList(names, k.outputs) + "\n";
  }
  return out;
}

// After partition: each kernel's partition and predicted time.
std::string describePartitions(const Graph& graph, const std::vector<PlannedKernel>& kernels) {
  std::string out;
  for (const PlannedKernel& pk : kernels) {
    out += fmt::format("kernel {} {}: {}", pk.kernel.id, pk.kernel.name, partitionText(graph, pk));
    for (const auto& [axis, perBlock] : pk.partition.splitTiles) out += fmt::format(" | split {}/{}", axis, perBlock);
    out += fmt::format("; {} blocks, predicted {:.2f} us, bound by {}\n", pk.cost.blocks, pk.cost.predicted * 1e6,
                       pk.cost.bottleneck);
  }
  return out;
}

// After lower and unfuse: each kernel's engine and its time there.
std::string describeEngines(const std::vector<PlannedKernel>& kernels) {
  std::string out;
  double total = 0;
  for (const PlannedKernel& pk : kernels) {
    out += fmt::format("kernel {} {}: {}, predicted {:.2f} us", pk.kernel.id, pk.kernel.name,
                       pk.cost.engine.empty() ? "no launch" : pk.cost.engine, pk.cost.predicted * 1e6);
    if (pk.cost.helperLaunches > 0)
      out += fmt::format(" with {} helper launch{}", pk.cost.helperLaunches, pk.cost.helperLaunches > 1 ? "es" : "");
    out += "\n";
    total += pk.cost.predicted;
  }
  return out + fmt::format("total predicted {:.2f} us\n", total * 1e6);
}

}  // namespace

Backend compileBackend(const Graph& graph, const Target& target, const BackendOptions& options) {
  PassRunner stages(options.reporting, "stage");
  size_t last = stageIndex(options.until);
  if (last == backendStageNames().size()) throw std::invalid_argument("compileBackend: no stage '" + options.until + "'");
  const size_t dumped = stageIndex(options.reporting.dumpAfter);
  if (dumped < backendStageNames().size()) last = std::max(last, dumped);
  auto after = [&](const std::string& stage, auto describe) {
    if (stages.dumps(stage)) stages.dump(fmt::format("# after stage {}\n{}", stage, describe()));
  };
  const EmitOptions& emit = options.emit;
  const CostOptions cost = pricedAsWritten(graph, options.cost, emit);
  Backend out;

  std::vector<Kernel> kernels = stages.run("fuse", [&] { return formKernels(graph, {.rowProducts = cost.rowProducts}); });
  after("fuse", [&] { return describeKernels(graph, kernels); });
  // One memo for the stages that search partitions: the unfuse stage's
  // trials search again mostly what the partition and lower stages did.
  PartitionMemo memo(graph, target);
  out.kernels = stages.run("partition", [&] { return partitionKernels(std::move(kernels), cost, memo); });
  after("partition", [&] { return describePartitions(graph, out.kernels); });
  stages.run("lower", [&] { chooseEngines(out.kernels, cost, emit, memo); return 0; });
  after("lower", [&] { return describeEngines(out.kernels); });
  out.kernels = stages.run("unfuse", [&] { return unfuseOffTensorCores(std::move(out.kernels), cost, emit, memo); });
  after("unfuse", [&] { return describeEngines(out.kernels); });
  if (last < stageIndex("order")) return out;

  out.launches = stages.run("order", [&] { return planLaunches(graph, out.kernels, emit); });
  after("order", [&] { return describeLaunchList(graph, *out.launches); });
  if (last < stageIndex("write")) return out;
  out.module = stages.run("write", [&] { return writeModule(graph, *out.launches, target, emit); });
  recordLaunches(out.kernels, *out.module);
  after("write", [&] { return launchesToJson(*out.module).dump(2) + "\n"; });
  if (last < stageIndex("memory")) return out;
  out.memory = stages.run("memory", [&] {
    return planMemory(*out.module, options.callerMemory ? graphInputsAndOutputs(*out.module)
                                                        : std::vector<bool>(out.module->buffers.size(), false));
  });
  after("memory", [&] { return describeMemoryPlan(*out.module, *out.memory); });
  return out;
}

}  // namespace llmc
