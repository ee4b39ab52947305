// Node-by-node rewriting for the IR passes that replace a node by a few new
// ones (one-hot gathers, masked sums, reassociation): the graph is copied in
// order, and where the pass has a replacement for a node, the nodes it builds
// from the copies of the operands stand for it.
#pragma once

#include <functional>
#include <optional>

#include "ir/graph_builder.h"
#include "ir/ir.h"

namespace llmc {

// A node's copy in the graph being built.
using CopiedNode = std::function<NodeId(NodeId original)>;

// Builds the replacement of `node` with `builder` (operands through
// `copied`) and returns the node that stands for it; nullopt keeps `node`.
// The rewrite must decide before it builds anything.
using NodeRewrite = std::function<std::optional<NodeId>(const Node& node, GraphBuilder& builder, const CopiedNode& copied)>;

// The graph with every node the rewrite replaces replaced. The new nodes take
// the replaced node's pass (forward or backward), source location and name.
// Not canonical: what the replaced nodes read may be dead.
Graph rewriteNodes(const Graph& graph, const NodeRewrite& rewrite);

}  // namespace llmc
