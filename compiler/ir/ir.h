// The typed IR every pass works on: a flat graph of primitive boxes.
//
// A Graph is one diagram after inlining: its inputs, a topologically ordered
// list of nodes (each one primitive box producing one array), and its named
// outputs. Arrays carry a dtype and an ordered list of named axes; the order is
// the storage layout (row-major, last axis innermost), while the meaning of an
// operation depends only on axis names.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/source.h"

namespace llmc {

enum class DType { Bool, I32, U16, F16, BF16, F32, F64 };

const char* dtypeName(DType t);
std::optional<DType> dtypeFromName(const std::string& name);
bool isFloat(DType t);
bool isInteger(DType t);

struct Axis {
  std::string name;
  int64_t size = 0;
  bool operator==(const Axis&) const = default;
};

// An array type: dtype plus ordered named axes. A rank-0 type is a scalar.
struct Type {
  DType dtype = DType::F32;
  std::vector<Axis> axes;

  bool operator==(const Type&) const = default;
  const Axis* find(const std::string& axis) const;
  bool has(const std::string& axis) const { return find(axis) != nullptr; }
  int64_t elementCount() const;
  // "f32[b:4 t:64 c:32]"
  std::string str() const;
  // Same dtype and the same set of axes, in any order.
  bool sameAxisSet(const Type& other) const;
};

enum class Op {
  Input,     // a diagram input (parameter or data)
  Constant,  // a scalar literal: value
  Pos,       // the positions 0..n-1 along axes[0]: i32[a]
  Unary,     // elementwise: unary
  Binary,    // elementwise: binary
  Compare,   // elementwise comparison, result bool: compare
  Select,    // where(cond, a, b)
  Cast,      // dtype conversion to type.dtype
  Reduce,    // reduce over axes: reduce
  Contract,  // sum of products over axes (einsum); other axes pass through
  Gather,    // table[axes[0] = index] woven over the index's axes
  Split,     // axes[0] -> newAxes (row-major: first new axis is outermost)
  Merge,     // axes -> newAxes[0] (row-major)
  Slice,     // axes[0][lo:hi] -> newAxes[0]
  Concat,    // operands joined along axes[0] -> newAxes[0]
  Rename,    // axes[0] -> newAxes[0]; no data movement
  Index,     // the slice at axes[0] = lo; the axis disappears
  Transpose, // the same array stored in another axis order (type's order)
  Broadcast, // the operand repeated along newAxes (sizes in type)
  ScatterAdd,// operands values, index: out[newAxes[0] = index[p], rest] += values[p],
             // summing over axes (index axes the output lacks); Gather's adjoint
  StopGradient, // the operand unchanged; autodiff passes nothing back through it
  Scan,      // running reduce (sum, max) of operand 0 along axes[0], which the
             // result calls newAxes[0]: out[t] = reduce over s <= t of x[s]
             // (lo = 1: s < t, exclusive; hi = 1: s >= t / s > t, from the end).
             // With a second operand a (reduce Sum), the linear recurrence
             // h = a * h + x, taken in scan order from h = 0 (lagged: each
             // step's a read at the position stepped from); see isLinearScan.
             // With a combine (a user's monoid, ir/scalar_function.h), the
             // running fold h = combine(h, x) from h = the first element;
             // exclusive, each position's h before it and `value` at the
             // first; see isMonoidScan
};

// Not, And and Or take and give bool (masks made of comparisons); the rest numbers.
enum class UnaryOp { Neg, Exp, Log, Tanh, Sqrt, Rsqrt, Abs, Not };
enum class BinaryOp { Add, Sub, Mul, Div, Maximum, Minimum, And, Or };
// Whether the operation is a logical one: bool operands and result.
inline bool isLogical(UnaryOp op) { return op == UnaryOp::Not; }
inline bool isLogical(BinaryOp op) { return op == BinaryOp::And || op == BinaryOp::Or; }
enum class CompareOp { Lt, Le, Gt, Ge, Eq, Ne };
enum class ReduceOp { Sum, Max };

// A scan with a coefficient operand: the linear recurrence h = a * h + x.
// In scan order p0, p1, ... (from the end where reverse), with h = 0 before p0:
//   h_0 = x[p_0]; h_i = a[p_i] * h_{i-1} + x[p_i]   (lagged: a[p_{i-1}] * h_{i-1} + x[p_i])
//   out[p_i] = h_i (inclusive), h_{i-1} (exclusive; never lagged)
// A running sum is the recurrence with a = 1; a running product of x the one
// with a = x and x kept at the first position alone.
struct Node;
bool isLinearScan(const Node& n);
// A scan whose operator is a user's diagram of two numbers (Node::combine).
bool isMonoidScan(const Node& n);
// A scan's operator as the language names it: sum, max, linear, or the user's diagram.
std::string scanOperatorName(const Node& n);

const char* opName(Op op);
const char* unaryName(UnaryOp op);
const char* binaryName(BinaryOp op);
const char* compareSymbol(CompareOp op);
const char* reduceName(ReduceOp op);

using NodeId = int;
struct Graph;

struct Node {
  NodeId id = -1;
  Op op = Op::Input;
  Type type;                       // the array this node produces
  std::vector<NodeId> operands;

