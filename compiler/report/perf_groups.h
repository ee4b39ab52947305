// Kernels in groups, for the reports that say where a step's time goes
// (`--emit perf --group-by`, the HTML report's grouped table): by "pass"
// (forward, backward, optimizer), "kind" (the engine a kernel runs on), or
// "path" (the composite calls it comes from; "path:N" their first N, as a
// scan's "i=3", a layer of GPT-2, is the third).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planning/partition.h"

namespace llmc {

// Whether `grouping` is one of "pass", "kind", "path", "path:N" (N from 1).
bool isPerfGrouping(const std::string& grouping);

// The group of `grouping` a kernel falls in: its pass, its engine, or its
// path (cut to N calls); "(none)" or "(the diagram itself)" where empty.
std::string perfGroupKey(const Graph& graph, const PlannedKernel& kernel, const std::string& grouping);

// One group's kernels and their time: predicted, and measured (the sum of
// the measured ones; 0 without measurements).
struct PerfGroup {
  std::string key;
  int kernels = 0;
  double predicted = 0, measured = 0;
};

// The groups of `grouping`, largest first (by measured time where
// `measured` is given, else predicted; ties in key order).
std::vector<PerfGroup> perfGroups(const Graph& graph, const std::vector<PlannedKernel>& kernels,
                                  const std::string& grouping, const std::map<int, double>* measured);

}  // namespace llmc
