#include "ir/autodiff.h"

#include <stdexcept>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "ir/graph_builder.h"
#include "ir/scalar_function.h"

namespace llmc {

std::string gradientName(const std::string& input) { return "grad_" + input; }

std::set<std::string> gradientOutputs(const Graph& graph) {
  std::set<std::string> names;
  for (NodeId id : graph.inputs) names.insert(gradientName(graph.node(id).name));
  std::set<std::string> out;
  for (const GraphOutput& o : graph.outputs)
    if (names.count(o.name)) out.insert(o.name);
  return out;
}

namespace {

bool contains(const Type& t, const std::string& axis) { return t.has(axis); }

std::vector<std::string> axesNotIn(const Type& t, const Type& other) {
  std::vector<std::string> out;
  for (const auto& a : t.axes)
    if (!other.has(a.name)) out.push_back(a.name);
  return out;
}

class Differentiator {
 public:
  Differentiator(const Graph& forward, const GradientOptions& options) : g_(forward), options_(options) {}

  Graph run() {
    NodeId loss = findLoss();
    std::vector<NodeId> wrt = findInputs();
    markRequired(wrt);

    adjoint_.assign(g_.nodes.size(), -1);
    size_t forwardSize = g_.nodes.size();
    {
      GraphBuilder b(g_, {"backward"});
      adjoint_[static_cast<size_t>(loss)] = b.constant(1.0, g_.node(loss).type.dtype);
    }
    // Reverse topological order: every adjoint is complete before it is used.
    for (size_t i = forwardSize; i-- > 0;) {
      {
        GraphBuilder b(g_, {"backward"});
        placePieces(b, static_cast<NodeId>(i));
      }
      if (adjoint_[i] < 0 || !required_[i]) continue;
      Node n = g_.nodes[i];  // a copy: the rules append to g_.nodes
      std::vector<std::string> origin = n.origin;
      origin.insert(origin.begin(), "backward");
      GraphBuilder b(g_, origin);
      size_t before = g_.nodes.size();
      backward(b, n, adjoint_[i]);
      // What a node's rule makes reads as d_<node> in the printed IR.
      for (size_t k = before; k < g_.nodes.size(); ++k)
        if (g_.nodes[k].name.empty()) g_.nodes[k].name = "d_" + (n.name.empty() ? std::string("v") : n.name);
    }

    Graph out = g_;
    out.outputs = {{g_.outputs[lossOutput_].name, loss}};
    for (NodeId input : wrt)
      if (gradientName(g_.node(input).name) == out.outputs[0].name)
        throw CompileError(g_.node(loss).loc, fmt::format("the loss is named '{}', the name of the gradient of '{}'; "
                                                          "rename the output",
                                                          out.outputs[0].name, g_.node(input).name));
    GraphBuilder b(out, {"backward"});
    for (NodeId input : wrt) {
      const Node in = out.node(input);  // a copy: the builder appends to out.nodes
      NodeId grad = adjoint_[static_cast<size_t>(input)];
      if (grad < 0) grad = b.constant(0.0, in.type.dtype);  // the loss does not depend on it
      grad = b.broadcastTo(b.cast(grad, in.type.dtype), in.type);
      out.node(grad).name = gradientName(in.name);
      out.outputs.push_back({gradientName(in.name), grad});
    }
    for (size_t i = forwardSize; i < out.nodes.size(); ++i) out.nodes[i].adjoint = true;
    return out;
  }

 private:
  // Where the diagram's signature is: its first input, for errors about names.
  SourceLoc signatureLoc() const { return g_.inputs.empty() ? SourceLoc{} : g_.node(g_.inputs[0]).loc; }

  NodeId findLoss() {
    if (options_.loss.empty()) {
      if (g_.outputs.size() != 1)
        throw CompileError(g_.outputs.empty() ? SourceLoc{} : g_.node(g_.outputs[0].node).loc,
                           fmt::format("'{}' has {} outputs; name the one to differentiate", g_.name,
                                       g_.outputs.size()));
      lossOutput_ = 0;
    } else {
      auto it = std::find_if(g_.outputs.begin(), g_.outputs.end(),
                             [&](const GraphOutput& o) { return o.name == options_.loss; });
      if (it == g_.outputs.end())
        throw CompileError(signatureLoc(), fmt::format("'{}' has no output named '{}'", g_.name, options_.loss));
      lossOutput_ = static_cast<size_t>(it - g_.outputs.begin());
    }
    const Node& loss = g_.node(g_.outputs[lossOutput_].node);
    if (!loss.type.axes.empty() || !isFloat(loss.type.dtype))
      throw CompileError(loss.loc, fmt::format("the loss '{}' must be a floating-point scalar to differentiate, "
                                               "but it is {}", g_.outputs[lossOutput_].name, loss.type.str()));
    return g_.outputs[lossOutput_].node;
  }

