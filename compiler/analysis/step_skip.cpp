#include "analysis/step_skip.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

// `id` as a position along an axis plus a constant (through renames,
// broadcasts and additions of integer constants), or a constant.
std::optional<PositionTerm> positionTerm(const Graph& g, NodeId id, int depth = 0) {
  if (depth > 24) return std::nullopt;
  const Node& n = g.node(id);
  auto integral = [](const Node& c) {
    return c.op == Op::Constant && std::isfinite(c.value) && c.value == std::floor(c.value) && std::abs(c.value) < 1e15;
  };
  switch (n.op) {
    case Op::Pos: return PositionTerm{n.axes[0], 0};
    case Op::Constant:
      if (integral(n)) return PositionTerm{"", static_cast<int64_t>(n.value)};
      return std::nullopt;
    case Op::Rename: {
      std::optional<PositionTerm> inner = positionTerm(g, n.operands[0], depth + 1);
      if (inner && inner->axis == n.axes[0]) inner->axis = n.newAxes[0];
      return inner;
    }
    case Op::Transpose:
    case Op::Broadcast:
    case Op::StopGradient: return positionTerm(g, n.operands[0], depth + 1);
    case Op::Binary: {
      if (n.binary != BinaryOp::Add && n.binary != BinaryOp::Sub) return std::nullopt;
      std::optional<PositionTerm> a = positionTerm(g, n.operands[0], depth + 1), b = positionTerm(g, n.operands[1], depth + 1);
      if (!a || !b || (!a->axis.empty() && !b->axis.empty())) return std::nullopt;  // one position at most
      if (n.binary == BinaryOp::Sub && !b->axis.empty()) return std::nullopt;           // no negated positions
      return PositionTerm{a->axis.empty() ? b->axis : a->axis,
                          n.binary == BinaryOp::Add ? a->offset + b->offset : a->offset - b->offset};
    }
    default: return std::nullopt;
  }
}

