#include "planning/staged_rows.h"

#include <algorithm>

#include "planning/fusion.h"

namespace llmc {

namespace {

constexpr int64_t kLaneAxisMin = 32;  // the CUDA writer's

int64_t alignUp(int64_t bytes, int64_t to) { return (bytes + to - 1) / to * to; }

// Whether `type` is a point's own row along `axis`: `axis` innermost, every
// other axis a group axis (or of one position), at least one of them
// longer than one (a row every point reads alike, a layernorm's weights,
// stays in L1 as it is).
bool rowAlong(const Type& type, const std::string& axis, const std::set<std::string>& group) {
  if (type.axes.empty() || type.axes.back().name != axis) return false;
  return std::all_of(type.axes.begin(), type.axes.end() - 1,
                     [&](const Axis& a) { return a.size == 1 || group.count(a.name); }) &&
         std::any_of(type.axes.begin(), type.axes.end() - 1, [](const Axis& a) { return a.size > 1; });
}

}  // namespace

std::string heldRowAxis(const Graph& g, const std::set<NodeId>& computed, const std::vector<Axis>& groupAxes,
                        const std::set<std::string>& splitAxes) {
  std::set<std::string> group;
  for (const Axis& a : groupAxes) group.insert(a.name);
  std::string best;
  int64_t bestExtent = kLaneAxisMin - 1;
  for (NodeId id : computed) {
    const Node& n = g.node(id);
    if (n.op != Op::Reduce && n.op != Op::Contract) continue;
    for (const std::string& a : n.axes) {
      const Axis* axis = g.node(n.operands[0]).type.find(a);
      if (!axis) continue;
      if (!group.count(a) && !splitAxes.count(a) && axis->size > bestExtent) best = a, bestExtent = axis->size;
    }
  }
  return best;
}

std::vector<NodeId> pointRowArrays(const Graph& g, const std::set<NodeId>& computed, const std::set<NodeId>& stored,
                                   const std::vector<Axis>& groupAxes, const std::string& axis,
                                   const std::function<bool(NodeId)>& rowMajor) {
  std::vector<NodeId> out;
  if (axis.empty()) return out;
  std::set<std::string> group;
  for (const Axis& a : groupAxes) group.insert(a.name);
  std::set<NodeId> seen;
  for (NodeId id : computed) {
    const Node& reader = g.node(id);
    if (isView(reader) || reader.op == Op::Gather || reader.op == Op::ScatterAdd) continue;
    for (NodeId o : reader.operands) {
      // Read directly, or through renamings of its innermost axis to `axis`
      // (a row the fuser joined under another name: the residual's branch).
      std::string along = axis;
      while (!stored.count(o) && !computed.count(o) && g.node(o).op == Op::Rename) {
        if (g.node(o).newAxes[0] == along) along = g.node(o).axes[0];
        o = g.node(o).operands[0];
      }
      if (!stored.count(o) || computed.count(o) || seen.count(o)) continue;
      const Type& type = g.node(o).type;
      if (isFloat(type.dtype) && rowAlong(type, along, group) && rowMajor(o)) {
        seen.insert(o);
        out.push_back(o);
      }
    }
  }
  return out;
}

StagedRows stagedRows(const Graph& g, const std::set<NodeId>& computed, const std::set<NodeId>& stored,
                      const std::vector<Axis>& groupAxes, const std::string& heldAxis,
                      const std::function<int64_t(NodeId)>& elementBytes,
                      const std::function<bool(NodeId)>& rowMajor, int64_t maxBytes) {
  StagedRows out;
  for (NodeId o : pointRowArrays(g, computed, stored, groupAxes, heldAxis, rowMajor)) {
    const int64_t bytes = elementBytes(o);
    if (bytes <= 0) continue;
    out.extent = g.node(o).type.axes.back().size;
    out.rows.push_back({o, bytes, out.bytes});
    // A row of a length not a whole number of 16-byte words starts where
    // it lies in GMEM modulo 16 bytes (the writer copies its words whole):
    // 16 bytes more.
    const int64_t rowBytes = out.extent * bytes;
    out.bytes = alignUp(out.bytes + rowBytes + (rowBytes % 16 == 0 ? 0 : 16), 16);
  }
  if (out.bytes <= kStagedRowsAbove || out.bytes > maxBytes) return {};
  out.axis = heldAxis;
  return out;
}

int64_t rowBytesAlong(const Graph& g, const std::set<NodeId>& members, const std::string& axis,
                      const std::function<int64_t(NodeId)>& elementBytes) {
  int64_t bytes = 0;
  std::set<NodeId> seen;
  for (NodeId m : members)
    for (NodeId o : g.node(m).operands) {
      const Node& operand = g.node(o);
      if (members.count(o) || !seen.insert(o).second || operand.type.axes.empty() ||
          operand.type.axes.back().name != axis || operand.op == Op::Constant || operand.op == Op::Pos)
        continue;
      if (const int64_t each = elementBytes(o); each > 0) bytes = alignUp(bytes + operand.type.axes.back().size * each, 16);
    }
  return bytes;
}

}  // namespace llmc
