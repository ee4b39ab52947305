#include "ir/ir.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "frontend/resource_limits.h"

namespace llmc {

namespace {
struct DTypeInfo {
  DType type;
  const char* name;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::Bool, "bool"}, {DType::I32, "i32"},   {DType::U16, "u16"}, {DType::F16, "f16"},
    {DType::BF16, "bf16"}, {DType::F32, "f32"},   {DType::F64, "f64"},
};
}  // namespace

const char* dtypeName(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  return "?";
}

std::optional<DType> dtypeFromName(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.type;
  return std::nullopt;
}

bool isFloat(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}
bool isInteger(DType t) { return t == DType::I32 || t == DType::U16; }

const Axis* Type::find(const std::string& axis) const {
  for (const auto& a : axes)
    if (a.name == axis) return &a;
  return nullptr;
}

int64_t Type::elementCount() const {
  int64_t n = 1;
  for (const auto& a : axes) {
    const auto product = checkedMul(n, a.size);
    n = product ? *product : sizeProduct(n, a.size, fmt::format("the element count of {}", str()));
  }
  return n;
}

std::string Type::str() const {
  std::string out = fmt::format("{}[", dtypeName(dtype));
  for (size_t i = 0; i < axes.size(); ++i)
    out += fmt::format("{}{}:{}", i ? " " : "", axes[i].name, axes[i].size);
  return out + "]";
}

bool Type::sameAxisSet(const Type& other) const {
  if (dtype != other.dtype || axes.size() != other.axes.size()) return false;
  for (const auto& a : axes) {
    const Axis* b = other.find(a.name);
    if (!b || b->size != a.size) return false;
  }
  return true;
}

const char* opName(Op op) {
  switch (op) {
    case Op::Input: return "input";
    case Op::Constant: return "constant";
    case Op::Pos: return "pos";
    case Op::Unary: return "unary";
    case Op::Binary: return "binary";
    case Op::Compare: return "compare";
    case Op::Select: return "where";
    case Op::Cast: return "cast";
    case Op::Reduce: return "reduce";
    case Op::Contract: return "contract";
    case Op::Gather: return "gather";
    case Op::Split: return "split";
    case Op::Merge: return "merge";
    case Op::Slice: return "slice";
    case Op::Concat: return "concat";
    case Op::Rename: return "rename";
    case Op::Index: return "index";
    case Op::Transpose: return "transpose";
    case Op::Broadcast: return "broadcast";
    case Op::ScatterAdd: return "scatter_add";
    case Op::StopGradient: return "stop_gradient";
    case Op::Scan: return "scan";
  }
  return "?";
}

const char* unaryName(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Not: return "not";
  }
  return "?";
}

const char* binaryName(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
    case BinaryOp::And: return "and";
    case BinaryOp::Or: return "or";
  }
  return "?";
}

const char* compareSymbol(CompareOp op) {
  switch (op) {
    case CompareOp::Lt: return "<";
    case CompareOp::Le: return "<=";
    case CompareOp::Gt: return ">";
    case CompareOp::Ge: return ">=";
    case CompareOp::Eq: return "==";
    case CompareOp::Ne: return "!=";
  }
  return "?";
}

const char* reduceName(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "max"; }

std::vector<std::string> Node::wovenAxes() const {
  std::set<std::string> own;
  switch (op) {
    case Op::Input:
    case Op::Constant:
      return {};
    case Op::Pos:
      return {};
    case Op::Split:
    case Op::Merge:
    case Op::Slice:
    case Op::Concat:
    case Op::Rename:
    case Op::Broadcast:
    case Op::ScatterAdd:
    case Op::Scan:
      own.insert(newAxes.begin(), newAxes.end());
      break;
    default:
      break;
  }
  std::vector<std::string> woven;
  for (const auto& a : type.axes)
    if (!own.count(a.name)) woven.push_back(a.name);
  return woven;
}

bool isLinearScan(const Node& n) { return n.op == Op::Scan && n.operands.size() == 2; }
bool isMonoidScan(const Node& n) { return n.op == Op::Scan && n.combine != nullptr; }
std::string scanOperatorName(const Node& n) {
  return n.combine ? n.combine->name : isLinearScan(n) ? "linear" : reduceName(n.reduce);
}

NodeId Graph::add(Node n) {
  n.id = static_cast<NodeId>(nodes.size());
  if (n.op == Op::StopGradient) stopGradients.push_back(n.id);
  nodes.push_back(std::move(n));
  return nodes.back().id;
}

const Node* Graph::findInput(const std::string& inputName) const {
  for (NodeId id : inputs)
    if (node(id).name == inputName) return &node(id);
  return nullptr;
}

namespace {

// The same op, type and attributes (operands aside).
bool sameMeaning(const Node& x, const Node& y) {
  if (!(x.op == y.op && x.type == y.type && x.axes == y.axes && x.newAxes == y.newAxes && x.lo == y.lo &&
        x.hi == y.hi && x.lagged == y.lagged && x.isParam == y.isParam))
    return false;
  switch (x.op) {
    case Op::Unary: return x.unary == y.unary;
    case Op::Binary: return x.binary == y.binary;
    case Op::Compare: return x.compare == y.compare;
    case Op::Reduce: return x.reduce == y.reduce;
    case Op::Scan:
      return x.reduce == y.reduce && x.value == y.value && (x.combine == y.combine ||
                                      (x.combine && y.combine && structurallyEqual(*x.combine, *y.combine)));
    case Op::Constant: return x.value == y.value;
    case Op::Input: return x.name == y.name;
    default: return true;
  }
}

bool sameValueWithin(const Graph& g, NodeId a, NodeId b, int depth) {
  if (a == b) return true;
  const Node& x = g.node(a);
  const Node& y = g.node(b);
  if (depth == 0 || x.op == Op::Input || !sameMeaning(x, y) || x.operands.size() != y.operands.size()) return false;
  for (size_t i = 0; i < x.operands.size(); ++i)
    if (!sameValueWithin(g, x.operands[i], y.operands[i], depth - 1)) return false;
  return true;
}

}  // namespace

bool sameValue(const Graph& g, NodeId a, NodeId b) { return sameValueWithin(g, a, b, 8); }

bool structurallyEqual(const Graph& a, const Graph& b, std::string* why) {
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (a.nodes.size() != b.nodes.size())
    return fail(fmt::format("{} nodes against {}", a.nodes.size(), b.nodes.size()));
  if (a.inputs != b.inputs) return fail("different inputs");
  if (a.outputs.size() != b.outputs.size()) return fail("different number of outputs");
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (a.outputs[i].name != b.outputs[i].name || a.outputs[i].node != b.outputs[i].node)
      return fail(fmt::format("output {} differs", i));
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node& x = a.nodes[i];
    const Node& y = b.nodes[i];
    if (x.operands != y.operands || !sameMeaning(x, y))
      return fail(fmt::format("node {} differs: {} {} against {} {}", i, opName(x.op),
                              x.type.str(), opName(y.op), y.type.str()));
  }
  return true;
}

}  // namespace llmc
