// scan(op, x, a[, exclusive]): along a, each position's sum, maximum or
// product of x over the positions up to it (inclusive, the default) or
// before it (exclusive); scan(linear, c, x, a[, exclusive]): the linear
// recurrence h = c * h + x along a, from h = 0.
//
// A running sum or maximum is written out in primitives the IR already has:
// x along a renamed copy of a, masked by a comparison of positions, reduced
// over the copy. So the streamability laws, fusion and the cost model see
// the masked reduction it is, whose steps past the diagonal a stream skips;
// with a target, the masked-sums pass turns it into a contraction with the
// triangular mask or a blocked scan node (linear work) where either is
// cheaper (ir/masked_sums.h, planning/scan_layout.h).
//
// A product or a linear recurrence has no masked form (no product
// reduction, and a recurrence's terms are products of the coefficients
// between two positions): they are scan nodes from the start, linear
// recurrences both (ir.h, isLinearScan): a running product is the
// recurrence with c = x whose values are x at the first position and 0
// elsewhere; an exclusive one, the lagged recurrence of 1 at the first
// position. Exact at zeros, where a product's gradient by division is not.
#include <limits>

#include "frontend/elaborator.h"

namespace llmc::elaboration {

Value Elaborator::evalScan(Frame& f, const Expr& e) {
  const Expr& opArg = *e.args[0];
  const bool known = opArg.kind == Expr::Kind::Name &&
                     (opArg.name == "sum" || opArg.name == "max" || opArg.name == "prod" || opArg.name == "linear");
  if (!known) fail(opArg.loc, "scan's operator is 'sum', 'max', 'prod' or 'linear': scan(sum, x, a)");
  if (opArg.name == "linear") return arrayValue(linearScan(f, e));
  if (e.args.size() > 4)
    fail(e.args[4]->loc, fmt::format("scan({}, x, a[, exclusive]) takes at most 4 arguments", opArg.name));
  const NodeId x = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "scan");
  const Type t = typeOf(x);
  if (!isFloat(t.dtype))
    fail(e.args[1]->loc, fmt::format("'scan' needs a floating-point array, but this is {}; cast it with f32(...)",
                                     dtypeName(t.dtype)));
  const auto [axis, exclusive] = scanAxis(f, e, 2, t);
  if (opArg.name == "prod") return arrayValue(productScan(x, axis, exclusive, e.loc));
  const ReduceOp op = opArg.name == "sum" ? ReduceOp::Sum : ReduceOp::Max;
  const Axis along = *t.find(axis);
  // x along `earlier`, a copy of a: position j of it is x's position j.
  const std::string earlier = declareNewAxis(f, axis + "_scanned", along.size, t, e.loc);
  Node copy;
  copy.op = Op::Rename;
  copy.operands = {x};
  copy.axes = {axis};
  copy.newAxes = {earlier};
  copy.type = t;
  for (Axis& a : copy.type.axes)
    if (a.name == axis) a.name = earlier;
  const NodeId xs = add(std::move(copy), e.loc);
  // The positions of the copy each of a's takes: j <= i (inclusive), j < i.
  Node compare;
  compare.op = Op::Compare;
  compare.compare = exclusive ? CompareOp::Lt : CompareOp::Le;
  compare.operands = {positions({earlier, along.size}, e.loc), positions(along, e.loc)};
  compare.type = Type{DType::Bool, unifyAxes(compare.operands, e.loc)};
  const NodeId taken = add(std::move(compare), e.loc);
  const double identity = op == ReduceOp::Sum ? 0.0 : -std::numeric_limits<double>::infinity();
  Node masked;
  masked.op = Op::Select;
  masked.operands = {taken, xs, constant(identity, t.dtype, e.loc)};
  // x's axes with a's copy just before a: the sum over the copy then keeps
  // x's order, so no transposed view of the result is stored or read.
  masked.type = Type{t.dtype, unifyAxes(masked.operands, e.loc)};  // checks the sizes as where(...) does
  masked.type.axes.clear();
  for (const Axis& a : t.axes) {
    if (a.name == axis) masked.type.axes.push_back(Axis{earlier, along.size});
    masked.type.axes.push_back(a);
  }
  const NodeId terms = add(std::move(masked), e.loc);
  Node reduced;
  reduced.op = Op::Reduce;
  reduced.reduce = op;
  reduced.axes = {earlier};
  reduced.operands = {terms};
  reduced.type.dtype = t.dtype;
  for (const Axis& a : typeOf(terms).axes)
    if (a.name != earlier) reduced.type.axes.push_back(a);
  return arrayValue(add(std::move(reduced), e.loc));
}

