#include "planning/shifted_axes.h"

#include <algorithm>
#include <set>

namespace llmc {

std::map<std::string, std::string> shiftedGroupAxes(const Graph& g, const Kernel& k, NodeId input,
                                                    const std::vector<Axis>& groupAxes) {
  // Only a rename, slice or concatenation onto a group axis can shift one:
  // kernels without one (most) are answered without the walk.
  const bool shifts = std::any_of(k.nodes.begin(), k.nodes.end(), [&](NodeId id) {
    const Node& n = g.node(id);
    return (n.op == Op::Rename || n.op == Op::Slice || n.op == Op::Concat) && !n.newAxes.empty() &&
           std::any_of(groupAxes.begin(), groupAxes.end(), [&](const Axis& a) { return a.name == n.newAxes[0]; });
  });
  if (!shifts) return {};
  // names[v][a]: the name axis a of the input goes by in value v.
  std::map<NodeId, std::map<std::string, std::string>> names;
  for (const Axis& a : g.node(input).type.axes) names[input][a.name] = a.name;
  for (NodeId id : k.nodes) {
    const Node& n = g.node(id);
    std::map<std::string, std::string> out;
    for (NodeId operand : n.operands) {
      auto from = names.find(operand);
      if (from == names.end()) continue;
      for (auto [axis, name] : from->second) {
        const bool renames = (n.op == Op::Rename || n.op == Op::Slice || n.op == Op::Concat) && !n.axes.empty() &&
                             !n.newAxes.empty() && n.axes[0] == name;
        if (renames) name = n.newAxes[0];
        // Only views and elementwise nodes pass the input's positions on.
        const bool passes = renames || n.op == Op::Cast || n.op == Op::Unary || n.op == Op::Binary ||
                            n.op == Op::Select || n.op == Op::Compare || n.op == Op::Broadcast ||
                            n.op == Op::Concat || n.op == Op::Contract || n.op == Op::Reduce;
        if (passes && n.type.has(name)) out[axis] = name;
      }
    }
    if (!out.empty()) names[id] = std::move(out);
  }
  std::map<std::string, std::set<std::string>> reached;
  for (const auto& [id, m] : names)
    for (const auto& [axis, name] : m)
      if (std::any_of(groupAxes.begin(), groupAxes.end(), [&](const Axis& a) { return a.name == name; }))
        reached[axis].insert(name);
  std::map<std::string, std::string> out;
  for (const auto& [axis, targets] : reached)
    if (targets.size() == 1 && *targets.begin() != axis && !g.node(input).type.has(*targets.begin()) &&
        axis != k.streamAxis && std::find(k.innerAxes.begin(), k.innerAxes.end(), axis) == k.innerAxes.end() &&
        std::none_of(groupAxes.begin(), groupAxes.end(), [&](const Axis& a) { return a.name == axis; }))
      out[axis] = *targets.begin();
  return out;
}

Type renamedAxes(const Type& type, const std::map<std::string, std::string>& renames) {
  Type out = type;
  for (Axis& a : out.axes)
    if (auto r = renames.find(a.name); r != renames.end()) a.name = r->second;
  return out;
}

}  // namespace llmc
