#include "planning/partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace llmc {

namespace {

// What a kernel computes, independent of where it sits in the graph: its
// nodes (operation, attributes, types) with operands as positions inside the
// kernel or as the types of the arrays it reads. Kernels with the same
// signature (the layers of a model) have the same best partition.
std::string kernelSignature(const Graph& g, const Kernel& k) {
  std::map<NodeId, size_t> position;
  for (size_t i = 0; i < k.nodes.size(); ++i) position[k.nodes[i]] = i;
  std::string key = fmt::format("stream {};", k.streamAxis);
  for (const auto& a : k.innerAxes) key += a + ",";
  for (NodeId id : k.nodes) {
    const Node& n = g.node(id);
    key += fmt::format("|{} {} {} {} {} {} {} {} {}:", opName(n.op), n.type.str(), static_cast<int>(n.unary),
                       static_cast<int>(n.binary), static_cast<int>(n.compare), static_cast<int>(n.reduce), n.value,
                       n.lo, n.hi);
    for (const auto& a : n.axes) key += a + ",";
    for (const auto& a : n.newAxes) key += a + ",";
    for (NodeId o : n.operands) {
      auto inside = position.find(o);
      key += inside != position.end() ? fmt::format(" #{}", inside->second) : " " + g.node(o).type.str();
    }
    key += std::find(k.outputs.begin(), k.outputs.end(), id) != k.outputs.end() ? " out" : "";
  }
  return key;
}

}  // namespace

std::vector<PlannedKernel> partitionKernels(const Graph& graph, std::vector<Kernel> kernels, const Target& target,
                                            const CostOptions& options) {
  PartitionMemo memo(graph, target);
  return partitionKernels(std::move(kernels), options, memo);
}

std::vector<PlannedKernel> partitionKernels(std::vector<Kernel> kernels, const CostOptions& options,
                                            PartitionMemo& memo) {
  const Graph& graph = memo.graph();
  const Target& target = memo.target();
  std::vector<PlannedKernel> planned;
  std::map<std::string, Partition> searched;  // signature -> best partition
  for (Kernel& k : kernels) {
    PlannedKernel p;
    if (const NodeId scan = scanOf(graph, k); scan >= 0) {
      // A scan runs as its layout says (scan_layout.h): its lines are its
      // group, each block taking whole lines; no search.
      const ScanLayout layout = scanLayout(graph, k, scan, target, options);
      p.shape.groupAxes = layout.lines;
      for (const Axis& a : layout.lines) p.partition.groupTiles[a.name] = a.size;
      p.cost = scanCost(graph, k, layout, target, options);
      p.scan = layout;
      p.kernel = std::move(k);
      planned.push_back(std::move(p));
      continue;
    }
    p.shape = kernelShape(graph, k, target, options);
    const std::string signature = kernelSignature(graph, k);
    auto known = searched.find(signature);
    p.partition = known != searched.end() ? known->second : memo.search(k, p.shape, options);
    searched.emplace(signature, p.partition);
    p.cost = evaluate(graph, k, p.shape, p.partition, target, options);
    p.kernel = std::move(k);
    planned.push_back(std::move(p));
  }
  return planned;
}

namespace {
// The fusion the cost options ask for too (CostOptions::rowProducts).
FusionOptions askedBy(const CostOptions& options, FusionOptions fusion) {
  fusion.rowProducts = fusion.rowProducts || options.rowProducts;
  return fusion;
}
}  // namespace

std::vector<PlannedKernel> planKernels(const Graph& graph, const Target& target, const CostOptions& options,
                                       const FusionOptions& fusion) {
  return partitionKernels(graph, formKernels(graph, askedBy(options, fusion)), target, options);
}

std::vector<PlannedKernel> planKernels(const CostOptions& options, const FusionOptions& fusion, PartitionMemo& memo) {
  return partitionKernels(formKernels(memo.graph(), askedBy(options, fusion)), options, memo);
}

std::string partitionText(const Graph& g, const PlannedKernel& k) {
  // A whole array summed over the grid has no tiles and no stream: a
  // grid-stride loop over every element (fusion.h, isWholeArraySum).
  if (!k.cost.launched) return "none: no launch";
  const std::set<NodeId> members(k.kernel.nodes.begin(), k.kernel.nodes.end());
  if (isWholeArraySum(g, k.kernel.outputs, members)) return "grid sum";
  if (k.scan) return scanPartitionText(*k.scan);
  std::string out;
  for (const auto& a : k.shape.groupAxes)
    out += fmt::format("{}{}/{}", out.empty() ? "" : " ", a.name, k.partition.groupTiles.at(a.name));
  if (k.partition.streamChunk > 0) out += fmt::format(" | stream {}/{}", k.shape.streamAxis, k.partition.streamChunk);
  // Axes shared out across blocks (split-K, a stream's shares): positions a block.
  for (const auto& [axis, perBlock] : k.partition.splitTiles) out += fmt::format(" | split {}/{}", axis, perBlock);
  return out;
}

KernelSource kernelSource(const Graph& g, const PlannedKernel& k) {
  NodeId anchor = k.kernel.outputs.empty() ? (k.kernel.nodes.empty() ? -1 : k.kernel.nodes.front()) : k.kernel.outputs.front();
  for (NodeId id : k.kernel.nodes)
    if (isAnchor(g.node(id))) {
      anchor = id;
      break;
    }
  KernelSource out;
  if (anchor < 0) return out;
  const Node& n = g.node(anchor);
  // Autodiff files the backward's boxes under a "backward" call of their own.
  const size_t first = n.adjoint && !n.origin.empty() && n.origin.front() == "backward" ? 1 : 0;
  out.calls.assign(n.origin.begin() + static_cast<std::ptrdiff_t>(first), n.origin.end());
  for (const std::string& call : out.calls) out.path += (out.path.empty() ? "" : "/") + call;
  out.pass = n.adjoint ? "backward" : "forward";
  if (n.loc.valid()) out.location = n.loc.str();
  return out;
}

}  // namespace llmc