  std::vector<NodeId> findInputs() {
    std::vector<NodeId> wrt;
    for (NodeId id : g_.inputs) {
      const Node& n = g_.node(id);
      bool chosen = options_.wrt.empty()
                        ? n.isParam
                        : std::find(options_.wrt.begin(), options_.wrt.end(), n.name) != options_.wrt.end();
      if (!chosen) continue;
      if (!isFloat(n.type.dtype))
        throw CompileError(n.loc, fmt::format("cannot differentiate with respect to '{}' of type {}: it is not "
                                              "a floating-point array", n.name, n.type.str()));
      wrt.push_back(id);
    }
    for (const auto& name : options_.wrt)
      if (!g_.findInput(name))
        throw CompileError(signatureLoc(), fmt::format("'{}' has no input named '{}'", g_.name, name));
    return wrt;
  }

  // A node needs an adjoint only if it depends on an input we differentiate,
  // other than through a stop_gradient: what only a stop_gradient leads to
  // is a constant to the loss.
  void markRequired(const std::vector<NodeId>& wrt) {
    required_.assign(g_.nodes.size(), false);
    for (NodeId id : wrt) required_[static_cast<size_t>(id)] = true;
    for (const Node& n : g_.nodes) {
      if (n.op == Op::StopGradient || !isFloat(n.type.dtype)) continue;
      for (NodeId o : n.operands)
        if (required_[static_cast<size_t>(o)]) required_[static_cast<size_t>(n.id)] = true;
    }
  }

  // Adds a contribution to x's adjoint: in x's dtype, summed over the axes x
  // lacks (x was broadcast along them). An adjoint may lack some of x's axes:
  // it is then constant along them (implicitly broadcast).
  //
  // `implied`: the type the contribution stands for when it lacks axes (the
  // node's, for elementwise rules and broadcast): along an axis that x lacks
  // too, the sum of a constant is the constant times the axis's size. (The
  // adjoint of sum(x + b, r) reaches b without r; b's gradient is size(r)
  // times it.)
  void accumulate(GraphBuilder& b, NodeId x, NodeId contribution, const Type* implied = nullptr) {
    if (!required_[static_cast<size_t>(x)]) return;
    // Copies, here and below: every node the builder adds may move g_.nodes.
    const Type tx = g_.node(x).type;
    int64_t copies = 1;
    if (implied)
      for (const Axis& a : implied->axes)
        if (!tx.has(a.name) && !b.type(contribution).has(a.name)) copies *= a.size;
    contribution = b.cast(contribution, tx.dtype);
    contribution = b.sum(contribution, axesNotIn(b.type(contribution), tx));
    if (copies != 1)
      contribution = b.binary(BinaryOp::Mul, contribution, b.constant(static_cast<double>(copies), tx.dtype));
    NodeId& adj = adjoint_[static_cast<size_t>(x)];
    adj = adj < 0 ? contribution : b.binary(BinaryOp::Add, adj, contribution);
  }

