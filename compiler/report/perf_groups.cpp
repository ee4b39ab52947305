#include "report/perf_groups.h"

#include <algorithm>

namespace llmc {

namespace {

// The first `depth` calls of a kernel's path joined (all of them: depth < 0).
std::string pathPrefix(const KernelSource& source, int depth) {
  if (depth < 0) return source.path;
  std::string out;
  for (size_t i = 0; i < source.calls.size() && static_cast<int>(i) < depth; ++i)
    out += (i ? "/" : "") + source.calls[i];
  return out;
}

int pathDepth(const std::string& grouping) {
  return grouping.size() > 5 ? std::stoi(grouping.substr(5)) : -1;
}

}  // namespace

bool isPerfGrouping(const std::string& grouping) {
  if (grouping == "pass" || grouping == "kind" || grouping == "path") return true;
  if (grouping.rfind("path:", 0) != 0 || grouping.size() == 5 || grouping.size() > 8) return false;
  return grouping.find_first_not_of("0123456789", 5) == std::string::npos && std::stoi(grouping.substr(5)) > 0;
}

std::string perfGroupKey(const Graph& graph, const PlannedKernel& kernel, const std::string& grouping) {
  std::string key;
  if (grouping == "kind") key = kernel.cost.engine;
  else if (grouping == "pass") key = kernelSource(graph, kernel).pass;
  else key = pathPrefix(kernelSource(graph, kernel), pathDepth(grouping));
  if (key.empty()) key = grouping == "kind" || grouping == "pass" ? "(none)" : "(the diagram itself)";
  return key;
}

std::vector<PerfGroup> perfGroups(const Graph& graph, const std::vector<PlannedKernel>& kernels,
                                  const std::string& grouping, const std::map<int, double>* measured) {
  std::map<std::string, PerfGroup> groups;
  for (const auto& k : kernels) {
    const std::string key = perfGroupKey(graph, k, grouping);
    PerfGroup& g = groups[key];
    g.key = key;
    ++g.kernels;
    g.predicted += k.cost.predicted;
    if (measured)
      if (auto m = measured->find(k.kernel.id); m != measured->end()) g.measured += m->second;
  }
  std::vector<PerfGroup> rows;
  for (auto& [key, g] : groups) rows.push_back(std::move(g));
  std::stable_sort(rows.begin(), rows.end(), [&](const PerfGroup& a, const PerfGroup& b) {
    return measured ? a.measured > b.measured : a.predicted > b.predicted;
  });
  return rows;
}

}  // namespace llmc
