#include "planning/recomputed_work.h"

#include <algorithm>
#include <set>

namespace llmc {

std::map<NodeId, double> recomputationFactors(const Graph& g, const Kernel& k) {
  std::map<NodeId, double> factor;
  const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
  for (NodeId id : k.nodes) factor[id] = 1;
  // From the consumers to their operands: k.nodes is in graph order, every
  // operand before the nodes that read it.
  for (auto it = k.nodes.rbegin(); it != k.nodes.rend(); ++it) {
    const Node& c = g.node(*it);
    // A reduction over the kernel's stream axis accumulates in slots, its
    // operands computed once a position, ahead of the loops over the slots'
    // axes; any other is looped whole where its value is needed.
    const bool streamed = std::find(c.axes.begin(), c.axes.end(), k.streamAxis) != c.axes.end();
    const bool reduces = (c.op == Op::Contract || c.op == Op::Reduce) && !streamed;
    for (NodeId o : c.operands) {
      if (!members.count(o)) continue;
      const Node& v = g.node(o);
      double redo = factor.at(c.id);
      // Inside the reduction's loops when it has a reduced axis; there, for
      // each position of the reduction's own axes it lacks (bound outside).
      const bool inside = reduces && std::any_of(c.axes.begin(), c.axes.end(),
                                                 [&](const std::string& a) { return v.type.has(a); });
      if (inside)
        for (const Axis& a : c.type.axes)
          if (!v.type.has(a.name)) redo *= static_cast<double>(a.size);
      factor[o] = std::max(factor.at(o), redo);
    }
  }
  return factor;
}

}  // namespace llmc