  // Attributes; which are meaningful depends on op (see Op above).
  UnaryOp unary = UnaryOp::Neg;
  BinaryOp binary = BinaryOp::Add;
  CompareOp compare = CompareOp::Lt;
  ReduceOp reduce = ReduceOp::Sum;
  double value = 0;                // Constant; an exclusive Scan with a combine: its first position
  std::vector<std::string> axes;   // axes the primitive acts on
  std::vector<std::string> newAxes;// axes it creates
  int64_t lo = 0, hi = 0;          // Slice bounds, Index position (lo)
  bool lagged = false;             // Scan with a coefficient: see Op::Scan
  // Scan: the operator when it is a user's monoid, a graph of two rank-0
  // inputs (earlier, later) and one output (ir/scalar_function.h); shared by
  // copies of the node, never changed.
  std::shared_ptr<const Graph> combine;

  // Bookkeeping that is not part of the node's meaning.
  std::string name;                // a readable name (from the diagram) for printing
  bool isParam = false;            // Input: a trainable parameter
  bool adjoint = false;            // made by autodiff: part of the backward pass
  SourceLoc loc;                   // where in the diagram text it came from
  std::vector<std::string> origin; // composite call path, outermost first

  // The axes this box is mapped over (weaving): the output axes the
  // primitive's own definition does not touch.
  std::vector<std::string> wovenAxes() const;
};

struct GraphOutput {
  std::string name;
  NodeId node;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;          // topological order; nodes[i].id == i
  std::vector<NodeId> inputs;       // Input nodes, in signature order
  std::vector<GraphOutput> outputs; // in signature order
  // The StopGradient nodes, in order (add keeps it): the stream analysis asks
  // for a region's stop_gradients thousands of times in a plan.
  std::vector<NodeId> stopGradients;

  const Node& node(NodeId id) const { return nodes.at(static_cast<size_t>(id)); }
  Node& node(NodeId id) { return nodes.at(static_cast<size_t>(id)); }
  NodeId add(Node n);  // assigns the id
  const Node* findInput(const std::string& name) const;
};

// Structural equality: same ops, attributes, types and wiring, ignoring names,
// locations and origins. Used by the printer round-trip tests.
bool structurallyEqual(const Graph& a, const Graph& b, std::string* why = nullptr);

// Whether nodes a and b of g compute the same value: one node, or copies of
// one (the recompute pass remakes forward values for the backward) with the
// same ops, attributes and operands, looked at 8 deep.
bool sameValue(const Graph& g, NodeId a, NodeId b);

}  // namespace llmc
