// The elaborator's internals, shared by the files that define it
// (elaborate.h is the interface): one Elaborator instantiates and inlines
// the entry diagram and everything it calls. Its methods are defined by
// concern:
//
//   elaborate.cpp             the entry, errors, sizes, axes, nodes, statements, calls
//   elaborate_expressions.cpp expressions: names, arithmetic, indexing, built-in boxes
//   elaborate_axis_boxes.cpp  the boxes that reshape axes: split, merge, rename, slice,
//                             concat, stack, pad, broadcast, scatter_add
//   elaborate_selection.cpp   the boxes that select positions: argmax, argmin, topk
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "frontend/builtins.h"
#include "frontend/elaborate.h"
#include "frontend/resource_limits.h"
#include "ir/scalar_function.h"

namespace llmc::elaboration {

// What an expression evaluates to: an array (a node of the graph) or a number
// that has no dtype yet and takes the dtype of the array it meets.
struct Value {
  bool isNumber = false;
  NodeId node = -1;
  double number = 0;
  bool isInteger = false;
};

inline Value arrayValue(NodeId id) { return Value{false, id, 0, false}; }
inline Value numberValue(double v, bool isInteger) { return Value{true, -1, v, isInteger}; }

inline std::string axesList(const Type& t) {
  std::string out = "[";
  for (size_t i = 0; i < t.axes.size(); ++i) out += (i ? " " : "") + t.axes[i].name;
  return out + "]";
}

// Limits that keep a huge (or mistaken) program from running for hours: loops
// are unrolled and composites inlined, so the graph grows with both.
constexpr int64_t kMaxLoopIterations = 100000;  // in all 'for' loops together
constexpr size_t kMaxNodes = 1000000;
constexpr size_t kMaxCallDepth = 1000;

// One instantiation of a diagram: the names visible in its body.
struct Frame {
  const DiagramDecl* decl = nullptr;
  std::map<std::string, std::string> axisNames;  // axis as written -> axis in the graph
  std::map<std::string, int64_t> axisSizes;      // axis in the graph -> size
  std::map<std::string, int64_t> symbols;        // size symbols bound by the signature
  std::map<std::string, Value> values;
  std::map<std::string, int64_t> indices;        // loop variables
};

class Elaborator {
 public:
  Elaborator(const Program& program, const SizeBindings& sizes) : program_(program), global_(sizes) {}
  // The sizes given from outside (--set) that the diagrams read.
  const std::set<std::string>& usedSizes() const { return usedGlobals_; }

  Graph run(const std::string& entryName);

 private:
  // ---------------------------------------------------------------- errors
  [[noreturn]] void fail(const SourceLoc& loc, const std::string& message);

  // An error at an argument of the call being instantiated: the argument is in
  // the caller, so that call is no note. (Nothing catches the error, so the
  // call stack may be cut.)
  [[noreturn]] void failAtArgument(const SourceLoc& loc, const std::string& message);

  // ---------------------------------------------------------------- sizes
  std::optional<int64_t> lookupSymbol(const Frame& f, const std::string& name) const;

  // Evaluates a size; nullopt when it names a symbol that is not bound yet.
  std::optional<int64_t> evalSize(const Frame& f, const SizeExpr& e);

  std::string sizeText(const SizeExpr& e);

  // Checks an axis of known size against its declared size, binding a symbol
  // the first time it is met.
  void matchSize(Frame& f, const SizeExpr& spec, int64_t actual, const std::string& what);

  DType dtypeOf(const TypeSpec& spec);

  // ---------------------------------------------------------------- axes
  std::string resolveAxis(const Frame& f, const std::string& name, const SourceLoc& loc);

  // Declares an axis created in the body (split, merge, rename, ...).
  std::string declareNewAxis(Frame& f, const std::string& name, int64_t size, const Type& within,
                             const SourceLoc& loc);

  // Refuses an array past the size limits (limits.h) before any pass
  // multiplies its sizes: `what` names it ("input 'x'", "this array").
  void checkSizeLimits(const Type& t, const std::string& what, const SourceLoc& loc);

  // ---------------------------------------------------------------- nodes
  NodeId add(Node n, const SourceLoc& loc);
  // A reference into the graph's nodes: adding a node may move them, so
  // callers that add nodes keep a copy (const Type t = typeOf(x)).
  const Type& typeOf(NodeId id) const { return graph_.node(id).type; }

  NodeId constant(double v, DType dtype, const SourceLoc& loc);

  // A number becomes a constant of the dtype it meets.
  NodeId materialize(const Value& v, DType dtype, const SourceLoc& loc);

  NodeId requireArray(const Value& v, const SourceLoc& loc, const std::string& what);

  // The axes of an elementwise result: those of the operand with the most axes
  // (the first such), then any others in operand order. Same-named axes must
  // have the same size.
  std::vector<Axis> unifyAxes(const std::vector<NodeId>& operands, const SourceLoc& loc);

  // The common dtype of an elementwise operation's operands; numbers adapt.
  DType commonDType(const std::vector<Value>& vals, const SourceLoc& loc, const char* opText);

  Value elementwise(Node n, const std::vector<Value>& vals, const SourceLoc& loc, const char* opText,
                    std::optional<DType> resultDType = std::nullopt);

  // ---------------------------------------------------------------- diagrams
  Type entryInputType(Frame& f, const Port& port);

  std::string firstUnboundSymbol(const Frame& f, const SizeExpr& e);

  // Checks an argument against an input port of a composite and binds the
  // port's axes and size symbols.
  void matchInput(Frame& f, const Port& port, NodeId arg, const SourceLoc& argLoc);

  std::string typeSpecText(const TypeSpec& s);

