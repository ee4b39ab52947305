// Steps of a stream that a condition on positions leaves unchanged (a causal
// mask's keys past a block's last query, a sliding window's keys outside
// it), found from the laws alone: where the condition holds one way
// everywhere in a step's box of rows and positions, each slot's core is zero
// (a sum) or -inf (a maximum) by the laws of select, exp, + and x, so the
// step changes nothing and is not run (tensor_core_stream.h emits the skip;
// the cost model counts the steps run).
//
// A condition is comparisons of positions, each side a position along the
// rows or the stream plus a constant (`pos(x) + W > pos(t)`) or a constant,
// joined by `and`, `or` and `not`. Several conditions may each leave the
// slots unchanged (nested `where`s: a causal mask and a window): a step is
// skipped where any of them does.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/streamability.h"
#include "ir/ir.h"

namespace llmc {

// pos(axis) + offset; axis "" for the constant offset alone.
struct PositionTerm {
  std::string axis;
  int64_t offset = 0;
};

// Comparisons of position terms joined by and, or, not.
struct PositionCondition {
  enum class Kind { Compare, And, Or, Not } kind = Kind::Compare;
  CompareOp compare = CompareOp::Lt;
  PositionTerm left, right;                 // Compare
  std::vector<PositionCondition> operands;  // And, Or (two), Not (one)
};

// A condition (the IR's bool value `node`) whose value `neutralWhen` leaves
// every slot unchanged.
struct NeutralCondition {
  NodeId node = -1;
  PositionCondition condition;
  bool neutralWhen = false;
};

struct StreamStepSkip {
  std::vector<NeutralCondition> conditions;  // a step is skipped where any is neutral everywhere in it
};

// The conditions on positions along `rows` and `streamAxis` that leave every
// slot of `analysis` unchanged where they hold one way, if any.
std::optional<StreamStepSkip> findStepSkip(const Graph& graph, const StreamAnalysis& analysis, const std::string& rows,
                                           const std::string& streamAxis);

// Whether `value` is 0 wherever `condition` is neutral (the laws above):
// a value a stream adds up over its rows rather than along the stream (a
// row product, planning/row_products.h) is skipped with the steps only then.
bool zeroWhereNeutral(const Graph& graph, NodeId value, const NeutralCondition& condition);

// `skip` where each of `values` is 0 wherever each of its conditions is
// neutral (a row product's weights; an output stored along the stream, whose
// skipped positions are stored as zeros), else none.
std::optional<StreamStepSkip> skipKeepingZeros(const Graph& graph, std::optional<StreamStepSkip> skip,
                                               const std::vector<NodeId>& values);

// The first and last position of an axis in a box (the block's rows, the
// step's positions), as numbers or as CUDA expressions.
using NumericRange = std::function<std::pair<int64_t, int64_t>(const std::string& axis)>;
using TextRange = std::function<std::pair<std::string, std::string>(const std::string& axis)>;

// Whether some condition is neutral at every row and position of the box:
// the step is skipped.
bool stepSkipped(const StreamStepSkip& skip, const NumericRange& box);
bool stepSkipped(const StreamStepSkip& skip, const std::string& rows, int64_t rowFirst, int64_t rowLast,
                 int64_t stepFirst, int64_t stepLast);

// The CUDA expressions of the same: a step skipped (some condition neutral
// everywhere in it), and a step no condition masks anywhere (each one
// holds the other way everywhere: it runs without the mask).
std::string stepSkippedText(const StreamStepSkip& skip, const TextRange& box);
std::string maskFreeText(const StreamStepSkip& skip, const TextRange& box);

// The steps a stream's blocks run: blocks of `rowsPerBlock` of `rowCount`
// rows, steps of `positionsPerStep` of `positionCount` positions. As the
// emitted code does, a block runs the steps from its first unskipped one to
// its last (skipped steps between run).
struct StepsRun {
  double fraction = 1;   // of the (block of rows, step) pairs
  int64_t longest = 0;   // the most any one block runs (a causal mask's last rows: all; a window's: its width's)
};
StepsRun stepsRun(const StreamStepSkip& skip, const std::string& rows, int64_t rowCount, int64_t positionCount,
                  int64_t rowsPerBlock, int64_t positionsPerStep);

}  // namespace llmc