  // The adjoints of x's indexed slices (x[l=0], x[l=1], ... — a stack of
  // per-layer weights) stacked back along the indexed axis: a concat of the
  // pieces, zero where no slice was used. Stacking writes each piece once,
  // where a one-hot placement per slice would make L arrays the size of x.
  void placePieces(GraphBuilder& b, NodeId x) {
    auto found = pieces_.find(x);
    if (found == pieces_.end()) return;
    const Type tx = g_.node(x).type;
    for (const auto& [axisName, byPosition] : found->second) {
      const Axis axis = *tx.find(axisName);
      // An axis keeps one size across the graph: the pieces' own axis of
      // one position gets a name of its own.
      const std::string single = freshAxisName(axisName + "_1");
      Type pieceType = tx;
      for (Axis& a : pieceType.axes)
        if (a.name == axisName) a = {single, 1};
      std::vector<NodeId> stacked;
      for (int64_t position = 0; position < axis.size; ++position) {
        NodeId piece = -1;
        if (auto it = byPosition.find(position); it != byPosition.end())
          for (NodeId part : it->second) piece = piece < 0 ? part : b.binary(BinaryOp::Add, piece, part);
        if (piece < 0) piece = b.constant(0.0, tx.dtype);
        Type lacking = pieceType;  // the piece has every axis of x but the indexed one
        std::erase_if(lacking.axes, [&](const Axis& a) { return a.name == single; });
        piece = b.sum(b.cast(piece, tx.dtype), axesNotIn(b.type(piece), lacking));
        stacked.push_back(b.broadcastTo(piece, pieceType));
      }
      accumulate(b, x, stacked.size() == 1 ? b.rename(stacked[0], single, axisName) : b.concat(stacked, single, axis));
    }
    pieces_.erase(found);
  }

  // The adjoints of a scan's operands: scans the other way (ir.h, Op::Scan).
  // In scan order, h_i = c_i * h_{i-1} + x_i (c = 1 for a sum) gives each
  // x_i the adjoint G_i of h_i, which gathers the gradient from i on:
  // G_i = grad_i + c_{i+1} G_{i+1}, a linear scan from the end, lagged;
  // each coefficient a_i takes G at the step that used it times the h
  // before that step.
  void scanAdjoint(GraphBuilder& b, const Node& n, NodeId grad) {
    const std::string& s = n.axes[0];
    const std::string& t = n.newAxes[0];
    const bool exclusive = n.lo != 0, reverse = n.hi != 0;
    const NodeId x = n.operands[0];
    const NodeId full = b.broadcastTo(grad, n.type);
    const auto along = [&](NodeId v, const std::string& from, const std::string& to) {
      return from == to ? v : b.rename(v, from, to);
    };
    if (n.combine) return monoidScanAdjoint(b, n, full);
    if (n.reduce == ReduceOp::Max) return runningMaxAdjoint(b, n, along(full, t, s));
    if (!isLinearScan(n)) {
      // A running sum: position s of x is in every sum from s on (after s
      // where exclusive), the sum of the gradient run the other way.
      accumulate(b, x, b.scan(ReduceOp::Sum, full, t, s, exclusive, !reverse));
      return;
    }
    const NodeId a = n.operands[1];
    const NodeId aOnT = along(a, s, t);
    const NodeId y = along(n.id, t, s);
    if (!exclusive && !n.lagged) {
      const NodeId G = b.linearScan(aOnT, full, t, s, false, !reverse, true);
      accumulate(b, x, G);
      accumulate(b, a, b.binary(BinaryOp::Mul, G, b.linearScan(a, x, s, s, true, reverse, false)));
    } else if (!exclusive) {  // lagged: a_i is used at the step after i
      accumulate(b, x, b.linearScan(aOnT, full, t, s, false, !reverse, false));
      accumulate(b, a, b.binary(BinaryOp::Mul, b.linearScan(aOnT, full, t, s, true, !reverse, false), y));
    } else {  // exclusive: out_i is h_{i-1}, so the gradient's scan is exclusive too
      const NodeId q = b.linearScan(aOnT, full, t, s, true, !reverse, false);
      accumulate(b, x, q);
      accumulate(b, a, b.binary(BinaryOp::Mul, q, y));
    }
  }

