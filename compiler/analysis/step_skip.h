// Steps of a stream that a comparison of positions leaves unchanged (a causal
// mask's keys past a block's last query), found from the laws alone: where
// the comparison holds one way everywhere in a step's box of rows and
// positions, each slot's core is zero (a sum) or -inf (a maximum) by the laws
// of select, exp, + and x, so the step changes nothing and is not run
// (tensor_core_stream.h emits the skip; the cost model counts the steps run).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analysis/streamability.h"
#include "ir/ir.h"

namespace llmc {

struct StreamStepSkip {
  NodeId comparison = -1;
  bool neutralWhen = false;
  std::string left, right;  // the axis whose position each side is: the row axis or the stream axis
};

// The comparison of positions along `rows` and `streamAxis` that leaves every
// slot of `analysis` unchanged where it holds one way, if any.
std::optional<StreamStepSkip> findStepSkip(const Graph& graph, const StreamAnalysis& analysis, const std::string& rows,
                                           const std::string& streamAxis);

// Whether the comparison holds `neutralWhen` at every row of [rowFirst,
// rowLast] and position of [stepFirst, stepLast]: the step is skipped.
bool stepSkipped(const Graph& graph, const StreamStepSkip& skip, const std::string& rows, int64_t rowFirst,
                 int64_t rowLast, int64_t stepFirst, int64_t stepLast);

// The fraction of a stream's (block of rows, step) pairs that run: blocks of
// `rowsPerBlock` of `rowCount` rows, steps of `positionsPerStep` of
// `positionCount` positions.
double stepsRunFraction(const Graph& graph, const StreamStepSkip& skip, const std::string& rows, int64_t rowCount,
                        int64_t positionCount, int64_t rowsPerBlock, int64_t positionsPerStep);

}  // namespace llmc
