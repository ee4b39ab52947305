#include "codegen/output_parts.h"

#include "analysis/strided_view.h"
#include "planning/fusion.h"

namespace llmc {

namespace {

// The stored array `part` is a view of, where every element lies as in a
// row-major array of the part's own axes and nothing else reads the array or
// the views between; -1 otherwise.
NodeId denseArrayOf(const Graph& g, NodeId part, const std::set<NodeId>& stored, const std::vector<int>& readers) {
  NodeId at = part;
  while (!stored.count(at)) {
    const Node& n = g.node(at);
    if (!isView(n) || n.operands.size() != 1 || readers[static_cast<size_t>(at)] != 1) return -1;
    at = n.operands[0];
  }
  if (readers[static_cast<size_t>(at)] != 1) return -1;
  return sameBytesAs(g, part, at, stored) ? at : -1;
}

}  // namespace

std::vector<OutputPart> partsInPlace(const Graph& g, NodeId output, const std::set<NodeId>& stored,
                                     const std::set<NodeId>& excluded, const std::vector<int>& readers) {
  const Node& n = g.node(output);
  if (n.op != Op::Concat || n.axes.size() != 1 || n.newAxes.size() != 1 || n.type.axes.empty() ||
      n.type.axes[0].name != n.newAxes[0] || readers[static_cast<size_t>(output)] != 0)
    return {};
  const std::vector<Axis> inner(n.type.axes.begin() + 1, n.type.axes.end());
  int64_t innerElements = 1;
  for (const Axis& a : inner) innerElements *= a.size;

  std::vector<OutputPart> parts;
  std::set<NodeId> arrays;
  int64_t start = 0;  // along the output's first axis
  for (NodeId part : n.operands) {
    const Type& t = g.node(part).type;
    // The joined axis first, then the output's others as the output has them.
    if (t.dtype != n.type.dtype || t.axes.empty() || t.axes[0].name != n.axes[0] ||
        std::vector<Axis>(t.axes.begin() + 1, t.axes.end()) != inner)
      return {};
    const NodeId array = denseArrayOf(g, part, stored, readers);
    if (array < 0 || g.node(array).op == Op::Input || excluded.count(array) || !arrays.insert(array).second) return {};
    for (const GraphOutput& o : g.outputs)
      if (o.node == array) return {};
    const int64_t offset = start * innerElements;
    if (offset % 8 != 0) return {};
    parts.push_back({array, offset});
    start += t.axes[0].size;
  }
  return parts;
}

}  // namespace llmc