  // Checks a value against an output port (or an annotation) and returns it,
  // transposed to the declared order when `reorder` is set.
  NodeId checkDeclared(Frame& f, const TypeSpec& spec, NodeId value, const std::string& what,
                       const SourceLoc& loc, bool reorder);

  void declareOutputAxes(Frame& f);
  void declareTypeAxes(Frame& f, const TypeSpec& type);
  std::vector<Value> instantiateBody(Frame& f, const std::vector<Value>& args, bool isEntry);

  void runStatements(Frame& f, const std::vector<Statement>& body);

  void assign(Frame& f, const Statement::Target& target, Value v);

  void runFor(Frame& f, const Statement& s);

  bool requirementHolds(Frame& f, const Expr& e, std::string& shown);

  // ---------------------------------------------------------------- expressions
  Value eval(Frame& f, const Expr& e);

  Value evalName(Frame& f, const Expr& e);

  int64_t evalPosition(Frame& f, const Expr& e, const char* what);

  Value evalBinary(Frame& f, const Expr& e);
  Value evalLogical(Frame& f, const Expr& e);

  Value evalIndex(Frame& f, const Expr& e);

  // The axis named by a call argument.
  std::string axisArgument(Frame& f, const Expr& a);

  Value evalBuiltin(Frame& f, const Expr& e);

  Value evalContract(Frame& f, const Expr& e);

  Value evalGather(Frame& f, const Expr& e);

  // The size given for a new axis in an axis map, or nullopt (to be inferred).
  std::optional<int64_t> givenSize(Frame& f, const AxisSpec& spec);

  const Expr& axisMapArgument(const Expr& call, size_t i, size_t from, size_t to);

  Value evalSplit(Frame& f, const Expr& e);

  Value evalMerge(Frame& f, const Expr& e);

  Value evalRenameOrSlice(Frame& f, const Expr& e, bool isSlice);

  Value evalConcat(Frame& f, const Expr& e);
  Value evalStack(Frame& f, const Expr& e);
  NodeId stackAlong(Frame& f, const std::vector<NodeId>& parts, const std::string& axis, const SourceLoc& loc);
  Value evalPad(Frame& f, const Expr& e);

  Value evalBroadcast(Frame& f, const Expr& e);

  Value evalScatterAdd(Frame& f, const Expr& e);

  // ---------------------------------------------------------------- selections (elaborate_selection.cpp)
  NodeId maxOver(NodeId x, const std::string& axis, const SourceLoc& loc);
  NodeId positions(const Axis& axis, const SourceLoc& loc);
  NodeId firstMaximum(NodeId x, const std::string& axis, NodeId taken, const SourceLoc& loc);
  NodeId selectionSource(Frame& f, const Expr& e, const std::string& axisName, const SourceLoc& axisLoc,
                         std::string& axis);
  Value evalArgmax(Frame& f, const Expr& e);
  Value evalTopk(Frame& f, const Expr& e);

  // ---------------------------------------------------------------- scans (elaborate_scan.cpp)
  Value evalScan(Frame& f, const Expr& e);
  // The axis argument at `at` (an axis of t, or `s -> r`: along s, the
  // result's axis called r, as the IR prints a scan node) and the forms
  // after it.
  struct ScanForm {
    std::string axis, resultAxis;
    bool exclusive = false, reverse = false, lagged = false;
    bool printed = false;  // written as the IR prints it: an axis map, reverse or lagged
  };
  // The forms are the arguments from at + 1 to `end` (all that follow where -1).
  ScanForm scanForm(Frame& f, const Expr& e, size_t at, const Type& t, int end = -1);
  NodeId spreadTo(NodeId v, const Type& target, const SourceLoc& loc);
  // The linear recurrence h = coefficient * h + x along form.axis (Op::Scan).
  NodeId recurrence(NodeId coefficient, NodeId x, const ScanForm& form, const SourceLoc& loc);
  // A scan node: a running sum or maximum of x (the printed form), or with
  // a coefficient (as x's type) the linear recurrence.
  NodeId scanNode(NodeId x, ReduceOp op, const ScanForm& form, const SourceLoc& loc, NodeId coefficient = -1,
                  std::shared_ptr<const Graph> combine = nullptr);
  // scan(f, x, a[, exclusive, v]) over the user's monoid f (elaborate_monoid_scan.cpp).
  NodeId monoidScan(Frame& f, const Expr& e, const DiagramDecl& op);
  // The operator's graph: `op` instantiated on two numbers of `dtype`
  // (ir/scalar_function.h), checked there, and for associativity.
  std::shared_ptr<const Graph> operatorGraph(const DiagramDecl& op, DType dtype, const SourceLoc& at);

  NodeId productScan(NodeId x, const std::string& axis, bool exclusive, const SourceLoc& loc);
  NodeId linearScan(Frame& f, const Expr& e);

  std::vector<Value> callDiagram(Frame& caller, const Expr& call);

  const Program& program_;
  const SizeBindings& global_;
  mutable std::set<std::string> usedGlobals_;  // the names of global_ a size read (lookupSymbol)
  Graph graph_;
  std::vector<std::string> origin_;
  std::vector<std::pair<std::string, SourceLoc>> callStack_;
  std::map<std::string, int64_t> graphAxisSizes_;  // every axis name in the graph -> its size
  int64_t loopIterations_ = 0;                      // unrolled so far, in all loops
  // Scan operators elaborated so far, by diagram and dtype: scans over one
  // operator share its graph (so equal scans merge and it prints once).
  std::map<std::pair<const DiagramDecl*, DType>, std::shared_ptr<const Graph>> operators_;
};

}  // namespace llmc::elaboration
