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

namespace llmc {

std::string perfReportText(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                           const std::map<int, double>* measured = nullptr);
nlohmann::json perfReportJson(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                              const std::map<int, double>* measured = nullptr);

}  // namespace llmc