  // A user's monoid scan y_i = f(y_{i-1}, x_i), y_0 = x_0 (in scan order):
  // with A_i, B_i f's partials by its earlier and later input there, the
  // gradient reaching y_i is G_i = grad_i + A_{i+1} G_{i+1} (a linear scan
  // from the end, lagged, as a recurrence's) and x_i takes G_i B_i; at the
  // first position y is x itself (B = 1) and no A is read. Exclusive, the
  // output at i is y_{i-1}: G_i = grad_{i+1} + A_{i+1} G_{i+1}, the linear
  // scan from the end exclusive, and the output is the y before each x.
  void monoidScanAdjoint(GraphBuilder& b, const Node& n, NodeId grad) {
    const std::string s = n.axes[0], t = n.newAxes[0];
    const bool exclusive = n.lo != 0, reverse = n.hi != 0;
    const NodeId x = n.operands[0];
    const Type tx = g_.node(x).type;
    const int64_t size = tx.find(s)->size;
    const NodeId y = b.transposeTo(s == t ? n.id : b.rename(n.id, t, s), tx);
    // y one position back in scan order, x where nothing precedes (a number
    // f is defined at, the partials there masked below): inclusive, y
    // moved along s; exclusive, the output itself (its first position aside).
    NodeId before = y;
    if (!exclusive) {
      const Axis twice{freshAxisName(s + "_shifted"), 2 * size};
      const NodeId joined = b.concat(reverse ? std::vector<NodeId>{y, x} : std::vector<NodeId>{x, y}, s, twice);
      before = b.slice(joined, twice.name, s, reverse ? 1 : size - 1, (reverse ? 1 : size - 1) + size);
    }
    const auto [byEarlier, byLater] = inlineScalarPartials(b, *n.combine, before, x);
    const NodeId first = b.compare(CompareOp::Eq, b.pos(Axis{s, size}),
                                   b.constant(static_cast<double>(reverse ? size - 1 : 0), DType::I32));
    const NodeId A = b.select(first, zero(b, x), byEarlier);
    const NodeId B = b.select(first, b.constant(1.0, tx.dtype), byLater);
    const NodeId G = b.linearScan(s == t ? A : b.rename(A, s, t), grad, t, s, exclusive, !reverse, !exclusive);
    accumulate(b, x, b.binary(BinaryOp::Mul, G, B));
  }

  // A running maximum's adjoint, split evenly between tied positions as a
  // masked maximum's is, in linear scans: with Y the inclusive running
  // maximum, x_i takes a share wherever it is the maximum, from i on while
  // the maximum stays (c_j = [x_j <= the maximum before j]), each share the
  // gradient over the ties counted so far.
  void runningMaxAdjoint(GraphBuilder& b, const Node& n, NodeId grad) {
    const std::string& s = n.axes[0];
    const bool exclusive = n.lo != 0, reverse = n.hi != 0;
    const NodeId x = n.operands[0];
    const DType dtype = n.type.dtype;
    const NodeId self = s == n.newAxes[0] ? n.id : b.rename(n.id, n.newAxes[0], s);
    const NodeId Y = exclusive ? b.scan(ReduceOp::Max, x, s, s, false, reverse) : self;
    const NodeId before = exclusive ? self : b.scan(ReduceOp::Max, x, s, s, true, reverse);
    const NodeId stays = b.cast(b.compare(CompareOp::Le, x, before), dtype);
    const NodeId isMax = b.cast(b.compare(CompareOp::Eq, x, Y), dtype);
    const NodeId ties = b.linearScan(stays, isMax, s, s, exclusive, reverse, false);
    // Exclusive: no tie before the first position, whose gradient reaches no one.
    const NodeId share = b.binary(BinaryOp::Div, grad, exclusive ? b.binary(BinaryOp::Maximum, ties, b.constant(1.0, dtype)) : ties);
    const NodeId G = b.linearScan(stays, share, s, s, exclusive, !reverse, !exclusive);
    accumulate(b, x, b.binary(BinaryOp::Mul, isMax, G));
  }

  std::string freshAxisName(const std::string& base) const {
    std::set<std::string> used;
    for (const Node& n : g_.nodes)
      for (const Axis& a : n.type.axes) used.insert(a.name);
    std::string name = base;
    for (int k = 2; used.count(name); ++k) name = fmt::format("{}_{}", base, k);
    return name;
  }

  NodeId zero(GraphBuilder& b, NodeId like) { return b.constant(0.0, b.type(like).dtype); }

