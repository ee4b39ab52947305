// The front end as one straight list of passes, from diagram text to
// canonical IR (see pipeline.cpp); the back end's stages follow (backend.h).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "driver/pass_runner.h"
#include "frontend/program.h"
#include "ir/ir.h"
#include "ir/recompute.h"
#include "planning/cost_model.h"
#include "planning/target.h"

namespace llmc {

struct PipelineOptions {
  std::string path;              // the main diagram file
  std::string entry;             // the diagram to compile; empty: the last in the file
  SizeBindings sizes;            // --set
  bool grad = false;             // append the backward graph (autodiff)
  std::string loss;              // with grad: the output to differentiate (empty: the only one)
  std::vector<std::string> wrt;  // with grad: inputs to differentiate against (empty: params)
  // The target whose cost model decides what the backward pass recomputes
  // (the recompute pass runs with grad when one is given).
  const Target* target = nullptr;
  CostOptions cost;
  bool recompute = true;         // with grad and a target: run the recompute pass (false: store what the backward reads)
  RecomputeOptions remaking;     // the recompute pass's policy (ir/recompute.h)
  bool collectTerms = true;      // with grad: collect like terms of the backward's sums (ir/collect_terms.h)
  PassReporting reporting;       // --dump-after (the IR after a pass) and --time-passes
  // If given: filled with the names of `sizes` the diagrams read (a size
  // given on a command line that nothing reads is a mistake worth saying).
  std::set<std::string>* usedSizes = nullptr;
};

// Sizes as the command lines give them, "B=4,T=64": every NAME=N with N a
// positive whole number of at most kMaxAxisSize (2^40). Throws std::invalid_argument
// naming the bad item.
SizeBindings parseSizeBindings(const std::string& text);

// The names of the passes, in order, for --dump-after and --help.
const std::vector<std::string>& passNames();

// Runs the passes from diagram text to canonical IR. Throws CompileError for
// errors in the diagrams.
Graph compileToIR(const PipelineOptions& options);

}  // namespace llmc
