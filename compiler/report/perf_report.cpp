#include "report/perf_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace llmc {

namespace {

// The kernels' time by group, largest first: predicted, and measured where given.
std::string groupTable(const Graph& graph, const std::vector<PlannedKernel>& kernels, const std::string& grouping,
                       const std::map<int, double>* measured) {
  const std::vector<PerfGroup> rows = perfGroups(graph, kernels, grouping, measured);
  double predicted = 0, measuredTotal = 0;
  for (const PerfGroup& g : rows) predicted += g.predicted, measuredTotal += g.measured;
  std::string out = fmt::format("{:<52} {:>8} {:>13} {:>7}{}\n", "by " + grouping + ":", "kernels", "predicted ms", "share",
                                measured ? fmt::format(" {:>12} {:>7}", "measured ms", "share") : "");
  for (const PerfGroup& g : rows) {
    out += fmt::format("  {:<50} {:>8} {:>13.3f} {:>6.1f}%", g.key, g.kernels, g.predicted * 1e3,
                       predicted > 0 ? 100 * g.predicted / predicted : 0.0);
    if (measured)
      out += fmt::format(" {:>12.3f} {:>6.1f}%", g.measured * 1e3, measuredTotal > 0 ? 100 * g.measured / measuredTotal : 0.0);
    out += "\n";
  }
  return out;
}

}  // namespace

std::string perfReportText(const Graph& graph, const std::vector<PlannedKernel>& all, const Target& target,
                           const std::map<int, double>* measured, const PerfReportLayout& layout) {
  std::vector<PlannedKernel> kernels = all;
  if (layout.slowestFirst) {
    auto time = [&](const PlannedKernel& k) {
      if (measured)
        if (auto m = measured->find(k.kernel.id); m != measured->end()) return m->second;
      return measured ? 0.0 : k.cost.predicted;
    };
    std::stable_sort(kernels.begin(), kernels.end(), [&](const auto& a, const auto& b) { return time(a) > time(b); });
  }
  std::string out = fmt::format("performance model: {} on {} ({} SMs, GMEM {:.2f} TB/s attainable)\n", graph.name,
                                target.device, target.smCount, target.level("GMEM").attainableBandwidth / 1e12);
  // The partition is never cut short (a stream's share or a split is its end): a longer one shifts its row.
  out += fmt::format("{:<28} {:<44} {:>10} {:>10} {:>10} {:>9} {:>10}{}  {}\n", "kernel", "partition (grid | stream | split)",
                     "SMEM/blk", "L2->SMEM", "TC GFLOP", "blocks", "time us",
                     measured ? fmt::format(" {:>11} {:>9}", "measured us", "meas/pred") : "", "bound by");
  double total = 0, totalBytes = 0, totalFlops = 0, totalMeasured = 0;
  int within = 0, slower = 0, faster = 0, unmeasured = 0;
  for (const auto& k : kernels) {
    double tc = 0;
    for (const auto& [unit, ops] : k.cost.work)
      if (unit.rfind("tensor", 0) == 0) tc += ops;
    std::string measuredColumns;
    if (measured) {
      auto m = measured->find(k.kernel.id);
      if (m == measured->end()) {
        measuredColumns = fmt::format(" {:>11} {:>9}", "-", "-");
        ++unmeasured;
      } else {
        const double ratio = m->second / k.cost.predicted;
        measuredColumns = fmt::format(" {:>11.2f} {:>9.2f}", m->second * 1e6, ratio);
        totalMeasured += m->second;
        ratio > 2 ? ++slower : ratio < 0.5 ? ++faster : ++within;
      }
    }
    // The launch's shared memory and grid where the lowering knows them (a
    // GEMM's ring of stages, its persistent grid), else the partition's.
    const double smem = k.cost.launchedSmemBytes >= 0 ? static_cast<double>(k.cost.launchedSmemBytes)
                                                      : k.cost.level("SMEM").memoryBytes;
    const int64_t blocks = k.cost.launchedBlocks >= 0 ? k.cost.launchedBlocks : k.cost.blocks;
    out += fmt::format("{:<28} {:<44} {:>8.1f}KB {:>8.1f}MB {:>10.2f} {:>9} {:>10.2f}{}  {}{}\n", k.kernel.name.substr(0, 28),
                       partitionText(graph, k), smem / 1024, k.cost.level("L2").movedBytes / 1e6, tc / 1e9, blocks,
                       k.cost.predicted * 1e6,
                       measuredColumns, k.cost.bottleneck, k.cost.fits ? "" : " (does not fit)");
    total += k.cost.predicted;
    totalBytes += k.cost.level("L2").movedBytes;
    totalFlops += tc;
  }
  out += fmt::format("total: {} kernels, {:.3f} ms predicted, {:.2f} GB moved, {:.1f} tensor-core GFLOP\n",
                     kernels.size(), total * 1e3, totalBytes / 1e9, totalFlops / 1e9);
  if (measured)
    out += fmt::format("measured: {:.3f} ms; {} kernels within 2x of the prediction, {} slower, {} faster{}\n",
                       totalMeasured * 1e3, within, slower, faster,
                       unmeasured ? fmt::format(", {} not measured", unmeasured) : "");
  for (const std::string& grouping : layout.groupings) out += groupTable(graph, all, grouping, measured);
  return out;
}

nlohmann::json perfReportJson(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                              const std::map<int, double>* measured) {
  nlohmann::json list = nlohmann::json::array();
  double total = 0;
  for (const auto& k : kernels) {
    const KernelSource source = kernelSource(graph, k);
    nlohmann::json levels = nlohmann::json::array();
    for (const auto& l : k.cost.levels)
      levels.push_back({{"level", l.level}, {"memory_bytes", l.memoryBytes}, {"capacity_bytes", l.capacityBytes},
                        {"moved_bytes", l.movedBytes}, {"seconds", l.seconds}});
    list.push_back({{"name", k.kernel.name},
                    {"path", source.path},
                    {"pass", source.pass},
                    {"location", source.location},
                    {"nodes", k.kernel.nodes.size()},
                    {"group_tiles", k.partition.groupTiles},
                    {"stream_axis", k.shape.streamAxis},
                    {"stream_chunk", k.partition.streamChunk},
                    {"split_tiles", k.partition.splitTiles},
                    {"blocks", k.cost.blocks},
                    {"launched_blocks", k.cost.launchedBlocks},
                    {"launched_smem_bytes", k.cost.launchedSmemBytes},
                    {"levels", levels},
                    {"work", k.cost.work},
                    {"seconds", k.cost.seconds},
                    {"predicted_seconds", k.cost.predicted},
                    {"bottleneck", k.cost.bottleneck},
                    {"engine", k.cost.engine},
                    {"fits", k.cost.fits}});
    if (measured && measured->count(k.kernel.id)) list.back()["measured_seconds"] = measured->at(k.kernel.id);
    total += k.cost.predicted;
  }
  return {{"diagram", graph.name}, {"arch", target.arch}, {"device", target.device}, {"kernels", list},
          {"predicted_seconds", total}};
}

}  // namespace llmc