  void backward(GraphBuilder& b, const Node& n, NodeId grad) {
    const NodeId y = n.id;
    auto operand = [&](size_t k) { return n.operands[k]; };
    switch (n.op) {
      case Op::Input:
      case Op::Constant:
      case Op::Pos:
      case Op::Compare:
      case Op::StopGradient:
        return;
      case Op::Unary:
        unaryAdjoint(b, n, grad);
        return;
      case Op::Binary:
        binaryAdjoint(b, n, grad);
        return;
      case Op::Select: {
        NodeId cond = operand(0);
        accumulate(b, operand(1), b.select(cond, grad, zero(b, grad)), &n.type);
        accumulate(b, operand(2), b.select(cond, zero(b, grad), grad), &n.type);
        return;
      }
      case Op::Cast:
        if (isFloat(g_.node(operand(0)).type.dtype)) accumulate(b, operand(0), grad, &n.type);
        return;
      case Op::Transpose:
        accumulate(b, operand(0), grad, &n.type);
        return;
      case Op::Reduce:
        if (n.reduce == ReduceOp::Sum) {
          accumulate(b, operand(0), grad);  // broadcast back along the summed axes
        } else {
          // The mask of where the maximum was taken, the adjoint split evenly
          // between tied positions (as torch.amax does).
          NodeId x = operand(0);
          NodeId mask = b.cast(b.compare(CompareOp::Eq, x, y), n.type.dtype);
          NodeId ties = b.sum(mask, n.axes);
          accumulate(b, x, b.binary(BinaryOp::Mul, b.binary(BinaryOp::Div, grad, ties), mask));
        }
        return;
      case Op::Broadcast:
        accumulate(b, operand(0), grad, &n.type);  // accumulate sums over the new axes
        return;
      case Op::Scan:
        scanAdjoint(b, n, grad);
        return;
      case Op::Contract:
        contractAdjoint(b, grad, operand(0), operand(1));
        contractAdjoint(b, grad, operand(1), operand(0));
        return;
      case Op::Gather: {
        NodeId table = operand(0), index = operand(1);
        const Type tt = g_.node(table).type;
        const Axis axis = *tt.find(n.axes[0]);
        std::vector<std::string> summed = axesNotIn(g_.node(index).type, tt);
        if (summed.empty()) {
          // Each row of the table was read by at most one index (a picked
          // class per position): the adjoint is a one-hot select, computed
          // where it is used, not a scatter into a stored array.
          // The mask's axes in the table's order where the operands' order can
          // give it (a classifier's [n v] logits: [n v], not [v n], whose
          // transposed gradient could not be written 16 bytes at a time).
          const auto at = [&](const std::string& name) {
            return std::find_if(tt.axes.begin(), tt.axes.end(), [&](const Axis& a) { return a.name == name; });
          };
          const Type& it = g_.node(index).type;
          const bool axisFirst = std::all_of(it.axes.begin(), it.axes.end(),
                                             [&](const Axis& a) { return at(axis.name) < at(a.name); });
          NodeId position = b.pos(axis), picks = b.cast(index, DType::I32);
          NodeId picked = axisFirst ? b.compare(CompareOp::Eq, position, picks) : b.compare(CompareOp::Eq, picks, position);
          accumulate(b, table, b.select(picked, grad, zero(b, grad)));
          return;
        }
        NodeId full = b.broadcastTo(grad, n.type);
        accumulate(b, table, b.scatterAdd(full, index, axis, summed));
        return;
      }
      case Op::ScatterAdd: {
        NodeId full = b.broadcastTo(grad, n.type);
        accumulate(b, operand(0), b.gather(full, operand(1), n.newAxes[0]));
        return;
      }
      case Op::Split: {
        NodeId full = b.broadcastTo(grad, n.type);
        accumulate(b, operand(0), b.merge(full, n.newAxes, n.axes[0]));
        return;
      }
      case Op::Merge: {
        NodeId full = b.broadcastTo(grad, n.type);
        std::vector<Axis> parts;
        for (const auto& a : n.axes) parts.push_back(*g_.node(operand(0)).type.find(a));
        accumulate(b, operand(0), b.split(full, n.newAxes[0], parts));
        return;
      }
      case Op::Rename:
        accumulate(b, operand(0), contains(b.type(grad), n.newAxes[0]) ? b.rename(grad, n.newAxes[0], n.axes[0]) : grad);
        return;
      case Op::Index:
        // Placed at its position along the axis once every position's piece
        // is known (placePieces).
        if (required_[static_cast<size_t>(operand(0))]) pieces_[operand(0)][n.axes[0]][n.lo].push_back(grad);
        return;
      case Op::Slice:
        sliceAdjoint(b, n, grad);
        return;
      case Op::Concat: {
        const std::string& axis = n.axes[0];
        int64_t piece = g_.node(operand(0)).type.find(axis)->size;
        for (size_t k = 0; k < n.operands.size(); ++k) {
          NodeId part = contains(b.type(grad), n.newAxes[0])
                            ? b.slice(grad, n.newAxes[0], axis, static_cast<int64_t>(k) * piece,
                                      static_cast<int64_t>(k + 1) * piece)
                            : grad;
          accumulate(b, operand(k), part);
        }
        return;
      }
    }
  }

