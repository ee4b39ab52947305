#include "planning/row_products.h"

#include <algorithm>
#include <set>

namespace llmc {

std::vector<NodeId> rowProductOutputs(const Graph& g, const std::vector<NodeId>& outputs,
                                      const std::vector<NodeId>& nodes, const std::string& stream) {
  const std::set<NodeId> inside(nodes.begin(), nodes.end());
  std::vector<NodeId> out;
  for (NodeId o : outputs)
    if (inside.count(o) && isRowProduct(g, g.node(o), stream, [&](NodeId id) { return inside.count(id) > 0; }))
      out.push_back(o);
  return out;
}

std::vector<NodeId> outputsAlongStream(const Graph& g, const std::vector<NodeId>& outputs,
                                       const std::vector<NodeId>& nodes, const std::string& stream) {
  if (stream.empty()) return {};
  const std::vector<NodeId> rowProducts = rowProductOutputs(g, outputs, nodes, stream);
  std::vector<NodeId> out;
  for (NodeId o : outputs)
    if (g.node(o).type.has(stream) && std::find(rowProducts.begin(), rowProducts.end(), o) == rowProducts.end())
      out.push_back(o);
  return out;
}

}  // namespace llmc