// `id` as a condition on positions along `rows` and `stream`, if it is one.
std::optional<PositionCondition> positionCondition(const Graph& g, NodeId id, const std::string& rows,
                                                   const std::string& stream, int depth = 0) {
  if (depth > 24) return std::nullopt;
  const Node& n = g.node(throughViews(g, id));
  PositionCondition c;
  if (n.op == Op::Compare) {
    std::optional<PositionTerm> left = positionTerm(g, n.operands[0]), right = positionTerm(g, n.operands[1]);
    auto known = [&](const PositionTerm& t) { return t.axis.empty() || t.axis == rows || t.axis == stream; };
    if (!left || !right || !known(*left) || !known(*right)) return std::nullopt;
    c.compare = n.compare, c.left = *left, c.right = *right;
    return c;
  }
  const bool logical = (n.op == Op::Binary && isLogical(n.binary)) || (n.op == Op::Unary && isLogical(n.unary));
  if (!logical) return std::nullopt;
  c.kind = n.op == Op::Unary ? PositionCondition::Kind::Not
           : n.binary == BinaryOp::And ? PositionCondition::Kind::And
                                       : PositionCondition::Kind::Or;
  for (NodeId o : n.operands) {
    std::optional<PositionCondition> part = positionCondition(g, o, rows, stream, depth + 1);
    if (!part) return std::nullopt;
    c.operands.push_back(std::move(*part));
  }
  return c;
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
    case Op::Select: {
      if (throughViews(g, n.operands[0]) == cond) return whenHolds(g, n.operands[holds ? 1 : 2], cond, holds, depth + 1);
      // On another condition (nested masks): known where both branches are.
      const Known taken = operand(1);
      return taken == operand(2) ? taken : Known::Unknown;
    }
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

// Whether a condition is true everywhere (`always`) or false everywhere
// (`never`) in a box, as numbers or as CUDA expressions: the same logic.
template <class T>
struct Truth {
  T always, never;
};

Truth<bool> truth(const PositionCondition& c, const NumericRange& box) {
  using K = PositionCondition::Kind;
  if (c.kind == K::Compare) {
    auto range = [&](const PositionTerm& t) {
      if (t.axis.empty()) return std::pair{t.offset, t.offset};
      const auto [lo, hi] = box(t.axis);
      return std::pair{lo + t.offset, hi + t.offset};
    };
    const auto [alo, ahi] = range(c.left);
    const auto [blo, bhi] = range(c.right);
    switch (c.compare) {
      case CompareOp::Le: return {ahi <= blo, alo > bhi};
      case CompareOp::Lt: return {ahi < blo, alo >= bhi};
      case CompareOp::Ge: return {alo >= bhi, ahi < blo};
      case CompareOp::Gt: return {alo > bhi, ahi <= blo};
      case CompareOp::Eq: return {alo == ahi && blo == bhi && alo == blo, ahi < blo || alo > bhi};
      case CompareOp::Ne: return {ahi < blo || alo > bhi, alo == ahi && blo == bhi && alo == blo};
    }
  }
  if (c.kind == K::Not) {
    const Truth<bool> t = truth(c.operands[0], box);
    return {t.never, t.always};
  }
  const Truth<bool> a = truth(c.operands[0], box), b = truth(c.operands[1], box);
  if (c.kind == K::And) return {a.always && b.always, a.never || b.never};
  return {a.always || b.always, a.never && b.never};
}

Truth<std::string> truthText(const PositionCondition& c, const TextRange& box) {
  using K = PositionCondition::Kind;
  if (c.kind == K::Compare) {
    auto range = [&](const PositionTerm& t) -> std::pair<std::string, std::string> {
      if (t.axis.empty()) return {fmt::format("{}", t.offset), fmt::format("{}", t.offset)};
      const auto [lo, hi] = box(t.axis);
      if (t.offset == 0) return {lo, hi};
      return {fmt::format("({} + {})", lo, t.offset), fmt::format("({} + {})", hi, t.offset)};
    };
    const auto [alo, ahi] = range(c.left);
    const auto [blo, bhi] = range(c.right);
    auto f = [](const std::string& x, const char* op, const std::string& y) { return fmt::format("{} {} {}", x, op, y); };
    const std::string equal = fmt::format("({} && {} && {})", f(alo, "==", ahi), f(blo, "==", bhi), f(alo, "==", blo));
    const std::string apart = fmt::format("({} || {})", f(ahi, "<", blo), f(alo, ">", bhi));
    switch (c.compare) {
      case CompareOp::Le: return {f(ahi, "<=", blo), f(alo, ">", bhi)};
      case CompareOp::Lt: return {f(ahi, "<", blo), f(alo, ">=", bhi)};
      case CompareOp::Ge: return {f(alo, ">=", bhi), f(ahi, "<", blo)};
      case CompareOp::Gt: return {f(alo, ">", bhi), f(ahi, "<=", blo)};
      case CompareOp::Eq: return {equal, apart};
      case CompareOp::Ne: return {apart, equal};
    }
  }
  if (c.kind == K::Not) {
    Truth<std::string> t = truthText(c.operands[0], box);
    return {t.never, t.always};
  }
  const Truth<std::string> a = truthText(c.operands[0], box), b = truthText(c.operands[1], box);
  auto both = [](const std::string& x, const char* op, const std::string& y) { return fmt::format("({} {} {})", x, op, y); };
  if (c.kind == K::And) return {both(a.always, "&&", b.always), both(a.never, "||", b.never)};
  return {both(a.always, "||", b.always), both(a.never, "&&", b.never)};
}

}  // namespace

bool zeroWhereNeutral(const Graph& g, NodeId value, const NeutralCondition& condition) {
  return whenHolds(g, value, condition.node, condition.neutralWhen) == Known::Zero;
}

