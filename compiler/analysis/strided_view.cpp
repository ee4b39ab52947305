#include "analysis/strided_view.h"

#include <fmt/format.h>

namespace llmc {

std::optional<AffineLayout> layoutThroughViews(const Graph& g, NodeId id, const std::set<NodeId>& computed,
                                               const std::set<NodeId>& stored, const std::vector<std::string>& names,
                                               std::string& why) {
  const Node& n = g.node(id);
  if (stored.count(id) && !computed.count(id)) {
    AffineLayout l;
    l.array = id;
    int64_t stride = 1;
    for (size_t i = n.type.axes.size(); i-- > 0;) {
      l.strides[n.type.axes[i].name] = stride;
      stride *= n.type.axes[i].size;
    }
    return l;
  }
  auto viewed = [&]() { return layoutThroughViews(g, n.operands[0], computed, stored, names, why); };
  auto sizeIn = [&](NodeId node, const std::string& axis) { return g.node(node).type.find(axis)->size; };
  auto nameOf = [&](NodeId node) {
    return static_cast<size_t>(node) < names.size() ? names[static_cast<size_t>(node)] : std::string("a value");
  };
  std::optional<AffineLayout> l;
  switch (n.op) {
    case Op::Cast:
    case Op::Transpose:
    case Op::StopGradient:
      return viewed();
    case Op::Rename:
      if (!(l = viewed())) return l;
      {
        const int64_t s = l->strides.at(n.axes[0]);
        l->strides.erase(n.axes[0]);
        l->strides[n.newAxes[0]] = s;
      }
      return l;
    case Op::Split:
      if (!(l = viewed())) return l;
      {
        const int64_t whole = l->strides.at(n.axes[0]);
        l->strides.erase(n.axes[0]);
        int64_t inner = 1;
        for (size_t i = n.newAxes.size(); i-- > 0;) {
          l->strides[n.newAxes[i]] = whole * inner;
          inner *= sizeIn(id, n.newAxes[i]);
        }
      }
      return l;
    case Op::Merge:
      if (!(l = viewed())) return l;
      {
        const int64_t innermost = l->strides.at(n.axes.back());
        int64_t inner = 1;
        for (size_t i = n.axes.size(); i-- > 0;) {
          const int64_t size = sizeIn(n.operands[0], n.axes[i]);
          if (size > 1 && l->strides.at(n.axes[i]) != innermost * inner) {
            why = fmt::format("{} merges axes that are not nested in memory", nameOf(id));
            return std::nullopt;
          }
          inner *= size;
          l->strides.erase(n.axes[i]);
        }
        l->strides[n.newAxes[0]] = innermost;
      }
      return l;
    case Op::Index:
      if (!(l = viewed())) return l;
      l->offset += n.lo * l->strides.at(n.axes[0]);
      l->strides.erase(n.axes[0]);
      return l;
    case Op::Slice:
      if (!(l = viewed())) return l;
      {
        const int64_t s = l->strides.at(n.axes[0]);
        l->offset += n.lo * s;
        l->strides.erase(n.axes[0]);
        l->strides[n.newAxes[0]] = s;
      }
      return l;
    case Op::Broadcast:
      if (!(l = viewed())) return l;
      for (const Axis& a : n.type.axes) l->strides.emplace(a.name, 0);
      return l;
    default:
      why = fmt::format("{} ({}) between a stored array and the contraction is not a strided view",
                        nameOf(id), opName(n.op));
      return std::nullopt;
  }
}

bool sameBytesAs(const Graph& g, NodeId view, NodeId array, const std::set<NodeId>& stored) {
  std::string why;
  const std::optional<AffineLayout> layout = layoutThroughViews(g, view, {}, stored, {}, why);
  const Type& type = g.node(view).type;
  if (!layout || layout->array != array || layout->offset != 0 || g.node(array).type.elementCount() != type.elementCount())
    return false;
  int64_t dense = 1;
  for (auto a = type.axes.rbegin(); a != type.axes.rend(); ++a) {
    if (a->size > 1 && layout->strides.at(a->name) != dense) return false;
    dense *= a->size;
  }
  return true;
}

}  // namespace llmc
