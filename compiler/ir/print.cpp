#include "ir/print.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

#include "frontend/builtins.h"

namespace llmc {

namespace {

bool isReservedWord(const std::string& s) {
  return s == "diagram" || s == "end" || s == "import" || s == "param" || s == "for" || s == "in" ||
         s == "inf" || s == "pi";
}

std::string sanitize(const std::string& name) {
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "v" + out;
  return out;
}

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::trunc(v) && std::abs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);  // the shortest text that reads back as the same double
}

// The name each scan operator (Node::combine) is printed under: its
// diagram's, numbered where two different operators share one.
using OperatorNames = std::map<const Graph*, std::string>;

OperatorNames operatorNames(const Graph& g) {
  OperatorNames names;
  std::map<std::string, const Graph*> byName;
  for (const Node& n : g.nodes) {
    if (!n.combine || names.count(n.combine.get())) continue;
    const Graph* op = n.combine.get();
    std::string name = sanitize(op->name);
    for (int k = 2; byName.count(name) && !structurallyEqual(*byName[name], *op); ++k)
      name = fmt::format("{}_{}", sanitize(op->name), k);
    byName.emplace(name, op);
    names[op] = name;
  }
  return names;
}

class Printer {
 public:
  Printer(const Graph& g, const PrintOptions& o, const OperatorNames* operators = nullptr)
      : g_(g), options_(o), operators_(operators) {
    nameNodes();
  }

  std::string run() {
    std::string out = fmt::format("diagram {}(", g_.name);
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      const Node& n = g_.node(g_.inputs[i]);
      out += fmt::format("{}{}{}: {}", i ? ", " : "", n.isParam ? "param " : "", names_[n.id], n.type.str());
    }
    out += ") -> ";
    if (g_.outputs.size() != 1) out += "(";
    for (size_t i = 0; i < g_.outputs.size(); ++i)
      out += fmt::format("{}{}: {}", i ? ", " : "", g_.outputs[i].name, g_.node(g_.outputs[i].node).type.str());
    if (g_.outputs.size() != 1) out += ")";
    out += "\n";
    for (const Node& n : g_.nodes) {
      if (n.op == Op::Input) continue;
      std::string line = fmt::format("  {}: {} = {}", names_[n.id], n.type.str(), expression(n));
      if (options_.comments) line = withComment(line, n);
      out += line + "\n";
    }
    for (const auto& o : g_.outputs)
      if (names_[o.node] != o.name) out += fmt::format("  {} = {}\n", o.name, names_[o.node]);
    return out + "end\n";
  }

 private:
  void nameNodes() { names_ = printedNames(g_); }

  std::string operand(const Node& n, size_t i) const { return names_[n.operands[i]]; }

  std::string expression(const Node& n) const {
    auto joinAxes = [](const std::vector<std::string>& axes, const char* sep) {
      std::string s;
      for (size_t i = 0; i < axes.size(); ++i) s += (i ? sep : "") + axes[i];
      return s;
    };
    switch (n.op) {
      case Op::Input: return "";
      case Op::Constant:  // a bare number cannot be a bool: write it as a cast
        return n.type.dtype == DType::Bool ? fmt::format("bool({})", number(n.value)) : number(n.value);
      case Op::Pos: return fmt::format("pos({})", n.axes[0]);
      case Op::Unary:
        if (n.unary == UnaryOp::Neg) return fmt::format("-{}", operand(n, 0));
        if (n.unary == UnaryOp::Not) return fmt::format("not {}", operand(n, 0));
        return fmt::format("{}({})", unaryName(n.unary), operand(n, 0));
      case Op::Binary: {
        static const char* kSymbol[] = {"+", "-", "*", "/"};
        auto k = static_cast<size_t>(n.binary);
        if (k < 4) return fmt::format("{} {} {}", operand(n, 0), kSymbol[k], operand(n, 1));
        if (isLogical(n.binary)) return fmt::format("{} {} {}", operand(n, 0), binaryName(n.binary), operand(n, 1));
        return fmt::format("{}({}, {})", binaryName(n.binary), operand(n, 0), operand(n, 1));
      }
      case Op::Compare:
        return fmt::format("{} {} {}", operand(n, 0), compareSymbol(n.compare), operand(n, 1));
      case Op::Select: return fmt::format("where({}, {}, {})", operand(n, 0), operand(n, 1), operand(n, 2));
      case Op::Cast: return fmt::format("{}({})", dtypeName(n.type.dtype), operand(n, 0));
      case Op::Reduce: return fmt::format("{}({}, {})", reduceName(n.reduce), operand(n, 0), joinAxes(n.axes, ", "));
      case Op::Scan:
        // A linear scan's coefficient first, as the language writes it.
        return fmt::format("scan({}, {}{}, {} -> {}{}{}{})",
                           n.combine && operators_ ? operators_->at(n.combine.get())
                           : isLinearScan(n)       ? "linear"
                                                   : reduceName(n.reduce),
                           isLinearScan(n) ? operand(n, 1) + ", " : "", operand(n, 0), n.axes[0], n.newAxes[0],
                           n.lo ? ", exclusive" : "", n.hi ? ", reverse" : "",
                           n.lagged ? ", lagged" : n.combine && n.lo ? ", " + number(n.value) : "");
      case Op::Contract:
        return fmt::format("contract({}, {}, {})", operand(n, 0), operand(n, 1), joinAxes(n.axes, ", "));
      case Op::Gather: return fmt::format("gather({}, {}, {})", operand(n, 0), operand(n, 1), n.axes[0]);
      case Op::Split: {
        std::string parts;
        for (const auto& a : n.newAxes) parts += fmt::format(" {}:{}", a, n.type.find(a)->size);
        return fmt::format("split({}, {} ->{})", operand(n, 0), n.axes[0], parts);
      }
      case Op::Merge:
        return fmt::format("merge({}, {} -> {})", operand(n, 0), joinAxes(n.axes, " "), n.newAxes[0]);
      case Op::Slice:
        return fmt::format("slice({}, {} -> {}, {}, {})", operand(n, 0), n.axes[0], n.newAxes[0], n.lo, n.hi);
      case Op::Concat: {
        std::string parts;
        for (size_t i = 0; i < n.operands.size(); ++i) parts += operand(n, i) + ", ";
        return fmt::format("concat({}{} -> {})", parts, n.axes[0], n.newAxes[0]);
      }
      case Op::Rename: return fmt::format("rename({}, {} -> {})", operand(n, 0), n.axes[0], n.newAxes[0]);
      case Op::Index: return fmt::format("{}[{}={}]", operand(n, 0), n.axes[0], n.lo);
      case Op::Transpose: return operand(n, 0);
      case Op::Broadcast: return fmt::format("broadcast({}, {})", operand(n, 0), joinAxes(n.newAxes, ", "));
      case Op::StopGradient: return fmt::format("stop_gradient({})", operand(n, 0));
      case Op::ScatterAdd:
        return fmt::format("scatter_add({}, {}, {}{}{})", operand(n, 0), operand(n, 1), n.newAxes[0],
                           n.axes.empty() ? "" : ", ", joinAxes(n.axes, ", "));
    }
    return "?";
  }

  std::string withComment(const std::string& line, const Node& n) const {
    std::string comment;
    auto woven = n.wovenAxes();
    if (!woven.empty() && n.op != Op::Constant) {
      comment += "woven";
      for (const auto& a : woven) comment += " " + a;
    }
    if (!n.origin.empty()) {
      std::string path;
      for (const auto& o : n.origin) path += (path.empty() ? "" : "/") + o;
      comment += (comment.empty() ? "in " : "; in ") + path;
    }
    if (comment.empty()) return line;
    size_t pad = line.size() < 72 ? 72 - line.size() : 1;
    return line + std::string(pad, ' ') + "# " + comment;
  }

  const Graph& g_;
  PrintOptions options_;
  const OperatorNames* operators_;
  std::vector<std::string> names_;
};

}  // namespace