std::optional<StreamStepSkip> skipKeepingZeros(const Graph& g, std::optional<StreamStepSkip> skip,
                                               const std::vector<NodeId>& values) {
  if (!skip) return skip;
  for (NodeId v : values)
    for (const NeutralCondition& c : skip->conditions)
      if (!zeroWhereNeutral(g, v, c)) return std::nullopt;
  return skip;
}

std::optional<StreamStepSkip> findStepSkip(const Graph& g, const StreamAnalysis& analysis, const std::string& rows,
                                           const std::string& streamAxis) {
  // Conditions on positions are free (planning/fusion.h, isFree): no kernel
  // holds them, each one that reads them makes its own; so the whole graph's
  // are candidates.
  StreamStepSkip skip;
  for (const Node& n : g.nodes) {
    const bool condition = n.op == Op::Compare || (n.op == Op::Binary && isLogical(n.binary)) ||
                           (n.op == Op::Unary && isLogical(n.unary));
    if (!condition) continue;
    const std::optional<PositionCondition> positions = positionCondition(g, n.id, rows, streamAxis);
    if (!positions) continue;
    for (bool holds : {false, true}) {
      const bool all = std::all_of(analysis.slots.begin(), analysis.slots.end(),
                                   [&](const AccumulatorSlot& slot) { return neutral(g, slot, n.id, holds); });
      if (all) {
        skip.conditions.push_back({n.id, *positions, holds});
        break;
      }
    }
  }
  if (skip.conditions.empty() || analysis.slots.empty()) return std::nullopt;
  return skip;
}

bool stepSkipped(const StreamStepSkip& skip, const NumericRange& box) {
  return std::any_of(skip.conditions.begin(), skip.conditions.end(), [&](const NeutralCondition& c) {
    const Truth<bool> t = truth(c.condition, box);
    return c.neutralWhen ? t.always : t.never;
  });
}

bool stepSkipped(const StreamStepSkip& skip, const std::string& rows, int64_t rowFirst, int64_t rowLast,
                 int64_t stepFirst, int64_t stepLast) {
  return stepSkipped(skip, [&](const std::string& axis) {
    return axis == rows ? std::pair{rowFirst, rowLast} : std::pair{stepFirst, stepLast};
  });
}

namespace {

// The conditions over the box, joined: some neutral everywhere (`skipped`:
// or'ed), or each the other way everywhere (and'ed).
std::string conditionsText(const StreamStepSkip& skip, const TextRange& box, bool skipped) {
  std::string out;
  for (const NeutralCondition& c : skip.conditions) {
    const Truth<std::string> t = truthText(c.condition, box);
    out += (out.empty() ? "" : skipped ? " || " : " && ") + (c.neutralWhen == skipped ? t.always : t.never);
  }
  return out;
}

}  // namespace

std::string stepSkippedText(const StreamStepSkip& skip, const TextRange& box) { return conditionsText(skip, box, true); }

std::string maskFreeText(const StreamStepSkip& skip, const TextRange& box) { return conditionsText(skip, box, false); }

StepsRun stepsRun(const StreamStepSkip& skip, const std::string& rows, int64_t rowCount, int64_t positionCount,
                  int64_t rowsPerBlock, int64_t positionsPerStep) {
  int64_t run = 0, all = 0, longest = 0;
  for (int64_t r = 0; r < rowCount; r += rowsPerBlock) {
    const int64_t rowLast = std::min(r + rowsPerBlock, rowCount) - 1;
    auto skipped = [&](int64_t c) {
      return stepSkipped(skip, rows, r, rowLast, c, std::min(c + positionsPerStep, positionCount) - 1);
    };
    const int64_t steps = (positionCount + positionsPerStep - 1) / positionsPerStep;
    all += steps;
    int64_t first = 0, last = steps - 1;
    while (first <= last && skipped(first * positionsPerStep)) ++first;
    while (last >= first && skipped(last * positionsPerStep)) --last;
    run += last - first + 1;
    longest = std::max(longest, last - first + 1);
  }
  return {all == 0 ? 1.0 : static_cast<double>(run) / static_cast<double>(all), longest};
}

}  // namespace llmc
