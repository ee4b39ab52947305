// The performance model as a report: per kernel the partition, memory per
// level against capacity, bytes per level, work per unit, predicted time and
// bottleneck; then the total.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pseudocode.h"

namespace llmc {

std::string perfReportText(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target);
nlohmann::json perfReportJson(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target);

}  // namespace llmc