// Every value gets a unique, valid name: its own where it has one, with the
// node number appended where that is taken. Output names are kept free for
// the nodes that produce them.
std::vector<std::string> printedNames(const Graph& g) {
  std::vector<std::string> names(g.nodes.size());
  std::set<std::string> used, claimedOutputs;
  std::map<NodeId, std::string> outputName;
  for (const auto& o : g.outputs) outputName.emplace(o.node, o.name);
  for (const auto& o : g.outputs) used.insert(o.name);
  for (NodeId id : g.inputs) {
    names[static_cast<size_t>(id)] = g.node(id).name;
    used.insert(g.node(id).name);
  }
  for (const Node& n : g.nodes) {
    if (n.op == Op::Input) continue;
    auto out = outputName.find(n.id);
    if (out != outputName.end() && !g.findInput(out->second) && !claimedOutputs.count(out->second)) {
      names[static_cast<size_t>(n.id)] = out->second;
      claimedOutputs.insert(out->second);
      continue;
    }
    std::string base = sanitize(n.name.empty() ? std::string(n.op == Op::Constant ? "c" : "v") : n.name);
    std::string name = base;
    if (used.count(name) || isReservedWord(name)) name = fmt::format("{}_{}", base, n.id);
    while (used.count(name)) name += "_";
    used.insert(name);
    names[static_cast<size_t>(n.id)] = name;
  }
  return names;
}

// Scan operators are printed first, each as its own diagram, so that the
// text reads back (its last diagram, the graph, is the default entry).
std::string printGraph(const Graph& graph, const PrintOptions& options) {
  const OperatorNames operators = operatorNames(graph);
  std::string out;
  std::set<std::string> printed;
  for (const Node& n : graph.nodes) {  // in the order the graph uses them
    if (!n.combine) continue;
    const std::string& name = operators.at(n.combine.get());
    if (!printed.insert(name).second) continue;
    Graph named = *n.combine;
    named.name = name;
    out += Printer(named, options).run() + "\n";
  }
  return out + Printer(graph, options, &operators).run();
}

}  // namespace llmc
