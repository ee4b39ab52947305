#include "planning/flat_points.h"

#include <algorithm>

#include "analysis/strided_view.h"
#include "planning/fusion.h"

namespace llmc {

bool takesFlatPoints(const Graph& g, const std::set<NodeId>& computed, const std::set<NodeId>& stored,
                     const std::vector<NodeId>& outputs, const std::vector<Axis>& groupAxes,
                     const std::function<int64_t(NodeId)>& elementBytes) {
  if (groupAxes.empty() || outputs.empty()) return false;
  auto sameAxes = [&](const Type& t) {
    return std::equal(t.axes.begin(), t.axes.end(), groupAxes.begin(), groupAxes.end(),
                      [](const Axis& a, const Axis& b) { return a.name == b.name && a.size == b.size; });
  };
  bool bf16 = false;
  for (NodeId o : outputs) {
    const Node& n = g.node(o);
    const int64_t bytes = elementBytes(o);
    if (isView(n) || !isFloat(n.type.dtype) || !sameAxes(n.type) || (bytes != 2 && bytes != 4)) return false;
    bf16 = bf16 || bytes == 2;
  }
  if (!bf16) return false;
  const std::string& last = groupAxes.back().name;
  for (NodeId id : computed) {
    const Node& consumer = g.node(id);
    // Parts chosen along the threads' axis would diverge among a thread's 8 (codegen's unrolledAxis).
    if (consumer.op == Op::Concat && !consumer.newAxes.empty() && consumer.newAxes[0] == last) return false;
    if (isView(consumer) || consumer.op == Op::Gather || consumer.op == Op::ScatterAdd) continue;
    for (NodeId o : consumer.operands) {
      const Node& read = g.node(o);
      if (!read.type.has(last)) continue;
      std::string why;  // not reported here
      const std::optional<AffineLayout> layout = layoutThroughViews(g, o, computed, stored, {}, why);
      if (!layout) continue;  // computed here, or made of positions and constants
      const auto along = layout->strides.find(last);
      if (along != layout->strides.end() && along->second != 0 && along->second != 1) return false;
    }
  }
  return true;
}

}  // namespace llmc
