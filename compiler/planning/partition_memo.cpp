#include "planning/partition_memo.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace llmc {

namespace {

// A node's meaning without its id, name or source: what the cost model
// reads. `bounds`: whether its slice or index bounds are part of it; not for
// the views outside the kernel that it reads a stored array through (a
// layer's weights in the stack of them), whose bounds set only where the
// read starts, which the cost model does not price (a layout's offset).
void appendNode(std::string& key, const Node& n, bool bounds) {
  key += fmt::format("{} {} {} {} {} {} {} {} {}", opName(n.op), n.type.str(), static_cast<int>(n.unary),
                     static_cast<int>(n.binary), static_cast<int>(n.compare), static_cast<int>(n.reduce), n.value,
                     n.isParam ? "param" : "", bounds ? fmt::format("{} {}", n.lo, n.hi) : "");
  key += " axes";
  for (const std::string& a : n.axes) key += " " + a;
  key += " new";
  for (const std::string& a : n.newAxes) key += " " + a;
}

// The values an array read by the kernel is seen through where a view of it
// is followed to the array (a stored view's operand, a mask's condition).
bool followedPast(const Node& n) { return isView(n) || n.op == Op::Cast; }

}  // namespace

std::string PartitionMemo::structureKey(const Kernel& k) const {
  const Graph& g = graph_;
  // The region the stream analysis takes: the kernel's nodes and the
  // stop-gradients of them (streamability.h, withStopGradients).
  const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
  std::set<NodeId> region = members;
  std::vector<NodeId> work(k.nodes.begin(), k.nodes.end());
  while (!work.empty()) {
    const NodeId id = work.back();
    work.pop_back();
    for (NodeId u : users_[static_cast<size_t>(id)])
      if (g.node(u).op == Op::StopGradient && region.insert(u).second) work.push_back(u);
  }
  // Then what the region reads from outside, down to what the analyses see:
  // a view, followed to what it views; a value made of constants and
  // positions alone (a mask, remade in the kernel), to its leaves; any other
  // array ends the walk.
  const std::set<NodeId> stored(k.inputs.begin(), k.inputs.end());
  std::set<NodeId> closure = region;
  closure.insert(k.inputs.begin(), k.inputs.end());
  closure.insert(k.outputs.begin(), k.outputs.end());
  work.assign(closure.begin(), closure.end());
  while (!work.empty()) {
    const Node& n = g.node(work.back());
    work.pop_back();
    if (!region.count(n.id) && !followedPast(n) && !free_[static_cast<size_t>(n.id)]) continue;
    for (NodeId o : n.operands)
      if (closure.insert(o).second) work.push_back(o);
  }
  // Numbered by graph order: the order the analyses visit them in.
  std::map<NodeId, size_t> rank;
  for (NodeId id : closure) rank.emplace(id, rank.size());

  std::string key = fmt::format("stream {} inner", k.streamAxis);
  for (const std::string& a : k.innerAxes) key += " " + a;
  for (NodeId id : closure) {
    const Node& n = g.node(id);
    key += fmt::format("\n{}{}{}{} ", members.count(id) ? 'K' : region.count(id) ? 'S' : '-', stored.count(id) ? 'I' : '-',
                       graphOutputs_.count(id) ? 'O' : '-',
                       region.count(id) && std::any_of(users_[static_cast<size_t>(id)].begin(),
                                                       users_[static_cast<size_t>(id)].end(),
                                                       [&](NodeId u) { return !region.count(u); })
                           ? 'R'
                           : '-');
    appendNode(key, n, region.count(id) || !followedPast(n));
    key += " <-";
    for (NodeId o : n.operands) {
      const auto r = rank.find(o);
      key += r != rank.end() ? fmt::format(" #{}", r->second) : " " + g.node(o).type.str();
    }
  }
  auto ranks = [&](const char* what, const std::vector<NodeId>& ids) {
    key += fmt::format("\n{}", what);
    for (NodeId id : ids) {
      const auto r = rank.find(id);
      key += r != rank.end() ? fmt::format(" #{}", r->second) : " " + g.node(id).type.str();
    }
  };
  ranks("nodes", k.nodes);
  ranks("inputs", k.inputs);
  ranks("outputs", k.outputs);
  return key;
}

PartitionMemo::PartitionMemo(const Graph& graph, const Target& target)
    : graph_(graph), target_(target), users_(graph.nodes.size()), free_(freeNodes(graph)) {
  for (const Node& n : graph.nodes)
    for (NodeId o : n.operands) {
      std::vector<NodeId>& readers = users_[static_cast<size_t>(o)];
      if (readers.empty() || readers.back() != n.id) readers.push_back(n.id);
    }
  for (const GraphOutput& o : graph.outputs) graphOutputs_.insert(o.node);
}

Partition PartitionMemo::search(const Kernel& kernel, const KernelShape& shape, const CostOptions& options,
                                Objective objective) {
  ++lookups_;
  std::string key = fmt::format("storage {} tensor cores {} objective {}\n", options.storageBytes, options.tensorCores,
                                static_cast<int>(objective));
  key += structureKey(kernel);
  const auto known = searched_.find(key);
  if (known != searched_.end()) return known->second;
  Partition p = searchPartition(graph_, kernel, shape, target_, options, objective);
  searched_.emplace(std::move(key), p);
  return p;
}

}  // namespace llmc
