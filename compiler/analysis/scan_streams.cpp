#include "analysis/scan_streams.h"

#include <fmt/format.h>

#include "ir/print.h"

namespace llmc {

ScanStream analyzeScanStream(const Node& n) {
  ScanStream s;
  s.node = n.id;
  s.axis = n.newAxes.at(0);
  s.operandAxis = n.axes.at(0);
  if (n.combine) {
    s.element = "x, or none";
    s.identity = "none";
    s.combine = fmt::format("{}(e, l) (the other where one is none)", n.combine->name);
  } else if (isLinearScan(n)) {
    s.element = "(a, b): the step h -> a h + b";
    s.identity = "(1, 0)";
    s.combine = "(a_e, b_e) then (a_l, b_l) = (a_e a_l, a_l b_e + b_l)";
  } else if (n.reduce == ReduceOp::Sum) {
    s.element = "x";
    s.identity = "0";
    s.combine = "e + l";
  } else {
    s.element = "x";
    s.identity = "-inf";
    s.combine = "max(e, l)";
  }
  return s;
}

std::string describeScanStream(const Graph& g, const ScanStream& s) {
  const std::vector<std::string> names = printedNames(g);
  auto name = [&](NodeId id) { return names[static_cast<size_t>(id)]; };
  const Node& n = g.node(s.node);
  std::string of = name(n.operands[0]);
  if (isLinearScan(n))
    of = fmt::format("h = {} h + {}{}", name(n.operands[1]), name(n.operands[0]),
                     n.lagged ? " (each coefficient the previous position's)" : "");
  std::string out = fmt::format("stream over {}: streamable (the scan {} of {} along {}{}{})\n", s.axis, name(n.id), of,
                                s.operandAxis, n.lo ? ", exclusive" : "", n.hi ? ", from the end" : "");
  out += fmt::format("  carry per line: {} (head: {})\n", s.element, s.identity);
  out += fmt::format("  combine, the earlier element e then the later l: {}\n", s.combine);
  out += fmt::format("  body, per chunk of {}: each position <- the carry, then the chunk's elements {} it; "
                     "carry <- the carry, then the chunk's elements\n",
                     s.axis, n.lo ? "before" : "up to");
  return out;
}

}  // namespace llmc