  // The rules of the elementwise functions, from their derivatives.
  void unaryAdjoint(GraphBuilder& b, const Node& n, NodeId grad) {
    const NodeId y = n.id;
    auto operand = [&](size_t k) { return n.operands[k]; };
    auto scalar = [&](double v) { return b.constant(v, n.type.dtype); };
    NodeId x = operand(0);
    NodeId local = -1;
    switch (n.unary) {
      case UnaryOp::Neg: local = b.unary(UnaryOp::Neg, grad); break;
      case UnaryOp::Exp: local = b.binary(BinaryOp::Mul, grad, y); break;
      case UnaryOp::Log: local = b.binary(BinaryOp::Div, grad, x); break;
      case UnaryOp::Tanh:  // 1 - tanh²
        local = b.binary(BinaryOp::Mul, grad, b.binary(BinaryOp::Sub, scalar(1), b.binary(BinaryOp::Mul, y, y)));
        break;
      case UnaryOp::Sqrt:  // 1 / (2 sqrt x)
        local = b.binary(BinaryOp::Div, b.binary(BinaryOp::Mul, grad, scalar(0.5)), y);
        break;
      case UnaryOp::Rsqrt:  // -x^(-3/2) / 2 = -y³ / 2
        local = b.binary(BinaryOp::Mul, grad,
                         b.binary(BinaryOp::Mul, scalar(-0.5), b.binary(BinaryOp::Mul, y, b.binary(BinaryOp::Mul, y, y))));
        break;
      case UnaryOp::Abs:
        local = b.select(b.compare(CompareOp::Lt, x, zero(b, x)), b.unary(UnaryOp::Neg, grad), grad);
        break;
      case UnaryOp::Not:  // a mask: no gradient reaches or leaves it
        return;
    }
    accumulate(b, x, local);
  }

  void binaryAdjoint(GraphBuilder& b, const Node& n, NodeId grad) {
    const NodeId y = n.id;
    auto operand = [&](size_t k) { return n.operands[k]; };
    NodeId x = operand(0), z = operand(1);
    switch (n.binary) {
      case BinaryOp::And:  // masks: no gradient reaches or leaves them
      case BinaryOp::Or:
        return;
      case BinaryOp::Add:
        accumulate(b, x, grad, &n.type);
        accumulate(b, z, grad, &n.type);
        return;
      case BinaryOp::Sub:
        accumulate(b, x, grad, &n.type);
        accumulate(b, z, b.unary(UnaryOp::Neg, grad), &n.type);
        return;
      case BinaryOp::Mul:
        accumulate(b, x, b.binary(BinaryOp::Mul, grad, z), &n.type);
        accumulate(b, z, b.binary(BinaryOp::Mul, grad, x), &n.type);
        return;
      case BinaryOp::Div:  // d(x/z)/dz = -(x/z)/z
        accumulate(b, x, b.binary(BinaryOp::Div, grad, z), &n.type);
        accumulate(b, z, b.unary(UnaryOp::Neg, b.binary(BinaryOp::Div, b.binary(BinaryOp::Mul, grad, y), z)), &n.type);
        return;
      case BinaryOp::Maximum:
      case BinaryOp::Minimum: {
        // The gradient goes to the chosen operand; ties go to the first.
        NodeId first = b.compare(n.binary == BinaryOp::Maximum ? CompareOp::Ge : CompareOp::Le, x, z);
        accumulate(b, x, b.select(first, grad, zero(b, grad)), &n.type);
        accumulate(b, z, b.select(first, zero(b, grad), grad), &n.type);
        return;
      }
    }
  }

