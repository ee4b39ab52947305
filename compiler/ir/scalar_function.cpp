#include "ir/scalar_function.h"

#include "ir/autodiff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace llmc {

namespace {

bool isElementwise(Op op) {
  switch (op) {
    case Op::Input:
    case Op::Constant:
    case Op::Unary:
    case Op::Binary:
    case Op::Compare:
    case Op::Select:
    case Op::Cast:
    case Op::StopGradient:
      return true;
    default:
      return false;
  }
}

}  // namespace

double applyUnary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Rsqrt: return 1.0 / std::sqrt(x);
    case UnaryOp::Abs: return std::abs(x);
    case UnaryOp::Not: return x == 0 ? 1 : 0;
  }
  throw std::logic_error("unknown unary operation");
}

namespace {

double binaryAt(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Maximum: return std::max(a, b);
    case BinaryOp::Minimum: return std::min(a, b);
    case BinaryOp::And: return a != 0 && b != 0 ? 1 : 0;
    case BinaryOp::Or: return a != 0 || b != 0 ? 1 : 0;
  }
  throw std::logic_error("unknown binary operation");
}

bool compareAt(CompareOp op, double a, double b) {
  switch (op) {
    case CompareOp::Lt: return a < b;
    case CompareOp::Le: return a <= b;
    case CompareOp::Gt: return a > b;
    case CompareOp::Ge: return a >= b;
    case CompareOp::Eq: return a == b;
    case CompareOp::Ne: return a != b;
  }
  throw std::logic_error("unknown comparison");
}

double castTo(DType t, double v) {
  if (t == DType::Bool) return v != 0 ? 1 : 0;
  if (isInteger(t)) return std::trunc(v);
  return v;
}

}  // namespace

std::string scalarFunctionProblem(const Graph& f, SourceLoc* where) {
  if (f.inputs.size() != 2 || f.outputs.size() != 1)
    return fmt::format("takes {} inputs and gives {} outputs; a scan's operator takes two numbers and gives one",
                       f.inputs.size(), f.outputs.size());
  const Type& first = f.node(f.inputs[0]).type;
  for (NodeId id : {f.inputs[0], f.inputs[1], f.outputs[0].node}) {
    const Type& t = f.node(id).type;
    if (!t.axes.empty() || !isFloat(t.dtype) || t.dtype != first.dtype) {
      if (where) *where = f.node(id).loc;
      return fmt::format("has {} where a scan's operator takes and gives numbers of one float dtype ({})", t.str(),
                         Type{first.dtype, {}}.str());
    }
  }
  for (const Node& n : f.nodes)
    if (!isElementwise(n.op) || !n.type.axes.empty()) {
      if (where) *where = n.loc;
      return fmt::format("uses {} ({}); a scan's operator is elementwise arithmetic on its two numbers", opName(n.op),
                         n.type.str());
    }
  return "";
}

double evaluateScalarFunction(const Graph& f, double earlier, double later) {
  std::vector<double> v(f.nodes.size(), 0.0);
  const auto at = [&](const Node& n, size_t k) { return v[static_cast<size_t>(n.operands.at(k))]; };
  for (const Node& n : f.nodes) {
    double& out = v[static_cast<size_t>(n.id)];
    switch (n.op) {
      case Op::Input: out = n.id == f.inputs[0] ? earlier : later; break;
      case Op::Constant: out = n.value; break;
      case Op::Unary: out = applyUnary(n.unary, at(n, 0)); break;
      case Op::Binary: out = castTo(n.type.dtype, binaryAt(n.binary, at(n, 0), at(n, 1))); break;
      case Op::Compare: out = compareAt(n.compare, at(n, 0), at(n, 1)) ? 1 : 0; break;
      case Op::Select: out = at(n, 0) != 0 ? at(n, 1) : at(n, 2); break;
      case Op::Cast: out = castTo(n.type.dtype, at(n, 0)); break;
      case Op::StopGradient: out = at(n, 0); break;
      default: throw std::logic_error(fmt::format("scan operator '{}' uses {}", f.name, opName(n.op)));
    }
  }
  return v[static_cast<size_t>(f.outputs.at(0).node)];
}

