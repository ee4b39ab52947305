// The performance model as a report: per kernel the partition, memory per
// level against capacity, bytes per level, work per unit, predicted time and
// bottleneck; then the total. With `measured` (seconds by kernel id,
// measured_times.h), each kernel's measured time and its ratio to the
// prediction, and how many kernels the prediction comes within 2x of.
#pragma once

#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "planning/partition.h"
#include "report/perf_groups.h"

namespace llmc {

// How the text report lists its kernels: in plan order or slowest first
// (measured where given, else predicted), and after the total a table per
// grouping (perf_groups.h: "pass", "kind", "path", "path:N"), each group's
// kernels, time and share of the whole.
struct PerfReportLayout {
  bool slowestFirst = false;
  std::vector<std::string> groupings;
};

std::string perfReportText(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                           const std::map<int, double>* measured = nullptr, const PerfReportLayout& layout = {});
nlohmann::json perfReportJson(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                              const std::map<int, double>* measured = nullptr);

}  // namespace llmc
