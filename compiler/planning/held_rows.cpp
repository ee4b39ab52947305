#include "planning/held_rows.h"

#include <algorithm>

#include "planning/fusion.h"

namespace llmc {

namespace {

bool reducesOver(const Node& n, const std::string& axis) {
  return (n.op == Op::Reduce || n.op == Op::Contract) && std::find(n.axes.begin(), n.axes.end(), axis) != n.axes.end();
}

// Whether the value of `from` at a position reads `array` in the same pass:
// through computed nodes, stopping at reductions over the lane axis (their
// results come from passes of their own).
bool readsInPass(const Graph& g, const std::set<NodeId>& computed, const std::string& laneAxis, NodeId from,
                 NodeId array, std::set<NodeId>& seen) {
  if (from == array) return true;
  // Through the launch's nodes and the views between them (not launch nodes themselves).
  if ((!computed.count(from) && !isView(g.node(from))) || !seen.insert(from).second) return false;
  const Node& n = g.node(from);
  return std::any_of(n.operands.begin(), n.operands.end(), [&](NodeId o) {
    if (o != array && computed.count(o) && reducesOver(g.node(o), laneAxis)) return false;
    return readsInPass(g, computed, laneAxis, o, array, seen);
  });
}

}  // namespace

bool HeldRows::holds(NodeId array) const {
  return std::any_of(rows.begin(), rows.end(), [&](const HeldRow& r) { return r.array == array; });
}

int lanePassesReading(const Graph& g, const std::set<NodeId>& computed, const std::vector<NodeId>& outputs,
                      const std::string& laneAxis, NodeId array) {
  int passes = 0;
  for (NodeId id : computed) {
    const Node& n = g.node(id);
    if (!reducesOver(n, laneAxis)) continue;
    std::set<NodeId> seen{id};
    if (std::any_of(n.operands.begin(), n.operands.end(),
                    [&](NodeId o) { return readsInPass(g, computed, laneAxis, o, array, seen); }))
      ++passes;
  }
  std::set<NodeId> seen;
  for (NodeId o : outputs)
    if (g.node(o).type.has(laneAxis) && !reducesOver(g.node(o), laneAxis) &&
        readsInPass(g, computed, laneAxis, o, array, seen)) {
      ++passes;
      break;
    }
  return passes;
}

HeldRows heldRows(const Graph& g, const std::set<NodeId>& computed, const std::vector<NodeId>& outputs,
                  const std::vector<NodeId>& rows, const std::string& laneAxis, int lanes, bool vectorised,
                  const std::function<int64_t(NodeId)>& elementBytes) {
  HeldRows out;
  if (laneAxis.empty() || rows.empty() || lanes <= 0) return out;
  const int64_t extent = g.node(rows.front()).type.axes.back().size;
  const int64_t perChunk = vectorised ? 8 * lanes : lanes;
  out.chunks = (extent + perChunk - 1) / perChunk;
  std::vector<HeldRow> candidates;
  for (NodeId array : rows) {
    const int64_t bytes = elementBytes(array);
    if (bytes != 2 && bytes != 4) continue;
    const int passes = lanePassesReading(g, computed, outputs, laneAxis, array);
    if (passes < 2) continue;
    const int64_t perChunkRegisters = !vectorised ? 1 : bytes == 2 ? 4 : 8;
    candidates.push_back({array, passes, out.chunks * perChunkRegisters});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const HeldRow& a, const HeldRow& b) { return a.passes > b.passes; });
  for (const HeldRow& row : candidates)
    if (out.registers + row.registers <= kHeldRowRegisters) {
      out.rows.push_back(row);
      out.registers += row.registers;
    }
  if (out.rows.empty()) return {};
  out.axis = laneAxis;
  out.extent = extent;
  out.vectorised = vectorised;
  return out;
}

}  // namespace llmc