std::pair<std::string, bool> Elaborator::scanAxis(Frame& f, const Expr& e, size_t at, const Type& t) {
  const Expr& axisArg = *e.args[at];
  if (axisArg.kind != Expr::Kind::Name) fail(axisArg.loc, "this argument of scan is the axis it runs along");
  const std::string axis = resolveAxis(f, axisArg.name, axisArg.loc);
  if (!t.has(axis)) fail(axisArg.loc, fmt::format("scan along axis '{}' that the array lacks (its type is {})", axis, t.str()));
  bool exclusive = false;
  if (e.args.size() > at + 1) {
    const Expr& form = *e.args[at + 1];
    if (form.kind != Expr::Kind::Name || (form.name != "inclusive" && form.name != "exclusive"))
      fail(form.loc, "scan's last argument is 'inclusive' (the default) or 'exclusive'");
    exclusive = form.name == "exclusive";
  }
  return {axis, exclusive};
}

// v laid out as `target`, broadcast along the axes it lacks.
NodeId Elaborator::spreadTo(NodeId v, const Type& target, const SourceLoc& loc) {
  if (typeOf(v).axes == target.axes) return v;
  Node n;
  n.operands = {v};
  n.type = Type{typeOf(v).dtype, target.axes};
  for (const Axis& a : target.axes)
    if (!typeOf(v).has(a.name)) n.newAxes.push_back(a.name);
  n.op = n.newAxes.empty() ? Op::Transpose : Op::Broadcast;
  return add(std::move(n), loc);
}

NodeId Elaborator::recurrence(NodeId coefficient, NodeId x, const std::string& axis, bool exclusive, bool lagged,
                              const SourceLoc& loc) {
  Node n;
  n.op = Op::Scan;
  n.reduce = ReduceOp::Sum;
  n.axes = n.newAxes = {axis};
  n.lo = exclusive ? 1 : 0;
  n.lagged = lagged;
  n.operands = {x, spreadTo(coefficient, typeOf(x), loc)};
  n.type = typeOf(x);
  return add(std::move(n), loc);
}

NodeId Elaborator::productScan(NodeId x, const std::string& axis, bool exclusive, const SourceLoc& loc) {
  const Type t = typeOf(x);
  const Axis along = *t.find(axis);
  Node first;
  first.op = Op::Compare;
  first.compare = CompareOp::Eq;
  first.operands = {positions(along, loc), constant(0, DType::I32, loc)};
  first.type = Type{DType::Bool, {along}};
  const NodeId atFirst = add(std::move(first), loc);
  // Inclusive: h = x * h + (x at the first position); exclusive: h = x_before * h + (1 at the first).
  Node start;
  start.op = Op::Select;
  start.operands = {atFirst, exclusive ? constant(1, t.dtype, loc) : x, constant(0, t.dtype, loc)};
  start.type = Type{t.dtype, exclusive ? std::vector<Axis>{along} : t.axes};
  const NodeId values = spreadTo(add(std::move(start), loc), t, loc);
  return recurrence(x, values, axis, false, exclusive, loc);
}

NodeId Elaborator::linearScan(Frame& f, const Expr& e) {
  if (e.args.size() < 4) fail(e.loc, "scan(linear, c, x, a[, exclusive]): the coefficient, the values and the axis");
  const Value cv = eval(f, *e.args[1]);
  const NodeId x = requireArray(eval(f, *e.args[2]), e.args[2]->loc, "scan");
  const Type& xt = typeOf(x);
  if (!isFloat(xt.dtype))
    fail(e.args[2]->loc, fmt::format("'scan' needs a floating-point array, but this is {}; cast it with f32(...)",
                                     dtypeName(xt.dtype)));
  const NodeId c = materialize(cv, xt.dtype, e.args[1]->loc);
  if (typeOf(c).dtype != xt.dtype)
    fail(e.args[1]->loc, fmt::format("scan(linear, ..)'s coefficient is {} and its values {}: cast one to the other",
                                     dtypeName(typeOf(c).dtype), dtypeName(xt.dtype)));
  // Both along the axes of either, x's first (their sizes checked as arithmetic checks them).
  Type t{xt.dtype, xt.axes};
  unifyAxes({c, x}, e.loc);
  for (const Axis& a : typeOf(c).axes)
    if (!t.has(a.name)) t.axes.push_back(a);
  const auto [axis, exclusive] = scanAxis(f, e, 3, t);
  return recurrence(c, spreadTo(x, t, e.loc), axis, exclusive, false, e.loc);
}

}  // namespace llmc::elaboration