  // A slice's adjoint: the slice's values at their positions along the axis, zero elsewhere.
  void sliceAdjoint(GraphBuilder& b, const Node& n, NodeId grad) {
    auto operand = [&](size_t k) { return n.operands[k]; };
    const Axis axis = *g_.node(operand(0)).type.find(n.axes[0]);
    NodeId position = b.pos(axis);
    NodeId values = grad;
    if (contains(b.type(grad), n.newAxes[0])) {
      // Read the slice's element j = position - lo (clamped inside the slice).
      NodeId j = b.binary(BinaryOp::Sub, position, b.constant(static_cast<double>(n.lo), DType::I32));
      j = b.binary(BinaryOp::Maximum, j, b.constant(0, DType::I32));
      j = b.binary(BinaryOp::Minimum, j, b.constant(static_cast<double>(n.hi - n.lo - 1), DType::I32));
      values = b.gather(grad, j, n.newAxes[0]);
    }
    NodeId below = b.compare(CompareOp::Lt, position, b.constant(static_cast<double>(n.hi), DType::I32));
    NodeId above = b.compare(CompareOp::Ge, position, b.constant(static_cast<double>(n.lo), DType::I32));
    accumulate(b, operand(0), b.select(above, b.select(below, values, zero(b, grad)), zero(b, grad)));
  }

  // The adjoint of one operand of a contraction: the output's adjoint
  // contracted with the other operand over every axis the operand lacks.
  void contractAdjoint(GraphBuilder& b, NodeId grad, NodeId self, NodeId other) {
    if (!required_[static_cast<size_t>(self)]) return;
    const Type ts = g_.node(self).type;
    NodeId o = b.cast(other, b.type(grad).dtype);
    // Axes only one side has, and self lacks, are summed on that side first.
    std::vector<std::string> gradOnly, otherOnly, shared;
    for (const auto& a : b.type(grad).axes)
      if (!ts.has(a.name) && !b.type(o).has(a.name)) gradOnly.push_back(a.name);
    for (const auto& a : b.type(o).axes) {
      if (ts.has(a.name)) continue;
      (b.type(grad).has(a.name) ? shared : otherOnly).push_back(a.name);
    }
    NodeId g = b.sum(grad, gradOnly);
    o = b.sum(o, otherOnly);
    // A contraction's axes are its first operand's, then the second's: the
    // operand that holds self's innermost axis goes second, so the adjoint
    // keeps that axis innermost, as self has it (attention's dV = dOᵀ·P laid
    // out [x d] like V, not transposed [d x]: stored and read contiguously).
    const std::string& inner = ts.axes.empty() ? std::string() : ts.axes.back().name;
    const bool innerFromGrad = !inner.empty() && b.type(g).has(inner) && !b.type(o).has(inner);
    const NodeId first = innerFromGrad ? o : g, second = innerFromGrad ? g : o;
    // Where the adjoint has exactly self's axes, it is written in self's
    // order outright (a running sum's gradient [b h t d e] like its
    // operand, not [b h d e t] as the operands' order would give) -- where
    // that order keeps each operand's axes in the operand's own order: a
    // GEMM writes its rows and columns as its operands lay them out (a
    // convolution's window gradient [b u c k] made from w[k c o] was
    // written 3 elements apart, 73 us where [b u k c] took 14).
    auto keepsOperandOrders = [&] {
      for (NodeId operand : {first, second}) {
        std::vector<std::string> own, inSelf;
        for (const auto& a : b.type(operand).axes)
          if (ts.has(a.name)) own.push_back(a.name);
        for (const auto& a : ts.axes)
          if (b.type(operand).has(a.name)) inSelf.push_back(a.name);
        if (own != inSelf) return false;
      }
      return true;
    };
    accumulate(b, self, keepsOperandOrders() ? b.contract(first, second, shared, ts.axes)
                                             : b.contract(first, second, shared));
  }

  Graph g_;
  const GradientOptions& options_;
  size_t lossOutput_ = 0;
  std::vector<NodeId> adjoint_;
  std::vector<bool> required_;
  // x -> indexed axis -> position -> adjoints of the slice x[axis=position]
  std::map<NodeId, std::map<std::string, std::map<int64_t, std::vector<NodeId>>>> pieces_;
};

}  // namespace

Graph differentiate(const Graph& forward, const GradientOptions& options) {
  return Differentiator(forward, options).run();
}

}  // namespace llmc
