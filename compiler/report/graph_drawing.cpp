#include "report/graph_drawing.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <set>

#include "ir/print.h"
#include "planning/fusion.h"

namespace llmc {

namespace {

// A DOT string literal.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string joined(const std::vector<std::string>& names, const char* separator = " ") {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

// The axes a wire carries: the value's, by name, in its order.
std::string wireAxes(const Type& type) {
  std::vector<std::string> names;
  for (const Axis& a : type.axes) names.push_back(a.name);
  return names.empty() ? std::string("scalar") : joined(names);
}

const char* binarySymbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    default: return binaryName(op);
  }
}

// What a box does, in the language's words.
std::string operation(const Node& n) {
  const std::string axes = joined(n.axes), created = joined(n.newAxes);
  switch (n.op) {
    case Op::Input: return n.isParam ? "param" : "input";
    case Op::Constant: return fmt::format("{:g}", n.value);
    case Op::Pos: return fmt::format("pos({})", axes);
    case Op::Unary: return unaryName(n.unary);
    case Op::Binary: return binarySymbol(n.binary);
    case Op::Compare: return compareSymbol(n.compare);
    case Op::Select: return "where";
    case Op::Cast: return fmt::format("cast to {}", dtypeName(n.type.dtype));
    case Op::Reduce: return fmt::format("{} over {}", reduceName(n.reduce), axes);
    case Op::Contract: return fmt::format("contract over {}", axes);
    case Op::Gather: return fmt::format("gather along {}", axes);
    case Op::Split: return fmt::format("split {} -> {}", axes, created);
    case Op::Merge: return fmt::format("merge {} -> {}", axes, created);
    case Op::Slice: return fmt::format("slice {}[{}:{}] -> {}", axes, n.lo, n.hi, created);
    case Op::Concat: return fmt::format("concat {} -> {}", axes, created);
    case Op::Rename: return fmt::format("rename {} -> {}", axes, created);
    case Op::Index: return fmt::format("[{}={}]", axes, n.lo);
    case Op::Transpose: return "transpose";
    case Op::Broadcast: return fmt::format("broadcast {}", created);
    case Op::ScatterAdd: return fmt::format("scatter_add into {}", created);
    case Op::StopGradient: return "stop_gradient";
    case Op::Scan: return fmt::format("{} scan along {} -> {}{}{}{}", scanOperatorName(n),
                                      axes, created, n.lo ? ", exclusive" : "", n.hi ? ", reverse" : "",
                                      n.lagged ? ", lagged" : "");
  }
  return opName(n.op);
}

// A box's statement: its shape and label, its tooltip (the value's name,
// type, source location and composite path); `fill` the box's colour (else
// white, or grey for the backward pass's boxes).
std::string box(const Node& n, const std::string& name, const char* fill = nullptr) {
  std::string tooltip = fmt::format("{}: {}", name, n.type.str());
  if (n.loc.valid()) tooltip += " at " + n.loc.str();
  if (!n.origin.empty()) tooltip += " in " + joined(n.origin, "/");
  if (n.adjoint) tooltip += " (backward)";
  std::string attributes;
  if (n.op == Op::Input) {
    attributes = fmt::format("shape=ellipse, label={}", quoted(fmt::format("{} {}\n{}", operation(n), name, n.type.str())));
  } else if (n.op == Op::Constant || n.op == Op::Pos) {
    attributes = fmt::format("shape=plaintext, label={}", quoted(operation(n)));
  } else {
    attributes = fmt::format("shape=box, label={}", quoted(fmt::format("{}\n{}", operation(n), name)));
    if (!fill && n.adjoint) fill = "#eeeeee";
    // A view's box is dashed: no kernel computes it (planning/fusion.h).
    const std::string style = fmt::format("{}{}", fill ? "filled" : "", isView(n) ? (fill ? ",dashed" : "dashed") : "");
    if (!style.empty()) attributes += fmt::format(", style={}", quoted(style));
    if (fill) attributes += fmt::format(", fillcolor={}", quoted(fill));
  }
  return fmt::format("n{} [{}, tooltip={}];", n.id, attributes, quoted(tooltip));
}

// The wires: each operand to its user, labelled with the operand's axes; the
// outputs as ovals of their own. `endOf` names the drawn box a node is (its
// own, or a collapsed call's); wires inside one box are left out, and the same
// wire between two boxes drawn once.
std::string wires(const Graph& g, const std::function<std::string(NodeId)>& endOf) {
  std::string out;
  std::set<std::string> drawn;
  auto wire = [&](const std::string& from, const std::string& to, const std::string& attributes) {
    const std::string line = fmt::format("  {} -> {}{};\n", from, to, attributes);
    if (from != to && drawn.insert(line).second) out += line;
  };
  for (const Node& n : g.nodes)
    for (NodeId o : n.operands) {
      const Node& from = g.node(o);
      wire(endOf(o), endOf(n.id), from.op == Op::Constant ? "" : fmt::format(" [label={}]", quoted(wireAxes(from.type))));
    }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const GraphOutput& o = g.outputs[k];
    out += fmt::format("  out{} [shape=ellipse, peripheries=2, label={}];\n", k,
                       quoted(fmt::format("output {}\n{}", o.name, g.node(o.node).type.str())));
    wire(endOf(o.node), fmt::format("out{}", k), fmt::format(" [label={}]", quoted(wireAxes(g.node(o.node).type))));
  }
  return out;
}

