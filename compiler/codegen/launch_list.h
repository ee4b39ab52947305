// The order stage: the launches a module runs, in order, and how each array
// they pass between them is stored. Each planned kernel (partition.h) is a
// tile launch, with a clear (zeroing) before what it accumulates by atomics
// (split-K partial sums, a sum over the whole grid) and a launch of its own
// for each scatter-add; graph outputs no kernel writes (views, constants)
// are copied by a launch each. A launch runs after those that write what it
// reads; where fusion made kernels that need each other's results, the part
// of a kernel that depends on another launch becomes a launch of its own
// after it. The write stage (emit_cuda.h) then writes each launch's code.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda_kernel_writer.h"
#include "codegen/module.h"
#include "ir/ir.h"
#include "planning/partition.h"

namespace llmc {

struct ScheduledLaunch {
  LaunchPlan plan;
  int kernel = -1;   // the planned kernel it comes from (KernelLaunch::kernel); -1: none
  std::string role;  // KernelLaunch::role: tile, scatter, clear or copy
};

struct LaunchList {
  std::vector<std::string> names;         // printedNames(graph)
  std::set<NodeId> stored;                // the values stored in GMEM
  std::map<NodeId, StoredArray> arrays;   // each stored value's parameter name and C type
  std::vector<BufferDesc> buffers;        // graph inputs first (signature order), then in order of first write
  std::map<NodeId, int> bufferOf;         // stored value -> its index in buffers
  std::vector<ScheduledLaunch> launches;  // in the order they run
};

LaunchList planLaunches(const Graph& graph, const std::vector<PlannedKernel>& kernels, const EmitOptions& options);

// The graph inputs and outputs options.f32Values names: stored in f32 whatever
// the storage (with statistics, scalars and what atomics add into).
std::set<NodeId> namedF32Values(const Graph& graph, const EmitOptions& options);

// The list in words (--dump-after order): each launch with its role, kernel,
// the arrays it writes and reads; then the buffers with their storage.
std::string describeLaunchList(const Graph& graph, const LaunchList& list);

}  // namespace llmc
