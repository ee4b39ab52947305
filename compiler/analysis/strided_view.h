// Strided views: where each axis of a value lies in the stored array it is a
// view of (split, merge, rename, index, slice, transpose, broadcast, cast, read
// through), as an element offset and one stride per axis. The tensor-core
// launches (GEMM operands, streamed operand tiles) address their operands so.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

// element offset = offset + sum of position * stride (stride 0: broadcast).
struct AffineLayout {
  NodeId array = -1;
  int64_t offset = 0;
  std::map<std::string, int64_t> strides;
};

// The layout of `id` through the views between it and a stored array (a value
// in `stored` that the launch does not compute), or nullopt with the reason in
// `why` (a concat picks one of several arrays; a merge of axes that are not
// nested in memory is not one stride). `names`: printed names, for `why`;
// empty where the caller does not report it (the cost model, which asks for
// every partition it prices: a name a node of a large graph costs more than
// the layout).
std::optional<AffineLayout> layoutThroughViews(const Graph& g, NodeId id, const std::set<NodeId>& computed,
                                               const std::set<NodeId>& stored, const std::vector<std::string>& names,
                                               std::string& why);

// Whether the elements of `view` lie in the stored array `array` exactly as
// in a row-major array of the view's own axes: through views only, from
// element 0, as many elements, each axis of more than one position at its
// row-major stride. The view's bytes are then the array's (an output that
// needs no copy of its own).
bool sameBytesAs(const Graph& g, NodeId view, NodeId array, const std::set<NodeId>& stored);

}  // namespace llmc