std::string ownBox(NodeId id) { return fmt::format("n{}", id); }

std::string header(const Graph& g) {
  return fmt::format("digraph {} {{\n  rankdir=TB;\n  graph [fontname=\"Helvetica\", fontsize=11];\n  node [fontname=\"Helvetica\", fontsize=10];\n"
                     "  edge [fontname=\"Helvetica\", fontsize=8];\n",
                     quoted(g.name));
}

// A call of a composite: its boxes and the calls it makes, in order.
struct Frame {
  std::string label;
  std::vector<NodeId> nodes;
  std::vector<size_t> children;
};

// The frames of the composites' calls: consecutive nodes under one call path
// are one call, nested as the path is. A path names the composites, not the
// calls: of two calls in a row (RoPE's rotation of q, then of k) the second
// starts where the forward pass's boxes go back to an earlier line of the
// callee's body (the backward pass's run in reverse, and are not cut so).
std::vector<Frame> callFrames(const Graph& g) {
  std::vector<Frame> frames(1);  // the diagram itself
  std::vector<size_t> open = {0};
  std::vector<std::string> path;
  const SourceLoc* last = nullptr;  // the innermost open call's latest box
  for (const Node& n : g.nodes) {
    size_t common = 0;
    while (common < path.size() && common < n.origin.size() && path[common] == n.origin[common]) ++common;
    const bool again = common == path.size() && common == n.origin.size() && common > 0 && !n.adjoint && last &&
                       n.loc.valid() && last->file == n.loc.file && n.loc.line < last->line;
    if (again) --common;
    path.resize(common);
    open.resize(common + 1);
    for (size_t k = common; k < n.origin.size(); ++k) {
      frames.push_back({n.origin[k], {}, {}});
      frames[open.back()].children.push_back(frames.size() - 1);
      open.push_back(frames.size() - 1);
      path.push_back(n.origin[k]);
    }
    frames[open.back()].nodes.push_back(n.id);
    if (n.loc.valid() && !n.adjoint) last = &n.loc;
  }
  return frames;
}

// A frame and those inside it; below `collapseBelow` frames deep a call is
// one box (box3d, labelled with the composite), its nodes recorded in `endOf`.
void printFrame(const Graph& g, const std::vector<Frame>& frames, size_t f, const std::vector<std::string>& names,
                int depth, int collapseBelow, std::map<NodeId, std::string>& collapsed, std::string& out) {
  const std::string indent(static_cast<size_t>(2 * depth), ' ');
  const Frame& frame = frames[f];
  if (f > 0 && collapseBelow >= 0 && depth > collapseBelow) {
    const std::string box = fmt::format("call{}", f);
    out += fmt::format("{}{} [shape=box3d, label={}];\n", indent, box, quoted(frame.label));
    std::vector<size_t> inside = {f};
    while (!inside.empty()) {
      const Frame& in = frames[inside.back()];
      inside.pop_back();
      for (NodeId id : in.nodes) collapsed[id] = box;
      inside.insert(inside.end(), in.children.begin(), in.children.end());
    }
    return;
  }
  if (f > 0) out += fmt::format("{}subgraph cluster_call{} {{\n{}  label={};\n", indent, f, indent, quoted(frame.label));
  // Boxes and calls interleave in the graph's order; DOT keeps them apart.
  for (NodeId id : frame.nodes) out += fmt::format("{}  {}\n", indent, box(g.node(id), names[static_cast<size_t>(id)]));
  for (size_t child : frame.children) printFrame(g, frames, child, names, depth + 1, collapseBelow, collapsed, out);
  if (f > 0) out += indent + "}\n";
}

const char* const kKernelColours[] = {"#fde0dd", "#e0ecf4", "#e5f5e0", "#fff7bc", "#efedf5",
                                     "#fee6ce", "#deebf7", "#f7fcb9", "#e7e1ef", "#d9f0d3"};

std::string kernelLabel(const Graph& graph, const PlannedKernel& pk) {
  const KernelSource source = kernelSource(graph, pk);
  // The tiles' memory levels: shared memory a block, registers a thread (the accumulators and the largest
  // intermediate tile), as the performance table prices them.
  const std::string onChip = fmt::format("SMEM {:.1f} KiB/block, REG {:.0f} B/thread",
                                         pk.cost.level("SMEM").memoryBytes / 1024, pk.cost.level("REG").memoryBytes);
  return fmt::format("{}\n{}\n{}\n{:.2f} us, bound by {}{}\n{}{}", pk.kernel.name, partitionText(graph, pk), onChip,
                     pk.cost.predicted * 1e6, pk.cost.bottleneck, pk.cost.engine.empty() ? "" : "\n" + pk.cost.engine,
                     source.pass, source.path.empty() ? "" : " in " + source.path);
}

