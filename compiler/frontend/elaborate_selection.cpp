// The boxes that select positions: argmax, argmin and topk. Each is written
// out in primitives the IR already has (max, ==, where, pos, and stack's
// concat), so the interpreter, autodiff, streamability, fusion, the cost
// model and the CUDA writer need nothing new; the indices they give are i32,
// as pos gives, ready for gather and scatter_add.
#include "frontend/elaborator.h"

namespace llmc::elaboration {

namespace {

// topk's rounds are unrolled, each two passes over the axis: more than this
// many is no box but a sort, which the language does not have.
constexpr int64_t kMaxTopk = 16;

Node unaryNode(UnaryOp op) {
  Node n;
  n.op = Op::Unary;
  n.unary = op;
  return n;
}

Node binaryNode(BinaryOp op) {
  Node n;
  n.op = Op::Binary;
  n.binary = op;
  return n;
}

Node equalNode() {
  Node n;
  n.op = Op::Compare;
  n.compare = CompareOp::Eq;
  return n;
}

}  // namespace

NodeId Elaborator::maxOver(NodeId x, const std::string& axis, const SourceLoc& loc) {
  Node n;
  n.op = Op::Reduce;
  n.reduce = ReduceOp::Max;
  n.axes = {axis};
  n.operands = {x};
  n.type.dtype = typeOf(x).dtype;
  for (const Axis& a : typeOf(x).axes)
    if (a.name != axis) n.type.axes.push_back(a);
  return add(std::move(n), loc);
}

// The first position along `axis` where x is at its maximum, among the
// positions `taken` (a bool array, or -1 for none) leaves: i32, x's axes
// without `axis`. The first is the smallest position p, so the largest
// size - p: `size - max(where(x == max(x), size - pos, 0))`, with integer
// maxima only (the language has no minimum over an axis). A maximum skips
// NaN (interpreter and CUDA alike), so NaN is never chosen; where nothing is
// left (every value NaN, or every position taken) the result is size, out of
// range, which gather reads as NaN on the GPU and the interpreter refuses.
NodeId Elaborator::firstMaximum(NodeId x, const std::string& axis, NodeId taken, const SourceLoc& loc) {
  const Axis along = *typeOf(x).find(axis);
  const double size = static_cast<double>(along.size);
  Value candidates = arrayValue(x);
  if (taken >= 0) {  // the positions taken fall out of the maximum
    Node masked;
    masked.op = Op::Select;
    masked.operands = {taken, constant(-std::numeric_limits<double>::infinity(), typeOf(x).dtype, loc), x};
    masked.type = Type{typeOf(x).dtype, unifyAxes(masked.operands, loc)};
    candidates = arrayValue(add(std::move(masked), loc));
  }
  const NodeId largest = maxOver(candidates.node, axis, loc);
  Value atMax = elementwise(equalNode(), {candidates, arrayValue(largest)}, loc, "==", DType::Bool);
  if (taken >= 0) {  // -inf == -inf: a row of -inf must not choose a taken position again
    const Value untaken = elementwise(unaryNode(UnaryOp::Not), {arrayValue(taken)}, loc, "not", DType::Bool);
    atMax = elementwise(binaryNode(BinaryOp::And), {atMax, untaken}, loc, "and", DType::Bool);
  }
  const Value fromEnd =
      elementwise(binaryNode(BinaryOp::Sub), {numberValue(size, true), arrayValue(positions(along, loc))}, loc, "-");
  Node score;
  score.op = Op::Select;
  score.operands = {atMax.node, fromEnd.node, constant(0, DType::I32, loc)};
  score.type = Type{DType::I32, unifyAxes(score.operands, loc)};
  const NodeId best = maxOver(add(std::move(score), loc), axis, loc);
  return elementwise(binaryNode(BinaryOp::Sub), {numberValue(size, true), arrayValue(best)}, loc, "-").node;
}

NodeId Elaborator::positions(const Axis& axis, const SourceLoc& loc) {
  Node n;
  n.op = Op::Pos;
  n.axes = {axis.name};
  n.type = Type{DType::I32, {axis}};
  return add(std::move(n), loc);
}

// The array argmax, argmin and topk select from: a float array with `axis`.
NodeId Elaborator::selectionSource(Frame& f, const Expr& e, const std::string& axisName, const SourceLoc& axisLoc,
                                   std::string& axis) {
  NodeId x = requireArray(eval(f, *e.args[0]), e.args[0]->loc, e.name);
  const Type t = typeOf(x);
  if (!isFloat(t.dtype))
    fail(e.args[0]->loc, fmt::format("'{}' needs a floating-point array, but this is {}; cast it with f32(...)",
                                     e.name, dtypeName(t.dtype)));
  axis = resolveAxis(f, axisName, axisLoc);
  if (!t.has(axis))
    fail(axisLoc, fmt::format("'{}' along axis '{}' that the array lacks (its type is {})", e.name, axis, t.str()));
  return x;
}

// argmax(x, a), argmin(x, a): the first position along a of x's largest
// (smallest) value; argmin is argmax of -x.
Value Elaborator::evalArgmax(Frame& f, const Expr& e) {
  std::string axis;
  NodeId x = selectionSource(f, e, e.args[1]->name, e.args[1]->loc, axis);
  if (e.name == "argmin") x = elementwise(unaryNode(UnaryOp::Neg), {arrayValue(x)}, e.loc, "-").node;
  return arrayValue(firstMaximum(x, axis, -1, e.loc));
}

// topk(x, a -> k, K): the positions of x's K largest values along a, largest
// first (ties to the lower position), along a new last axis k of size K.
// Round j is an argmax of x without the positions of the rounds before it
// (pos(a) == each, or-ed together); the rounds are stacked along k.
Value Elaborator::evalTopk(Frame& f, const Expr& e) {
  const Expr& m = axisMapArgument(e, 1, 1, 1);
  std::string axis;
  const NodeId x = selectionSource(f, e, m.from[0].name, m.from[0].loc, axis);
  const Axis along = *typeOf(x).find(axis);
  const int64_t size = along.size;
  const int64_t count = evalPosition(f, *e.args[2], "topk's count");
  if (count < 1 || count > kMaxTopk)
    fail(e.args[2]->loc,
         fmt::format("topk of {} positions: it takes 1 to {} (each is a pass over the axis)", count, kMaxTopk));
  if (count > size)
    fail(e.args[2]->loc, fmt::format("topk of {} positions along axis '{}' of size {}", count, axis, size));
  Type rest = typeOf(x);
  std::erase_if(rest.axes, [&](const Axis& a) { return a.name == axis; });
  if (auto given = givenSize(f, m.to[0]); given && *given != count)
    fail(m.to[0].loc, fmt::format("axis size mismatch: axis '{}' would have size {}, but it has size {}",
                                  m.to[0].name, count, *given));
  const std::string k = declareNewAxis(f, m.to[0].name, count, rest, m.to[0].loc);
  std::vector<NodeId> rounds;
  NodeId taken = -1;
  for (int64_t j = 0; j < count; ++j) {
    rounds.push_back(firstMaximum(x, axis, taken, e.loc));
    if (j + 1 == count) break;
    // (The round first: the mask's axes are x's others, then a, as x's often are.)
    const Value chosen = elementwise(equalNode(), {arrayValue(rounds.back()), arrayValue(positions(along, e.loc))},
                                     e.loc, "==", DType::Bool);
    taken = taken < 0 ? chosen.node
                      : elementwise(binaryNode(BinaryOp::Or), {arrayValue(taken), chosen}, e.loc, "or", DType::Bool).node;
  }
  return arrayValue(stackAlong(f, rounds, k, e.loc));
}

}  // namespace llmc::elaboration
