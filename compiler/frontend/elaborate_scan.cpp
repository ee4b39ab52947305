// scan(op, x, a[, exclusive]): along a, each position's sum or maximum of x
// over the positions up to it (inclusive, the default) or before it
// (exclusive). Written out in primitives the IR already has: x along a
// renamed copy of a, masked by a comparison of positions, reduced over the
// copy. So the interpreter, autodiff, the streamability laws, fusion, the
// cost model and the CUDA writer need nothing new: the mask is a comparison
// of positions, whose steps past the diagonal a stream skips. The work is
// size(a) times x's (half of it skipped where streamed); with a target, the
// masked-sums pass turns a running sum into a contraction with the
// triangular mask or a blocked scan node (linear) where either is cheaper
// (ir/masked_sums.h, planning/scan_layout.h).
#include <limits>

#include "frontend/elaborator.h"

namespace llmc::elaboration {

Value Elaborator::evalScan(Frame& f, const Expr& e) {
  const Expr& opArg = *e.args[0];
  if (opArg.kind != Expr::Kind::Name || (opArg.name != "sum" && opArg.name != "max"))
    fail(opArg.loc, "scan's operator is 'sum' or 'max': scan(sum, x, a)");
  const ReduceOp op = opArg.name == "sum" ? ReduceOp::Sum : ReduceOp::Max;
  const NodeId x = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "scan");
  const Type t = typeOf(x);
  if (!isFloat(t.dtype))
    fail(e.args[1]->loc, fmt::format("'scan' needs a floating-point array, but this is {}; cast it with f32(...)",
                                     dtypeName(t.dtype)));
  if (e.args[2]->kind != Expr::Kind::Name) fail(e.args[2]->loc, "scan's third argument is the axis it runs along");
  const std::string axis = resolveAxis(f, e.args[2]->name, e.args[2]->loc);
  if (!t.has(axis)) fail(e.args[2]->loc, fmt::format("scan along axis '{}' that the array lacks (its type is {})", axis, t.str()));
  bool exclusive = false;
  if (e.args.size() == 4) {
    const Expr& form = *e.args[3];
    if (form.kind != Expr::Kind::Name || (form.name != "inclusive" && form.name != "exclusive"))
      fail(form.loc, "scan's fourth argument is 'inclusive' (the default) or 'exclusive'");
    exclusive = form.name == "exclusive";
  }
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

}  // namespace llmc::elaboration
