#include "ir/rewrite.h"

#include <vector>

namespace llmc {

Graph rewriteNodes(const Graph& graph, const NodeRewrite& rewrite) {
  Graph out;
  out.name = graph.name;
  std::vector<NodeId> remap(graph.nodes.size(), -1);
  const CopiedNode copied = [&](NodeId id) { return remap[static_cast<size_t>(id)]; };
  for (const Node& n : graph.nodes) {
    const size_t firstNew = out.nodes.size();
    GraphBuilder b(out, n.origin);
    if (const std::optional<NodeId> made = rewrite(n, b, copied)) {
      for (size_t i = firstNew; i < out.nodes.size(); ++i) {
        out.nodes[i].adjoint = n.adjoint;
        out.nodes[i].loc = n.loc;
        out.nodes[i].name = n.name;
      }
      remap[static_cast<size_t>(n.id)] = *made;
      continue;
    }
    Node copy = n;
    for (NodeId& o : copy.operands) o = copied(o);
    remap[static_cast<size_t>(n.id)] = out.add(std::move(copy));
  }
  for (NodeId input : graph.inputs) out.inputs.push_back(copied(input));
  for (const GraphOutput& o : graph.outputs) out.outputs.push_back({o.name, copied(o.node)});
  return out;
}

}  // namespace llmc
