#include "analysis/step_skip.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace llmc {

namespace {

enum class Known { Zero, NegInf, Unknown };

// The value `id` relabels (renames, transposes, broadcasts) or itself.
NodeId throughViews(const Graph& g, NodeId id) {
  for (;;) {
    const Node& n = g.node(id);
    if (n.op != Op::Rename && n.op != Op::Transpose && n.op != Op::Broadcast && n.op != Op::StopGradient) return id;
    id = n.operands[0];
  }
}

// The axis `id` is the position along (pos, through renames and
// broadcasts), or "".
std::string positionAxis(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  switch (n.op) {
    case Op::Pos: return n.axes[0];
    case Op::Rename: {
      const std::string inner = positionAxis(g, n.operands[0]);
      return inner == n.axes[0] ? n.newAxes[0] : inner;
    }
    case Op::Transpose:
    case Op::Broadcast:
    case Op::StopGradient: return positionAxis(g, n.operands[0]);
    default: return "";
  }
}


// The value of `id` wherever `cond` is `holds`, if the laws fix it: a
// select on cond picks a branch; exp(-inf) = 0; -inf + finite = -inf;
// 0 * finite = 0 / finite = 0 (the launch's other values are finite).
Known whenHolds(const Graph& g, NodeId id, NodeId cond, bool holds, int depth = 0) {
  if (depth > 24) return Known::Unknown;
  const Node& n = g.node(id);
  auto operand = [&](size_t k) { return whenHolds(g, n.operands[k], cond, holds, depth + 1); };
  switch (n.op) {
    case Op::Constant:
      if (n.value == 0) return Known::Zero;
      if (std::isinf(n.value) && n.value < 0) return Known::NegInf;
      return Known::Unknown;
    case Op::Select:
      if (throughViews(g, n.operands[0]) == cond) return whenHolds(g, n.operands[holds ? 1 : 2], cond, holds, depth + 1);
      return Known::Unknown;
    case Op::Unary:
      if (n.unary == UnaryOp::Exp && operand(0) == Known::NegInf) return Known::Zero;
      if (n.unary == UnaryOp::Neg && operand(0) == Known::Zero) return Known::Zero;
      return Known::Unknown;
    case Op::Binary:
      switch (n.binary) {
        case BinaryOp::Mul: return operand(0) == Known::Zero || operand(1) == Known::Zero ? Known::Zero : Known::Unknown;
        case BinaryOp::Div: return operand(0) == Known::Zero ? Known::Zero : Known::Unknown;
        case BinaryOp::Add: return operand(0) == Known::NegInf || operand(1) == Known::NegInf ? Known::NegInf : Known::Unknown;
        case BinaryOp::Sub: return operand(0) == Known::NegInf ? Known::NegInf : Known::Unknown;
        default: return Known::Unknown;
      }
    case Op::Rename:
    case Op::Transpose:
    case Op::Broadcast:
    case Op::StopGradient: return operand(0);
    default: return Known::Unknown;
  }
}

// Whether a slot keeps its value at every position where cond is `holds`.
bool neutral(const Graph& g, const AccumulatorSlot& slot, NodeId cond, bool holds) {
  if (slot.kind == AccumulatorSlot::Kind::Max)
    return slot.core.size() == 1 && slot.core[0].kind == StreamFactor::Kind::Value && slot.core[0].power == 1 &&
           whenHolds(g, slot.core[0].node, cond, holds) == Known::NegInf;
  for (const StreamFactor& f : slot.core) {
    if (f.power < 0 || f.pivoted()) continue;  // a value taken about a pivot is not 0 where the value is
    switch (f.kind) {
      case StreamFactor::Kind::Mask: if (throughViews(g, f.node) == cond && !holds) return true; break;
      case StreamFactor::Kind::NotMask: if (throughViews(g, f.node) == cond && holds) return true; break;
      case StreamFactor::Kind::Value: if (whenHolds(g, f.node, cond, holds) == Known::Zero) return true; break;
      case StreamFactor::Kind::Exp: if (whenHolds(g, f.node, cond, holds) == Known::NegInf) return true; break;
    }
  }
  return false;
}

}  // namespace

std::optional<StreamStepSkip> findStepSkip(const Graph& g, const StreamAnalysis& analysis, const std::string& rows,
                                           const std::string& streamAxis) {
  // Comparisons of positions are free (planning/fusion.h, isFree): no kernel holds
  // them, each one that reads them makes its own.
  for (const Node& n : g.nodes) {
    const NodeId id = n.id;
    if (n.op != Op::Compare || n.compare == CompareOp::Eq || n.compare == CompareOp::Ne) continue;
    const std::string left = positionAxis(g, n.operands[0]), right = positionAxis(g, n.operands[1]);
    auto known = [&](const std::string& a) { return a == rows || a == streamAxis; };
    if (!known(left) || !known(right) || left == right) continue;
    for (bool holds : {false, true}) {
      const bool all = std::all_of(analysis.slots.begin(), analysis.slots.end(),
                                   [&](const AccumulatorSlot& slot) { return neutral(g, slot, id, holds); });
      if (all) return StreamStepSkip{id, holds, left, right};
    }
  }
  return std::nullopt;
}

bool stepSkipped(const Graph& g, const StreamStepSkip& skip, const std::string& rows, int64_t rowFirst,
                 int64_t rowLast, int64_t stepFirst, int64_t stepLast) {
  auto range = [&](const std::string& axis) {
    return axis == rows ? std::pair{rowFirst, rowLast} : std::pair{stepFirst, stepLast};
  };
  const auto [lo, hi] = range(skip.left);
  const auto [lo2, hi2] = range(skip.right);
  bool always = false, never = false;  // the comparison true everywhere, false everywhere
  switch (g.node(skip.comparison).compare) {
    case CompareOp::Le: always = hi <= lo2; never = lo > hi2; break;
    case CompareOp::Lt: always = hi < lo2; never = lo >= hi2; break;
    case CompareOp::Ge: always = lo >= hi2; never = hi < lo2; break;
    case CompareOp::Gt: always = lo > hi2; never = hi <= lo2; break;
    default: throw std::logic_error("step skip on an equality");
  }
  return skip.neutralWhen ? always : never;
}

double stepsRunFraction(const Graph& g, const StreamStepSkip& skip, const std::string& rows, int64_t rowCount,
                        int64_t positionCount, int64_t rowsPerBlock, int64_t positionsPerStep) {
  int64_t run = 0, all = 0;
  for (int64_t r = 0; r < rowCount; r += rowsPerBlock)
    for (int64_t c = 0; c < positionCount; c += positionsPerStep, ++all)
      run += !stepSkipped(g, skip, rows, r, std::min(r + rowsPerBlock, rowCount) - 1, c,
                          std::min(c + positionsPerStep, positionCount) - 1);
  return all == 0 ? 1.0 : static_cast<double>(run) / static_cast<double>(all);
}

}  // namespace llmc
