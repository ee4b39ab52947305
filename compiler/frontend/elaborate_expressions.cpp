// Expressions: names, numbers and arithmetic, indexing, and the built-in
// boxes (elementwise functions, reductions, contractions, gathers).
#include "frontend/elaborator.h"

namespace llmc::elaboration {

// ---------------------------------------------------------------- expressions
Value Elaborator::eval(Frame& f, const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Name: return evalName(f, e);
    case Expr::Kind::Number: return numberValue(e.number, e.isInteger);
    case Expr::Kind::Unary: {
      if (e.op == "not") return evalLogical(f, e);
      Value x = eval(f, *e.args[0]);
      if (x.isNumber) return numberValue(-x.number, x.isInteger);
      Node n;
      n.op = Op::Unary;
      n.unary = UnaryOp::Neg;
      return elementwise(std::move(n), {x}, e.loc, "-");
    }
    case Expr::Kind::Binary: return evalBinary(f, e);
    case Expr::Kind::Call: {
      if (findBuiltin(e.name)) return evalBuiltin(f, e);
      std::vector<Value> outs = callDiagram(f, e);
      if (outs.size() != 1)
        fail(e.loc, fmt::format("'{}' has {} outputs; assign them with as many names: a, b = {}(...)", e.name,
                                outs.size(), e.name));
      return outs[0];
    }
    case Expr::Kind::Index: return evalIndex(f, e);
    case Expr::Kind::AxisMap:
    case Expr::Kind::Binding: break;  // refused by resolveProgram
  }
  fail(e.loc, "this is not an expression");
}

Value Elaborator::evalName(Frame& f, const Expr& e) {
  if (auto it = f.values.find(e.name); it != f.values.end()) return it->second;
  if (auto it = f.indices.find(e.name); it != f.indices.end())
    return numberValue(static_cast<double>(it->second), true);
  if (auto v = lookupSymbol(f, e.name)) return numberValue(static_cast<double>(*v), true);
  if (e.name == "inf") return numberValue(std::numeric_limits<double>::infinity(), false);
  if (e.name == "pi") return numberValue(std::numbers::pi, false);
  if (f.decl->inputs.end() != std::find_if(f.decl->inputs.begin(), f.decl->inputs.end(),
                                           [&](const Port& p) { return p.name == e.name; }))
    fail(e.loc, fmt::format("unknown name '{}'", e.name));
  fail(e.loc, fmt::format("unknown name '{}' (not a value, a loop variable or a bound size; sizes are bound "
                          "by the signature or with --set {}=N)", e.name, e.name));
}

int64_t Elaborator::evalPosition(Frame& f, const Expr& e, const char* what) {
  Value v = eval(f, e);
  if (!v.isNumber || !v.isInteger)
    fail(e.loc, fmt::format("{} must be a whole number (a literal, a size or a loop variable)", what));
  // (A double past 2^62 would not convert: undefined behaviour. Positions
  // that large are out of range of any axis anyway.)
  if (std::fabs(v.number) > static_cast<double>(int64_t{1} << 62))
    fail(e.loc, fmt::format("{} {} is out of range", what, v.number));
  return static_cast<int64_t>(v.number);
}

// `a and b`, `a or b`, `not a`: masks made of masks. Operands are bool
// arrays (comparisons); a number has no truth value here.
Value Elaborator::evalLogical(Frame& f, const Expr& e) {
  std::vector<Value> operands;
  for (const ExprPtr& a : e.args) {
    Value v = eval(f, *a);
    if (v.isNumber || typeOf(v.node).dtype != DType::Bool)
      fail(a->loc, fmt::format("'{}' takes bool arrays (comparisons such as pos(t) < 4), but this is {}", e.op,
                               v.isNumber ? "a number" : fmt::format("an array of {}", dtypeName(typeOf(v.node).dtype))));
    operands.push_back(v);
  }
  Node n;
  if (e.op == "not") {
    n.op = Op::Unary;
    n.unary = UnaryOp::Not;
  } else {
    n.op = Op::Binary;
    n.binary = e.op == "and" ? BinaryOp::And : BinaryOp::Or;
  }
  return elementwise(std::move(n), operands, e.loc, e.op.c_str(), DType::Bool);
}

