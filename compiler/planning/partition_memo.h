// Partition searches remembered across the planning stages of one graph on
// one target. The stages search the same kernels again and again: the
// unfuse stage (lowering/unfuse.h) plans the whole graph once a trial with
// most kernels unchanged, and the lowering stage (lowering/lowering.h)
// searches again, on the CUDA cores, every kernel it keeps off the tensor
// cores, alike in every layer of a model. The search (cost_model.h,
// searchPartition) is a function of what the kernel computes, so it is
// keyed on that (kernelStructureKey), not on node ids: kernels of different
// layers that are the same computation share one search, and a plan made
// with the memo is the plan made without it.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/ir.h"
#include "planning/cost_model.h"
#include "planning/fusion.h"
#include "planning/target.h"

namespace llmc {

class PartitionMemo {
 public:
  // Both must outlive the memo.
  PartitionMemo(const Graph& graph, const Target& target);

  // searchPartition(graph, kernel, shape, target, options, objective), run
  // once per kernel structure, options and objective. `shape` must be
  // kernelShape(graph, kernel, target, options).
  Partition search(const Kernel& kernel, const KernelShape& shape, const CostOptions& options,
                   Objective objective = Objective::Time);

  // Everything about a kernel that its shape, cost and partition search
  // read, with nodes numbered by their order in the graph rather than by
  // id: its nodes (operation, attributes, types, operands), the
  // stop-gradients of its values (the stream analysis takes them in), the
  // values outside it that it remakes (constants, positions, masks:
  // fusion.h, isFree) down to their leaves, the arrays it reads (the same
  // array read twice is one input, a view followed to what it views), which
  // of its values are read outside it or are graph outputs, its inputs and
  // outputs in order, its stream and inner axes. Equal keys: equal shapes,
  // costs under any partition, and searches.
  std::string structureKey(const Kernel& kernel) const;

  const Graph& graph() const { return graph_; }
  const Target& target() const { return target_; }
  size_t searches() const { return searched_.size(); }
  size_t lookups() const { return lookups_; }

 private:
  const Graph& graph_;
  const Target& target_;
  std::vector<std::vector<NodeId>> users_;  // each node's readers, by id
  std::vector<char> free_;                  // fusion.h, freeNodes
  std::set<NodeId> graphOutputs_;
  std::unordered_map<std::string, Partition> searched_;
  size_t lookups_ = 0;
};

}  // namespace llmc
