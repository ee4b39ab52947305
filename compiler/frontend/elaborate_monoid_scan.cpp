// scan(f, x, a[, exclusive, v]): the running fold of x along a under the
// user's operator f, a diagram of two numbers giving one (a monoid's
// product: associative, so the blocked scan may regroup its terms).
//
// The scan node holds f's own graph (Node::combine, ir/scalar_function.h),
// elaborated here on two numbers of x's dtype and checked: elementwise
// arithmetic only, and associative at a set of sample numbers. The fold
// starts from the first element, so the operator's identity is never
// needed (nor evaluated, where a user's formula would not be defined at
// it); an exclusive scan gives the value the user writes at its first
// position.
#include "frontend/elaborator.h"

namespace llmc::elaboration {

std::shared_ptr<const Graph> Elaborator::operatorGraph(const DiagramDecl& op, DType dtype, const SourceLoc& at) {
  if (auto known = operators_.find({&op, dtype}); known != operators_.end()) return known->second;
  if (op.inputs.size() != 2 || op.outputs.size() != 1)
    fail(at, fmt::format("scan's operator '{}' takes {} input{} and gives {} output{}; it takes two numbers (the "
                         "earlier, the later) and gives one",
                         op.name, op.inputs.size(), op.inputs.size() == 1 ? "" : "s", op.outputs.size(),
                         op.outputs.size() == 1 ? "" : "s"));
  if (callStack_.size() >= kMaxCallDepth)
    fail(at, fmt::format("composite calls nested more than {} deep", kMaxCallDepth));
  // A separate elaboration: the operator's graph is its own, not the caller's.
  Elaborator inner(program_, global_);
  inner.callStack_ = callStack_;
  inner.callStack_.push_back({op.name, at});
  inner.origin_ = {op.name};
  inner.graph_.name = op.name;
  Frame frame;
  frame.decl = &op;
  std::vector<Value> args;
  for (const Port& port : op.inputs) {
    Node n;
    n.op = Op::Input;
    n.name = port.name;
    n.loc = port.loc;
    n.type = Type{dtype, {}};
    const NodeId id = inner.graph_.add(std::move(n));
    inner.graph_.inputs.push_back(id);
    // The numbers are the scan's elements: a port with axes or of another
    // dtype is refused here, at the scan.
    if (!port.type.axes.empty())
      fail(at, fmt::format("scan's operator '{}' takes numbers, but its input '{}' is {}", op.name, port.name,
                           inner.typeSpecText(port.type)));
    if (inner.dtypeOf(port.type) != dtype)
      fail(at, fmt::format("scan's operator '{}' takes {} numbers, but the array scanned is {}; cast one to the other",
                           op.name, dtypeName(inner.dtypeOf(port.type)), dtypeName(dtype)));
    inner.matchInput(frame, port, id, at);
    args.push_back(arrayValue(id));
  }
  const std::vector<Value> outs = inner.instantiateBody(frame, args, /*isEntry=*/true);
  inner.graph_.outputs.push_back({op.outputs[0].name, outs[0].node});
  usedGlobals_.insert(inner.usedGlobals_.begin(), inner.usedGlobals_.end());
  auto graph = std::make_shared<Graph>(std::move(inner.graph_));
  SourceLoc where = op.loc;
  if (const std::string problem = scalarFunctionProblem(*graph, &where); !problem.empty())
    throw CompileError(where.line ? where : op.loc, fmt::format("scan's operator '{}' {}", op.name, problem),
                       {fmt::format("{}: note: the scan that uses it", at.str())});
  if (const auto wrong = associativityCounterexample(*graph))
    fail(at, fmt::format("scan's operator '{0}' is not associative: {0}({0}(a, b), c) = {1:.9g} but {0}(a, {0}(b, c)) "
                         "= {2:.9g} at a = {3}, b = {4}, c = {5}; a scan regroups its terms, so its operator must be "
                         "associative",
                         op.name, wrong->left, wrong->right, wrong->a, wrong->b, wrong->c));
  operators_[{&op, dtype}] = graph;
  return graph;
}

NodeId Elaborator::monoidScan(Frame& f, const Expr& e, const DiagramDecl& op) {
  if (e.args.size() < 3) fail(e.loc, fmt::format("scan({}, x, a[, exclusive, v]): the values and the axis", op.name));
  const NodeId x = requireArray(eval(f, *e.args[1]), e.args[1]->loc, "scan");
  const Type t = typeOf(x);
  if (!isFloat(t.dtype))
    fail(e.args[1]->loc, fmt::format("'scan' needs a floating-point array, but this is {}; cast it with f32(...)",
                                     dtypeName(t.dtype)));
  // A last argument that is no form word is the value before the first position.
  const Expr& last = *e.args.back();
  const bool formWord = last.kind == Expr::Kind::Name && (last.name == "inclusive" || last.name == "exclusive" ||
                                                          last.name == "reverse" || last.name == "lagged");
  const bool valued = e.args.size() > 3 && !formWord;
  ScanForm form = scanForm(f, e, 2, t, static_cast<int>(e.args.size()) - (valued ? 1 : 0));
  if (form.lagged) fail(e.loc, "'lagged' is a form of scan(linear, ..) alone");
  double first = 0;
  if (valued) {
    const Value v = eval(f, last);
    if (!v.isNumber) fail(last.loc, "scan's value before the first position is a number");
    if (!form.exclusive)
      fail(last.loc, fmt::format("a value before the first position is for the exclusive form: scan({}, x, a, "
                                 "exclusive, v)", op.name));
    first = v.number;
  } else if (form.exclusive) {
    fail(e.loc, fmt::format("an exclusive scan over '{}' takes the value before the first position (its identity, "
                            "which the compiler does not guess): scan({}, x, a, exclusive, v)", op.name, op.name));
  }
  const NodeId y = scanNode(x, ReduceOp::Sum, form, e.loc, -1, operatorGraph(op, t.dtype, e.args[0]->loc));
  graph_.node(y).value = first;
  return y;
}

}  // namespace llmc::elaboration