int scalarFunctionOperations(const Graph& f) {
  return static_cast<int>(std::count_if(f.nodes.begin(), f.nodes.end(), [](const Node& n) {
    return n.op != Op::Input && n.op != Op::Constant && n.op != Op::StopGradient;
  }));
}

std::vector<NodeId> inlineScalarFunction(GraphBuilder& b, const Graph& f, const std::vector<NodeId>& args) {
  std::vector<NodeId> mapped(f.nodes.size(), -1);
  const auto operand = [&](const Node& n, size_t k) { return mapped[static_cast<size_t>(n.operands.at(k))]; };
  for (const Node& n : f.nodes) {
    NodeId& out = mapped[static_cast<size_t>(n.id)];
    switch (n.op) {
      case Op::Input: out = args.at(static_cast<size_t>(std::find(f.inputs.begin(), f.inputs.end(), n.id) - f.inputs.begin())); break;
      case Op::Constant: out = b.constant(n.value, n.type.dtype); break;
      case Op::Unary: out = b.unary(n.unary, operand(n, 0)); break;
      case Op::Binary: out = b.binary(n.binary, operand(n, 0), operand(n, 1)); break;
      case Op::Compare: out = b.compare(n.compare, operand(n, 0), operand(n, 1)); break;
      case Op::Select: out = b.select(operand(n, 0), operand(n, 1), operand(n, 2)); break;
      case Op::Cast: out = b.cast(operand(n, 0), n.type.dtype); break;
      case Op::StopGradient: out = operand(n, 0); break;  // inlined for values, not differentiated through
      case Op::Reduce:
      case Op::Broadcast:
      case Op::Transpose:
        if (!n.type.axes.empty() || !f.node(n.operands.at(0)).type.axes.empty())
          throw std::logic_error(fmt::format("scan operator '{}' has {} with axes", f.name, opName(n.op)));
        out = operand(n, 0);
        break;
      default: throw std::logic_error(fmt::format("scan operator '{}' uses {}", f.name, opName(n.op)));
    }
  }
  std::vector<NodeId> outputs;
  for (const GraphOutput& o : f.outputs) outputs.push_back(mapped[static_cast<size_t>(o.node)]);
  return outputs;
}

std::pair<NodeId, NodeId> inlineScalarPartials(GraphBuilder& b, const Graph& f, NodeId earlier, NodeId later) {
  GradientOptions options;
  options.loss = f.outputs.at(0).name;
  options.wrt = {f.node(f.inputs.at(0)).name, f.node(f.inputs.at(1)).name};
  // Reverse mode on the numbers, seeded with 1: the adjoints of the inputs
  // are the partials. (Both inputs are differentiated as parameters would be.)
  Graph gradient = differentiate(f, options);
  const std::vector<NodeId> outs = inlineScalarFunction(b, gradient, {earlier, later});
  return {outs.at(1), outs.at(2)};
}

std::optional<NotAssociative> associativityCounterexample(const Graph& f) {
  // Numbers of either sign and several scales, none special for common
  // operators (0 and 1 are identities of + and *, which would hide a fault).
  static constexpr double kSamples[] = {-2.75, -0.6, 0.35, 1.7, 4.2};
  for (double a : kSamples)
    for (double b : kSamples)
      for (double c : kSamples) {
        const double left = evaluateScalarFunction(f, evaluateScalarFunction(f, a, b), c);
        const double right = evaluateScalarFunction(f, a, evaluateScalarFunction(f, b, c));
        if (!std::isfinite(left) || !std::isfinite(right)) continue;
        if (std::abs(left - right) > 1e-9 * (1 + std::abs(left) + std::abs(right)))
          return NotAssociative{a, b, c, left, right};
      }
  return std::nullopt;
}

}  // namespace llmc