Value Elaborator::evalBinary(Frame& f, const Expr& e) {
  if (e.op == "and" || e.op == "or") return evalLogical(f, e);
  Value l = eval(f, *e.args[0]);
  Value r = eval(f, *e.args[1]);
  static const std::pair<const char*, CompareOp> kCompare[] = {
      {"<", CompareOp::Lt}, {"<=", CompareOp::Le}, {">", CompareOp::Gt},
      {">=", CompareOp::Ge}, {"==", CompareOp::Eq}, {"!=", CompareOp::Ne}};
  for (const auto& [text, op] : kCompare) {
    if (e.op != text) continue;
    if (l.isNumber && r.isNumber) fail(e.loc, "a comparison needs at least one array");
    Node n;
    n.op = Op::Compare;
    n.compare = op;
    return elementwise(std::move(n), {l, r}, e.loc, text, DType::Bool);
  }
  if (l.isNumber && r.isNumber) {
    double a = l.number, b = r.number;
    bool ints = l.isInteger && r.isInteger;
    if (e.op == "+") return numberValue(a + b, ints);
    if (e.op == "-") return numberValue(a - b, ints);
    if (e.op == "*") return numberValue(a * b, ints);
    return numberValue(a / b, ints && b != 0 && std::fmod(a, b) == 0);
  }
  Node n;
  n.op = Op::Binary;
  n.binary = e.op == "+" ? BinaryOp::Add : e.op == "-" ? BinaryOp::Sub : e.op == "*" ? BinaryOp::Mul : BinaryOp::Div;
  return elementwise(std::move(n), {l, r}, e.loc, e.op.c_str());
}

Value Elaborator::evalIndex(Frame& f, const Expr& e) {
  NodeId x = requireArray(eval(f, *e.args[0]), e.loc, "indexing");
  std::string axis = resolveAxis(f, e.name, e.loc);
  const Type t = typeOf(x);
  if (!t.has(axis)) fail(e.loc, fmt::format("cannot index axis '{}': the array has axes {}", axis, axesList(t)));
  int64_t i = evalPosition(f, *e.args[1], "an index");
  int64_t n = t.find(axis)->size;
  if (i < 0 || i >= n) fail(e.args[1]->loc, fmt::format("index {} is out of range for axis '{}' of size {}", i, axis, n));
  Node node;
  node.op = Op::Index;
  // A layer's slice of a stacked parameter reads best as ln1w_3.
  if (graph_.node(x).op == Op::Input) node.name = fmt::format("{}_{}", graph_.node(x).name, i);
  node.axes = {axis};
  node.lo = i;
  node.operands = {x};
  node.type.dtype = t.dtype;
  for (const auto& a : t.axes)
    if (a.name != axis) node.type.axes.push_back(a);
  return arrayValue(add(std::move(node), e.loc));
}

// The axis named by a call argument.
std::string Elaborator::axisArgument(Frame& f, const Expr& a) {
  if (a.kind != Expr::Kind::Name) fail(a.loc, "expected an axis name");
  return resolveAxis(f, a.name, a.loc);
}