// The first kernel that computes each box.
std::map<NodeId, size_t> kernelOfBoxes(const std::vector<PlannedKernel>& kernels) {
  std::map<NodeId, size_t> owner;
  for (size_t k = 0; k < kernels.size(); ++k)
    for (NodeId id : kernels[k].kernel.nodes) owner.emplace(id, k);
  return owner;
}

// Kernels grouped by the first calls of their composite path: a frame per
// call, nested, each kernel a box (GPT-2's step at depth 3: a frame a layer).
struct PathFrame {
  std::map<std::string, PathFrame> calls;
  std::vector<size_t> kernels;
};

void printPathFrame(const Graph& graph, const std::vector<PlannedKernel>& kernels, const PathFrame& frame, int depth,
                    int& clusters, std::string& out) {
  const std::string indent(static_cast<size_t>(2 * depth + 2), ' ');
  for (size_t k : frame.kernels)
    out += fmt::format("{}kernel{} [shape=box, style=filled, fillcolor=\"{}\", label={}];\n", indent, k,
                       kKernelColours[k % std::size(kKernelColours)], quoted(kernelLabel(graph, kernels[k])));
  for (const auto& [call, inside] : frame.calls) {
    out += fmt::format("{}subgraph cluster_path{} {{\n{}  label={};\n", indent, clusters++, indent, quoted(call));
    printPathFrame(graph, kernels, inside, depth + 1, clusters, out);
    out += indent + "}\n";
  }
}

// The plan with each kernel one box inside frames of its first `depth`
// calls, a wire from a kernel to each that reads what it makes (through
// views); graph inputs and outputs left out.
std::string drawCollapsedPlanDot(const Graph& graph, const std::vector<PlannedKernel>& kernels, int depth) {
  const std::map<NodeId, size_t> owner = kernelOfBoxes(kernels);
  PathFrame top;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const std::vector<std::string> calls = kernelSource(graph, kernels[k]).calls;
    PathFrame* frame = &top;
    for (size_t level = 0; level < calls.size() && static_cast<int>(level) < depth; ++level)
      frame = &frame->calls[calls[level]];
    frame->kernels.push_back(k);
  }
  std::string out = header(graph);
  int clusters = 0;
  printPathFrame(graph, kernels, top, 0, clusters, out);
  std::set<std::pair<size_t, size_t>> drawn;
  for (size_t k = 0; k < kernels.size(); ++k)
    for (NodeId id : kernels[k].kernel.nodes) {
      std::vector<NodeId> reads(graph.node(id).operands.begin(), graph.node(id).operands.end());
      std::set<NodeId> seen;
      while (!reads.empty()) {
        const NodeId read = reads.back();
        reads.pop_back();
        if (!seen.insert(read).second) continue;
        const auto made = owner.find(read);
        if (made == owner.end()) {  // a view or constant no kernel computes: what it reads
          for (NodeId o : graph.node(read).operands) reads.push_back(o);
          continue;
        }
        if (made->second != k && drawn.insert({made->second, k}).second)
          out += fmt::format("  kernel{} -> kernel{};\n", made->second, k);
      }
    }
  return out + "}\n";
}

}  // namespace

std::string drawDiagramDot(const Graph& graph, int depth) {
  const std::vector<std::string> names = printedNames(graph);
  std::string out = header(graph);
  std::map<NodeId, std::string> collapsed;
  printFrame(graph, callFrames(graph), 0, names, 0, depth, collapsed, out);
  return out + wires(graph, [&](NodeId id) {
           auto c = collapsed.find(id);
           return c == collapsed.end() ? ownBox(id) : c->second;
         }) + "}\n";
}

std::string drawPlanDot(const Graph& graph, const std::vector<PlannedKernel>& kernels, int depth) {
  if (depth >= 0) return drawCollapsedPlanDot(graph, kernels, depth);
  const std::vector<std::string> names = printedNames(graph);
  const std::map<NodeId, size_t> owner = kernelOfBoxes(kernels);  // the first kernel that computes a box
  std::string out = header(graph);
  for (const Node& n : graph.nodes)
    if (!owner.count(n.id)) out += "  " + box(n, names[static_cast<size_t>(n.id)]) + "\n";
  for (size_t k = 0; k < kernels.size(); ++k) {
    const PlannedKernel& pk = kernels[k];
    out += fmt::format("  subgraph cluster_kernel{} {{\n    label={};\n    style=\"filled\";\n    fillcolor=\"{}\";\n", k,
                       quoted(kernelLabel(graph, pk)), kKernelColours[k % std::size(kKernelColours)]);
    for (NodeId id : pk.kernel.nodes)
      if (owner.at(id) == k)
        out += "    " + box(graph.node(id), names[static_cast<size_t>(id)], "white") + "\n";
    out += "  }\n";
  }
  return out + wires(graph, ownBox) + "}\n";
}

}  // namespace llmc
