#include "ir/verify.h"
#include "ir/scalar_function.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace llmc {

namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g) {}

  void run() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (n.id != static_cast<NodeId>(i)) fail(n, fmt::format("has id {} at position {}", n.id, i));
      for (NodeId o : n.operands)
        if (o < 0 || o >= n.id) fail(n, fmt::format("uses node {}, which does not come before it", o));
      checkAxes(n);
      checkNode(n);
    }
    for (NodeId id : g_.inputs)
      if (id < 0 || static_cast<size_t>(id) >= g_.nodes.size() || g_.node(id).op != Op::Input)
        throw std::logic_error(fmt::format("IR verifier: input {} is not an input node", id));
    std::set<std::string> outputNames;
    for (const auto& o : g_.outputs) {
      if (o.node < 0 || static_cast<size_t>(o.node) >= g_.nodes.size())
        throw std::logic_error(fmt::format("IR verifier: output '{}' refers to missing node {}", o.name, o.node));
      if (!outputNames.insert(o.name).second)
        throw std::logic_error(fmt::format("IR verifier: output '{}' appears twice", o.name));
    }
  }

 private:
  [[noreturn]] void fail(const Node& n, const std::string& what) const {
    throw std::logic_error(fmt::format("IR verifier: node {} ({} {}) {}", n.id, opName(n.op), n.type.str(), what));
  }
  const Type& in(const Node& n, size_t i) const { return g_.node(n.operands[i]).type; }

  void checkAxes(const Node& n) {
    std::set<std::string> seen;
    for (const auto& a : n.type.axes) {
      if (a.size <= 0) fail(n, fmt::format("has axis '{}' of size {}", a.name, a.size));
      if (!seen.insert(a.name).second) fail(n, fmt::format("has axis '{}' twice", a.name));
      auto [it, fresh] = axisSizes_.emplace(a.name, a.size);
      if (!fresh && it->second != a.size)
        fail(n, fmt::format("gives axis '{}' size {}, but it has size {} elsewhere", a.name, a.size, it->second));
    }
  }

  void expectOperands(const Node& n, size_t count) const {
    if (n.operands.size() != count)
      fail(n, fmt::format("has {} operands, expected {}", n.operands.size(), count));
  }

  // The output's axis set must be exactly `axes` (names and sizes).
  void expectAxisSet(const Node& n, const std::vector<Axis>& axes) const {
    bool same = axes.size() == n.type.axes.size() &&
                std::all_of(axes.begin(), axes.end(), [&](const Axis& a) {
                  const Axis* b = n.type.find(a.name);
                  return b && b->size == a.size;
                });
    if (!same) fail(n, "has axes that do not follow from its operands");
  }

  std::vector<Axis> unionOf(const Node& n, size_t first = 0) const {
    std::vector<Axis> out;
    for (size_t i = first; i < n.operands.size(); ++i)
      for (const auto& a : in(n, i).axes)
        if (std::none_of(out.begin(), out.end(), [&](const Axis& b) { return b.name == a.name; })) out.push_back(a);
    return out;
  }

  std::vector<Axis> without(const Type& t, const std::vector<std::string>& drop) const {
    std::vector<Axis> out;
    for (const auto& a : t.axes)
      if (std::find(drop.begin(), drop.end(), a.name) == drop.end()) out.push_back(a);
    return out;
  }

  void expectSameDType(const Node& n, size_t first) const {
    for (size_t i = first; i < n.operands.size(); ++i)
      if (in(n, i).dtype != in(n, first).dtype) fail(n, "mixes operand dtypes");
  }

  void checkNode(const Node& n) const {
    switch (n.op) {
      case Op::Input: expectOperands(n, 0); return;
      case Op::Constant:
        expectOperands(n, 0);
        if (!n.type.axes.empty()) fail(n, "is a constant with axes");
        return;
      case Op::Pos:
        expectOperands(n, 0);
        if (n.type.dtype != DType::I32 || n.type.axes.size() != 1 || n.type.axes[0].name != n.axes.at(0))
          fail(n, "is not i32 along its axis");
        return;
      case Op::Unary:
      case Op::Binary:
      case Op::Cast:
      case Op::Transpose:
        expectOperands(n, n.op == Op::Binary ? 2 : 1);
        expectSameDType(n, 0);
        if (n.op != Op::Cast && n.type.dtype != in(n, 0).dtype) fail(n, "changes dtype");
        if ((n.op == Op::Unary && isLogical(n.unary)) || (n.op == Op::Binary && isLogical(n.binary))) {
          if (n.type.dtype != DType::Bool) fail(n, "is a logical operation on values that are not bool");
        } else if ((n.op == Op::Unary || n.op == Op::Binary) && n.type.dtype == DType::Bool) {
          fail(n, "is arithmetic on bool values");
        }
        expectAxisSet(n, unionOf(n));
        return;
      case Op::Compare:
        expectOperands(n, 2);
        expectSameDType(n, 0);
        if (n.type.dtype != DType::Bool) fail(n, "is a comparison that is not bool");
        expectAxisSet(n, unionOf(n));
        return;
      case Op::Select:
        expectOperands(n, 3);
        if (in(n, 0).dtype != DType::Bool) fail(n, "has a condition that is not bool");
        expectSameDType(n, 1);
        expectAxisSet(n, unionOf(n));
        return;
      case Op::Reduce:
        expectOperands(n, 1);
        for (const auto& a : n.axes)
          if (!in(n, 0).has(a)) fail(n, fmt::format("reduces axis '{}' its operand lacks", a));
        expectAxisSet(n, without(in(n, 0), n.axes));
        return;
      case Op::Scan: {
        if (n.operands.size() == 2) {
          // A linear recurrence: its coefficient along every axis of the values.
          if (n.reduce != ReduceOp::Sum) fail(n, "is a linear scan that is not a sum");
          if (!(in(n, 1) == in(n, 0))) fail(n, "has a coefficient of another type than its values");
          if (n.lagged && n.lo != 0) fail(n, "is a lagged exclusive scan");
        } else {
          expectOperands(n, 1);
          if (n.lagged) fail(n, "is lagged without a coefficient");
        }
        if (n.combine) {
          if (n.operands.size() != 1) fail(n, "is a scan over an operator with a coefficient");
          if (const std::string problem = scalarFunctionProblem(*n.combine); !problem.empty())
            fail(n, fmt::format("has an operator that {}", problem));
          if (n.combine->node(n.combine->inputs[0]).type.dtype != n.type.dtype)
            fail(n, "has an operator of another dtype than its values");
        }
        if (!isFloat(n.type.dtype) || n.type.dtype != in(n, 0).dtype) fail(n, "is not a float scan of its operand's dtype");
        const Axis* along = in(n, 0).find(n.axes.at(0));
        const Axis* made = n.type.find(n.newAxes.at(0));
        if (!along || !made || along->size != made->size || (n.axes[0] != n.newAxes[0] && in(n, 0).has(n.newAxes[0])))
          fail(n, "scans along a wrong axis");
        if (n.lo < 0 || n.lo > 1 || n.hi < 0 || n.hi > 1) fail(n, "has a scan form other than 0 or 1");
        std::vector<Axis> expected = without(in(n, 0), n.axes);
        expected.push_back(*made);
        expectAxisSet(n, expected);
        return;
      }
      case Op::Contract: {
        expectOperands(n, 2);
        for (const auto& a : n.axes)
          if (!in(n, 0).has(a) || !in(n, 1).has(a)) fail(n, fmt::format("contracts axis '{}' an operand lacks", a));
        Type all{n.type.dtype, unionOf(n)};
        expectAxisSet(n, without(all, n.axes));
        return;
      }
      case Op::Gather: {
        expectOperands(n, 2);
        if (!isInteger(in(n, 1).dtype)) fail(n, "has an index that is not an integer array");
        if (!in(n, 0).has(n.axes.at(0)) || in(n, 1).has(n.axes[0])) fail(n, "gathers along a wrong axis");
        Type all{n.type.dtype, unionOf(n)};
        expectAxisSet(n, without(all, n.axes));
        return;
      }
      case Op::Split:
      case Op::Merge:
      case Op::Slice:
      case Op::Rename:
      case Op::Index:
        expectOperands(n, 1);
        checkAxisBox(n);
        return;
      case Op::Broadcast: {
        expectOperands(n, 1);
        std::vector<Axis> expected = in(n, 0).axes;
        for (const auto& a : n.newAxes) {
          const Axis* b = n.type.find(a);
          if (!b || in(n, 0).has(a)) fail(n, fmt::format("broadcasts along a wrong axis '{}'", a));
          expected.push_back(*b);
        }
        if (n.type.dtype != in(n, 0).dtype) fail(n, "changes dtype");
        expectAxisSet(n, expected);
        return;
      }
      case Op::ScatterAdd: {
        expectOperands(n, 2);
        const Type& values = in(n, 0);
        const Type& index = in(n, 1);
        if (!isInteger(index.dtype)) fail(n, "has an index that is not an integer array");
        for (const auto& a : index.axes)
          if (!values.has(a.name)) fail(n, fmt::format("has index axis '{}' that the values lack", a.name));
        for (const auto& a : n.axes)
          if (!index.has(a)) fail(n, fmt::format("sums axis '{}' that the index lacks", a));
        const Axis* created = n.type.find(n.newAxes.at(0));
        if (!created || values.has(created->name)) fail(n, "scatters along a wrong axis");
        std::vector<Axis> expected = without(values, n.axes);
        expected.push_back(*created);
        expectAxisSet(n, expected);
        return;
      }
      case Op::StopGradient:
        expectOperands(n, 1);
        if (n.type != in(n, 0)) fail(n, "is not of its operand's type");
        return;
      case Op::Concat: {
        if (n.operands.size() < 2) fail(n, "joins fewer than two arrays");
        for (size_t i = 1; i < n.operands.size(); ++i)
          if (!in(n, i).sameAxisSet(in(n, 0))) fail(n, "joins arrays of different types");
        const Axis* a = in(n, 0).find(n.axes.at(0));
        if (!a) fail(n, "joins along an axis its operands lack");
        std::vector<Axis> expected = without(in(n, 0), n.axes);
        expected.push_back({n.newAxes.at(0), a->size * static_cast<int64_t>(n.operands.size())});
        expectAxisSet(n, expected);
        return;
      }
    }
  }

  void checkAxisBox(const Node& n) const {
    const Type& x = in(n, 0);
    for (const auto& a : n.axes)
      if (!x.has(a)) fail(n, fmt::format("acts on axis '{}' its operand lacks", a));
    std::vector<Axis> expected = without(x, n.axes);
    int64_t total = 1;
    for (const auto& a : n.axes) total *= x.find(a)->size;
    if (n.op == Op::Index) {
      if (n.lo < 0 || n.lo >= total) fail(n, "indexes out of range");
    } else if (n.op == Op::Slice) {
      if (n.lo < 0 || n.hi > total || n.lo >= n.hi) fail(n, "slices out of range");
      expected.push_back({n.newAxes.at(0), n.hi - n.lo});
    } else {
      int64_t made = 1;
      for (const auto& a : n.newAxes) {
        const Axis* b = n.type.find(a);
        if (!b) fail(n, fmt::format("lacks its new axis '{}'", a));
        made *= b->size;
        expected.push_back(*b);
      }
      if (made != total) fail(n, "changes the number of elements");
    }
    expectAxisSet(n, expected);
  }

  const Graph& g_;
  std::map<std::string, int64_t> axisSizes_;
};

}  // namespace

void verifyGraph(const Graph& graph) { Verifier(graph).run(); }

}  // namespace llmc