Value Elaborator::evalBuiltin(Frame& f, const Expr& e) {
  const BuiltinInfo& b = *findBuiltin(e.name);
  const auto& args = e.args;
  switch (b.kind) {
    case BuiltinKind::Unary: {
      Value x = eval(f, *args[0]);
      if (x.isNumber) return numberValue(applyUnary(b.unary, x.number), false);
      if (!isFloat(typeOf(x.node).dtype))
        fail(e.loc, fmt::format("'{}' needs a floating-point array, but the argument is {}", b.name,
                                dtypeName(typeOf(x.node).dtype)));
      Node n;
      n.op = Op::Unary;
      n.unary = b.unary;
      return elementwise(std::move(n), {x}, e.loc, b.name);
    }
    case BuiltinKind::Binary: {
      Value l = eval(f, *args[0]), r = eval(f, *args[1]);
      if (l.isNumber && r.isNumber)
        return numberValue(b.binary == BinaryOp::Maximum ? std::max(l.number, r.number)
                                                         : std::min(l.number, r.number),
                           l.isInteger && r.isInteger);
      Node n;
      n.op = Op::Binary;
      n.binary = b.binary;
      return elementwise(std::move(n), {l, r}, e.loc, b.name);
    }
    case BuiltinKind::Where: {
      Value c = eval(f, *args[0]);
      NodeId cond = requireArray(c, args[0]->loc, "where's condition");
      if (typeOf(cond).dtype != DType::Bool)
        fail(args[0]->loc, fmt::format("where's condition must be bool (a comparison), but it is {}",
                                       dtypeName(typeOf(cond).dtype)));
      Value x = eval(f, *args[1]), y = eval(f, *args[2]);
      if (x.isNumber && y.isNumber) fail(e.loc, "where needs at least one array among its two choices");
      DType d = commonDType({x, y}, e.loc, "where");
      Node n;
      n.op = Op::Select;
      n.operands = {cond, materialize(x, d, args[1]->loc), materialize(y, d, args[2]->loc)};
      n.type.axes = unifyAxes(n.operands, e.loc);
      n.type.dtype = d;
      return arrayValue(add(std::move(n), e.loc));
    }
    case BuiltinKind::Cast: {
      DType to = *dtypeFromName(b.name);
      Value x = eval(f, *args[0]);
      if (x.isNumber) {
        if (std::isnan(x.number)) fail(e.loc, "this number is not a number (NaN), as log(-1) or 0/0 would give");
        double v = to == DType::Bool ? (x.number != 0) : isFloat(to) ? x.number : std::trunc(x.number);
        return arrayValue(constant(v, to, e.loc));
      }
      if (typeOf(x.node).dtype == to) return x;
      Node n;
      n.op = Op::Cast;
      n.operands = {x.node};
      n.type = Type{to, typeOf(x.node).axes};
      return arrayValue(add(std::move(n), e.loc));
    }
    case BuiltinKind::Reduce: {
      NodeId x = requireArray(eval(f, *args[0]), args[0]->loc, fmt::format("'{}'", b.name));
      const Type t = typeOf(x);
      if (t.dtype == DType::Bool) fail(e.loc, fmt::format("cannot {} a bool array; cast it with f32(...)", b.name));
      Node n;
      n.op = Op::Reduce;
      n.reduce = b.reduce;
      for (size_t i = 1; i < args.size(); ++i) {
        std::string axis = axisArgument(f, *args[i]);
        if (!t.has(axis))
          fail(args[i]->loc, fmt::format("'{}' over axis '{}' that the array lacks (its type is {})", b.name,
                                         axis, t.str()));
        if (std::find(n.axes.begin(), n.axes.end(), axis) != n.axes.end())
          fail(args[i]->loc, fmt::format("axis '{}' is named twice", axis));
        n.axes.push_back(axis);
      }
      n.operands = {x};
      n.type.dtype = t.dtype;
      for (const auto& a : t.axes)
        if (std::find(n.axes.begin(), n.axes.end(), a.name) == n.axes.end()) n.type.axes.push_back(a);
      return arrayValue(add(std::move(n), e.loc));
    }
    case BuiltinKind::Contract: return evalContract(f, e);
    case BuiltinKind::Gather: return evalGather(f, e);
    case BuiltinKind::Pos: {
      std::string axis = axisArgument(f, *args[0]);
      Node n;
      n.op = Op::Pos;
      n.axes = {axis};
      n.type = Type{DType::I32, {{axis, f.axisSizes.at(axis)}}};
      return arrayValue(add(std::move(n), e.loc));
    }
    case BuiltinKind::Size:
      return numberValue(static_cast<double>(f.axisSizes.at(axisArgument(f, *args[0]))), true);
    case BuiltinKind::Split: return evalSplit(f, e);
    case BuiltinKind::Merge: return evalMerge(f, e);
    case BuiltinKind::Rename:
    case BuiltinKind::Slice: return evalRenameOrSlice(f, e, b.kind == BuiltinKind::Slice);
    case BuiltinKind::Concat: return evalConcat(f, e);
    case BuiltinKind::Stack: return evalStack(f, e);
    case BuiltinKind::Pad: return evalPad(f, e);
    case BuiltinKind::Broadcast: return evalBroadcast(f, e);
    case BuiltinKind::ScatterAdd: return evalScatterAdd(f, e);
    case BuiltinKind::Argmax: return evalArgmax(f, e);
    case BuiltinKind::Topk: return evalTopk(f, e);
    case BuiltinKind::Scan: return evalScan(f, e);
    case BuiltinKind::StopGradient: {
      Node n;
      n.op = Op::StopGradient;
      n.operands = {requireArray(eval(f, *args[0]), args[0]->loc, "stop_gradient")};
      n.type = typeOf(n.operands[0]);
      return arrayValue(add(std::move(n), e.loc));
    }
  }
  fail(e.loc, "unhandled built-in");
}

