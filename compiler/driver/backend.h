// The back end as one straight list of stages, from canonical IR (pipeline.h)
// to the module and its memory plan (see backend.cpp). Each stage is a
// function in its own file; what a stage made can be printed after it
// (--dump-after) and each can be timed (--time-passes).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "codegen/launch_list.h"
#include "codegen/module.h"
#include "driver/pass_runner.h"
#include "ir/ir.h"
#include "planning/cost_model.h"
#include "planning/memory_plan.h"
#include "planning/partition.h"
#include "planning/target.h"

namespace llmc {

struct BackendOptions {
  CostOptions cost;
  EmitOptions emit;
  // The last stage to run; the later ones are left out. The stage
  // reporting.dumpAfter names runs even when it comes later.
  std::string until = "memory";
  // The memory stage: the graph's inputs and outputs placed by the caller
  // (a trainer's parameters, gradients and tokens), outside the arena.
  bool callerMemory = false;
  PassReporting reporting;
};

// What the stages made; a stage left out leaves its part empty.
struct Backend {
  std::vector<PlannedKernel> kernels;  // fused, partitioned, lowered and priced (unfuse)
  std::optional<LaunchList> launches;  // order
  std::optional<CudaModule> module;    // write
  std::optional<MemoryPlan> memory;    // memory: the arena for every buffer (none placed by the caller)
};

// The names of the stages, in order, for --dump-after and --help.
const std::vector<std::string>& backendStageNames();

// Runs the stages on `graph` (canonical IR) for `target`.
Backend compileBackend(const Graph& graph, const Target& target, const BackendOptions& options);

}  // namespace llmc
