#include "codegen/concat_parts.h"

#include <map>
#include <optional>

#include "analysis/strided_view.h"
#include "planning/fusion.h"

namespace llmc {

namespace {

// The stored array that `part` is a view of, where nothing but the next view
// reads the array and each view between; -1 otherwise.
NodeId arrayUnder(const Graph& g, NodeId part, const std::set<NodeId>& stored, const std::vector<int>& readers) {
  NodeId at = part;
  while (!stored.count(at)) {
    const Node& n = g.node(at);
    if (!isView(n) || n.operands.size() != 1 || readers[static_cast<size_t>(at)] != 1) return -1;
    at = n.operands[0];
  }
  return readers[static_cast<size_t>(at)] == 1 ? at : -1;
}

std::vector<int64_t> rowMajorStrides(const Type& t) {
  std::vector<int64_t> strides(t.axes.size(), 0);
  int64_t stride = 1;
  for (size_t i = t.axes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= t.axes[i].size;
  }
  return strides;
}

// Where the stored array under `part` lies in the concatenation, its first
// element at `offset`: each axis of the part (the joined one named `partAxis`
// there, `joined` in the concatenation) must be one axis of the array, of as
// many positions, at that axis' row-major stride. `holder`: the
// concatenation's strides by axis name.
std::optional<PlacedPart> placement(const Graph& g, NodeId part, NodeId array, int64_t offset,
                                    const std::map<std::string, int64_t>& holder, const std::string& partAxis,
                                    const std::string& joined, const std::set<NodeId>& stored) {
  std::string why;
  const std::optional<AffineLayout> layout = layoutThroughViews(g, part, {}, stored, {}, why);
  const Type& viewed = g.node(part).type;
  const Type& own = g.node(array).type;
  if (!layout || layout->array != array || layout->offset != 0 || own.elementCount() != viewed.elementCount())
    return std::nullopt;
  const std::vector<int64_t> ownStrides = rowMajorStrides(own);
  PlacedPart placed{array, offset, std::vector<int64_t>(own.axes.size(), 0), true};
  std::vector<bool> taken(own.axes.size(), false);
  for (const Axis& a : viewed.axes) {
    if (a.size == 1) continue;
    const auto stride = layout->strides.find(a.name);
    if (stride == layout->strides.end()) return std::nullopt;
    size_t j = 0;
    while (j < own.axes.size() && (taken[j] || own.axes[j].size != a.size || ownStrides[j] != stride->second)) ++j;
    if (j == own.axes.size()) return std::nullopt;
    taken[j] = true;
    placed.strides[j] = holder.at(a.name == partAxis ? joined : a.name);
  }
  // 16-byte accesses along the innermost axis: contiguous there, aligned.
  if (offset % 8 != 0) return std::nullopt;
  for (size_t j = 0; j < own.axes.size(); ++j) {
    if (own.axes[j].size == 1) continue;
    if (!taken[j]) return std::nullopt;
    const bool innermost = j + 1 == own.axes.size();
    if (innermost ? placed.strides[j] != 1 : placed.strides[j] % 8 != 0) return std::nullopt;
    if (placed.strides[j] != ownStrides[j]) placed.contiguous = false;
  }
  return placed;
}

}  // namespace

std::vector<PlacedPart> partsInPlace(const Graph& g, NodeId concat, const std::set<NodeId>& stored,
                                     const std::set<NodeId>& excluded, const std::vector<int>& readers) {
  const Node& n = g.node(concat);
  if (n.op != Op::Concat || n.axes.size() != 1 || n.newAxes.size() != 1 || !n.type.find(n.newAxes[0])) return {};
  const std::string &partAxis = n.axes[0], &joined = n.newAxes[0];
  std::map<std::string, int64_t> holder;
  const std::vector<int64_t> strides = rowMajorStrides(n.type);
  for (size_t i = 0; i < n.type.axes.size(); ++i) holder[n.type.axes[i].name] = strides[i];

  std::vector<PlacedPart> parts;
  std::set<NodeId> arrays;
  int64_t start = 0;  // along the joined axis
  for (NodeId part : n.operands) {
    const Type& t = g.node(part).type;
    // The concatenation's axes, the joined one under the parts' name.
    if (t.dtype != n.type.dtype || t.axes.size() != n.type.axes.size() || !t.find(partAxis)) return {};
    for (const Axis& a : t.axes) {
      const Axis* there = n.type.find(a.name == partAxis ? joined : a.name);
      if (!there || (a.name != partAxis && there->size != a.size)) return {};
    }
    const NodeId array = arrayUnder(g, part, stored, readers);
    if (array < 0 || g.node(array).op == Op::Input || excluded.count(array) || !arrays.insert(array).second) return {};
    for (const GraphOutput& o : g.outputs)
      if (o.node == array) return {};
    const std::optional<PlacedPart> placed =
        placement(g, part, array, start * holder.at(joined), holder, partAxis, joined, stored);
    if (!placed) return {};
    parts.push_back(*placed);
    start += t.find(partAxis)->size;
  }
  return parts;
}

}  // namespace llmc
