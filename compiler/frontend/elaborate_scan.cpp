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
#include <set>

#include "frontend/elaborator.h"

namespace llmc::elaboration {

Value Elaborator::evalScan(Frame& f, const Expr& e) {
  const Expr& opArg = *e.args[0];
  const bool known = opArg.kind == Expr::Kind::Name &&
                     (opArg.name == "sum" || opArg.name == "max" || opArg.name == "prod" || opArg.name == "linear");
  const DiagramDecl* userOp = opArg.kind == Expr::Kind::Name && !known ? program_.find(opArg.name) : nullptr;
  if (userOp) return arrayValue(monoidScan(f, e, *userOp));
  if (!known)
    fail(opArg.loc, "scan's operator is 'sum', 'max', 'prod', 'linear' or a diagram of two numbers giving one: "
                    "scan(sum, x, a)");
  if (opArg.name == "linear") return arrayValue(linearScan(f, e));
  const NodeId x = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "scan");
  const Type t = typeOf(x);
  if (!isFloat(t.dtype))
    fail(e.args[1]->loc, fmt::format("'scan' needs a floating-point array, but this is {}; cast it with f32(...)",
                                     dtypeName(t.dtype)));
  const ScanForm form = scanForm(f, e, 2, t);
  if (form.lagged) fail(e.loc, "'lagged' is a form of scan(linear, ..) alone");
  if (opArg.name == "prod") {
    if (form.printed) fail(e.loc, "scan(prod, x, a[, exclusive]) runs along a from its first position; other forms are "
                                  "scan(linear, ..)'s");
    return arrayValue(productScan(x, form.axis, form.exclusive, e.loc));
  }
  const ReduceOp op = opArg.name == "sum" ? ReduceOp::Sum : ReduceOp::Max;
  if (form.printed) return arrayValue(scanNode(x, op, form, e.loc));
  const std::string axis = form.axis;
  const bool exclusive = form.exclusive;
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

Elaborator::ScanForm Elaborator::scanForm(Frame& f, const Expr& e, size_t at, const Type& t, int end) {
  const Expr& axisArg = *e.args[at];
  ScanForm form;
  if (axisArg.kind == Expr::Kind::AxisMap) {
    if (axisArg.from.size() != 1 || axisArg.to.size() != 1 || axisArg.to[0].size)
      fail(axisArg.loc, "a scan's axis map is one axis to one: 's -> t'");
    form.axis = resolveAxis(f, axisArg.from[0].name, axisArg.from[0].loc);
    form.resultAxis = axisArg.to[0].name;
    form.printed = true;
  } else if (axisArg.kind == Expr::Kind::Name) {
    form.axis = form.resultAxis = resolveAxis(f, axisArg.name, axisArg.loc);
  } else {
    fail(axisArg.loc, "this argument of scan is the axis it runs along");
  }
  if (!t.has(form.axis))
    fail(axisArg.loc, fmt::format("scan along axis '{}' that the array lacks (its type is {})", form.axis, t.str()));
  if (form.resultAxis != form.axis && t.has(form.resultAxis))
    fail(axisArg.loc, fmt::format("scan's result axis '{}' is one the array has already (its type is {})",
                                  form.resultAxis, t.str()));
  std::set<std::string> seen;
  for (size_t i = at + 1; i < (end < 0 ? e.args.size() : static_cast<size_t>(end)); ++i) {
    const Expr& a = *e.args[i];
    const bool known = a.kind == Expr::Kind::Name && (a.name == "inclusive" || a.name == "exclusive" ||
                                                      a.name == "reverse" || a.name == "lagged");
    if (!known) fail(a.loc, "scan's last argument is 'inclusive' (the default) or 'exclusive'");
    if (!seen.insert(a.name == "inclusive" ? "exclusive" : a.name).second)
      fail(a.loc, fmt::format("scan's form '{}' is given twice, or with its opposite", a.name));
    form.exclusive |= a.name == "exclusive";
    form.reverse |= a.name == "reverse";
    form.lagged |= a.name == "lagged";
  }
  form.printed |= form.reverse || form.lagged;
  if (form.lagged && form.exclusive)
    fail(e.loc, "a scan is 'lagged' or 'exclusive', not both (a lagged recurrence is inclusive)");
  return form;
}

NodeId Elaborator::scanNode(NodeId x, ReduceOp op, const ScanForm& form, const SourceLoc& loc, NodeId coefficient,
                            std::shared_ptr<const Graph> combine) {
  Node n;
  n.combine = std::move(combine);
  n.op = Op::Scan;
  n.reduce = op;
  n.axes = {form.axis};
  n.newAxes = {form.resultAxis};
  n.lo = form.exclusive ? 1 : 0;
  n.hi = form.reverse ? 1 : 0;
  n.operands = {x};
  if (coefficient >= 0) n.operands.push_back(coefficient);
  n.lagged = form.lagged;
  n.type = typeOf(x);
  for (Axis& a : n.type.axes)
    if (a.name == form.axis) a.name = form.resultAxis;
  return add(std::move(n), loc);
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

NodeId Elaborator::recurrence(NodeId coefficient, NodeId x, const ScanForm& form, const SourceLoc& loc) {
  return scanNode(x, ReduceOp::Sum, form, loc, spreadTo(coefficient, typeOf(x), loc));
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
  ScanForm form;
  form.axis = form.resultAxis = axis;
  form.lagged = exclusive;
  return recurrence(x, values, form, loc);
}

NodeId Elaborator::linearScan(Frame& f, const Expr& e) {
  if (e.args.size() < 4) fail(e.loc, "scan(linear, c, x, a[, exclusive]): the coefficient, the values and the axis");
  const Value cv = eval(f, *e.args[1]);
  const NodeId x = requireArray(eval(f, *e.args[2]), e.args[2]->loc, "scan");
  const Type xt = typeOf(x);
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
  return recurrence(c, spreadTo(x, t, e.loc), scanForm(f, e, 3, t), e.loc);
}

}  // namespace llmc::elaboration
