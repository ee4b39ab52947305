#include "planning/transposed_reads.h"

#include <algorithm>

#include "planning/fusion.h"

namespace llmc {

namespace {

// Elements a row of the tile along `last` takes, padded as the header says.
int64_t rowPitch(int64_t lastTile, int64_t elementBytes, int64_t rowsBetween) {
  int64_t words = (lastTile * elementBytes + 3) / 4;
  if (rowsBetween % 2 == 1 && words % 2 == 0) ++words;
  return words * 4 / elementBytes;
}

}  // namespace

int64_t transposedTileBytes(const std::vector<TransposedRead>& reads) {
  int64_t bytes = 0;
  for (const TransposedRead& r : reads) bytes += r.tileElements * r.elementBytes;
  return bytes;
}

std::vector<TransposedRead> transposedReads(const Graph& g, const std::set<NodeId>& computed,
                                            const std::set<NodeId>& stored, const std::vector<NodeId>& outputs,
                                            const std::vector<Axis>& groupAxes,
                                            const std::map<std::string, int64_t>& tiles,
                                            const std::function<int64_t(NodeId)>& elementBytes) {
  std::vector<TransposedRead> reads;
  if (groupAxes.empty()) return reads;
  const std::string& threads = groupAxes.back().name;
  auto layoutOf = [&](NodeId id) {
    std::string why;  // not reported here
    return layoutThroughViews(g, id, computed, stored, {}, why);
  };
  // What the launch reads: the operands of what it computes (a view's
  // operand is read where the view is; a gather's table and a scatter's
  // target at positions the values choose), and the outputs that are views
  // (a graph output copied transposed).
  std::vector<NodeId> candidates;
  for (NodeId id : computed) {
    const Node& consumer = g.node(id);
    if (isView(consumer) || consumer.op == Op::Gather || consumer.op == Op::ScatterAdd) continue;
    candidates.insert(candidates.end(), consumer.operands.begin(), consumer.operands.end());
  }
  for (NodeId o : outputs)
    if (isView(g.node(o))) candidates.push_back(o);
  std::set<NodeId> seen;
  {
    for (NodeId o : candidates) {
      const Node& read = g.node(o);
      // (A value made of constants and positions is no view of a stored array: no layout.)
      if (read.type.axes.size() < 2 || !read.type.has(threads) || !isFloat(read.type.dtype) || !seen.insert(o).second)
        continue;
      TransposedRead r;
      for (const Axis& a : groupAxes)
        if (read.type.has(a.name)) r.axes.push_back(a);
      if (r.axes.size() != read.type.axes.size()) continue;
      std::optional<AffineLayout> layout = layoutOf(o);
      if (!layout || g.node(layout->array).type.dtype != read.type.dtype) continue;
      auto along = layout->strides.find(threads);
      if (along == layout->strides.end() || along->second == 0 || along->second == 1) continue;
      // The contiguous axis, and the tiles of the axes between it and the threads'.
      int64_t between = 1;
      for (size_t i = r.axes.size() - 1; i-- > 0;) {
        if (layout->strides.at(r.axes[i].name) == 1) {
          r.contiguous = r.axes[i].name;
          break;
        }
        between *= tiles.at(r.axes[i].name);
      }
      if (r.contiguous.empty() || tiles.at(r.contiguous) < 8) continue;
      r.value = o;
      r.elementBytes = elementBytes(layout->array);
      if (r.elementBytes != 2 && r.elementBytes != 4) continue;  // bf16 or f32 storage
      r.layout = std::move(*layout);
      r.pitch = rowPitch(tiles.at(threads), r.elementBytes, between);
      r.tileElements = r.pitch;
      for (size_t i = 0; i + 1 < r.axes.size(); ++i) r.tileElements *= tiles.at(r.axes[i].name);
      reads.push_back(std::move(r));
    }
  }
  return reads;
}

}  // namespace llmc