Value Elaborator::evalContract(Frame& f, const Expr& e) {
  NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "contract");
  NodeId y = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "contract");
  const Type tx = typeOf(x);
  const Type ty = typeOf(y);
  if (tx.dtype != ty.dtype)
    fail(e.loc, fmt::format("dtype mismatch: contract of {} and {}; insert a cast such as {}(x)",
                            dtypeName(tx.dtype), dtypeName(ty.dtype), dtypeName(tx.dtype)));
  if (tx.dtype == DType::Bool) fail(e.loc, "cannot contract bool arrays; cast them with f32(...)");
  Node n;
  n.op = Op::Contract;
  n.operands = {x, y};
  for (size_t i = 2; i < e.args.size(); ++i) {
    std::string axis = axisArgument(f, *e.args[i]);
    const char* side = !tx.has(axis) ? "first" : !ty.has(axis) ? "second" : nullptr;
    if (side)
      fail(e.args[i]->loc, fmt::format("contraction over axis '{}' that the {} operand lacks (its type is {})",
                                       axis, side, (!tx.has(axis) ? tx : ty).str()));
    if (std::find(n.axes.begin(), n.axes.end(), axis) != n.axes.end())
      fail(e.args[i]->loc, fmt::format("axis '{}' is named twice", axis));
    n.axes.push_back(axis);
  }
  for (const auto& a : unifyAxes({x, y}, e.loc))
    if (std::find(n.axes.begin(), n.axes.end(), a.name) == n.axes.end()) n.type.axes.push_back(a);
  // Tensor cores and CPUs accumulate low-precision products in f32.
  n.type.dtype = tx.dtype == DType::F64 ? DType::F64 : isFloat(tx.dtype) ? DType::F32 : DType::I32;
  return arrayValue(add(std::move(n), e.loc));
}

Value Elaborator::evalGather(Frame& f, const Expr& e) {
  NodeId table = requireArray(eval(f, *e.args[0]), e.args[0]->loc, "gather's table");
  NodeId index = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "gather's index");
  std::string axis = axisArgument(f, *e.args[2]);
  const Type tt = typeOf(table);
  const Type ti = typeOf(index);
  if (!isInteger(ti.dtype))
    fail(e.args[1]->loc, fmt::format("gather's index must be an integer array (i32 or u16), but it is {}",
                                     dtypeName(ti.dtype)));
  if (!tt.has(axis))
    fail(e.args[2]->loc, fmt::format("gather along axis '{}' that the table lacks (its type is {})", axis, tt.str()));
  if (ti.has(axis))
    fail(e.args[2]->loc, fmt::format("gather's index must not have the gathered axis '{}'", axis));
  unifyAxes({table, index}, e.loc);  // shared axes must agree in size
  // An index of positions (pos(t)) takes every position of its axis: a table
  // with fewer rows would be read past its end (GPT-2 with T > maxT).
  if (const Node& in = graph_.node(index); in.op == Op::Pos) {
    const int64_t reach = in.type.axes[0].size, rows = tt.find(axis)->size;
    if (reach > rows)
      fail(e.args[1]->loc, fmt::format("gather's index pos({}) runs to {}, past the {} positions of the table's axis '{}'",
                                       in.axes[0], reach - 1, rows, axis));
  }
  Node n;
  n.op = Op::Gather;
  n.axes = {axis};
  n.operands = {table, index};
  n.type.dtype = tt.dtype;
  n.type.axes = ti.axes;
  for (const auto& a : tt.axes)
    if (a.name != axis && !ti.has(a.name)) n.type.axes.push_back(a);
  return arrayValue(add(std::move(n), e.loc));
}

}  // namespace llmc::elaboration
