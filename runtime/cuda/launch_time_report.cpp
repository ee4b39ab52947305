#include "launch_time_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace llmc::cuda {

namespace {

// What a launch is, for the summary by kind: a GEMM on the tile library,
// a stream on the tensor cores (attention), CUDA-core code with
// reductions, elementwise, or a helper launch.
std::string kindOf(const KernelLaunch& l) {
  if (l.gemm) return "tensor-core GEMM";
  if (!l.instructions.tensorCores.empty()) return "tensor-core stream";
  if (l.role != "tile") return l.role;
  if (l.instructions.describe().find("elementwise") != std::string::npos) return "elementwise";
  return "CUDA-core reduction";
}

// Predictions by planned kernel, in microseconds; a kernel's launches (its
// tile launch and any scatter or clear launch made for it) are compared together.
std::map<int, double> predictedUsByKernel(const std::vector<PlannedKernel>& planned) {
  std::map<int, double> predictedUs;
  for (const PlannedKernel& p : planned) predictedUs[p.kernel.id] = p.cost.predicted * 1e6;
  return predictedUs;
}

}  // namespace

std::vector<LaunchTimeRow> launchTimeRows(const CudaModule& module, const std::vector<PlannedKernel>& planned,
                                          const LaunchTimes& times) {
  std::map<int, double> predictedUs = predictedUsByKernel(planned);
  std::map<int, std::string> bound;
  for (const PlannedKernel& p : planned) bound[p.kernel.id] = p.cost.bottleneck;
  std::map<int, double> helperUs;
  for (const KernelLaunch& l : module.launches)
    if (l.kernel >= 0 && l.role != "tile" && l.predictedSeconds > 0) helperUs[l.kernel] += l.predictedSeconds * 1e6;
  std::vector<LaunchTimeRow> rows;
  for (size_t i = 0; i < module.launches.size(); ++i) {
    const KernelLaunch& l = module.launches[i];
    double predicted = -1;
    if (l.role == "tile" && predictedUs.count(l.kernel)) predicted = predictedUs[l.kernel] - helperUs[l.kernel];
    else if (l.predictedSeconds > 0) predicted = l.predictedSeconds * 1e6;
    rows.push_back({l.name, l.role, bound.count(l.kernel) ? bound[l.kernel] : "", kindOf(l), l.kernel, times.us[i],
                    predicted, times.inGraphUs[i], !l.instructions.tensorCores.empty(),
                    static_cast<bool>(times.repeated[i])});
  }
  return rows;
}

std::string describeLaunchTimes(const std::vector<LaunchTimeRow>& rows, const std::vector<PlannedKernel>& planned,
                                const LaunchTimes& times, int top) {
  std::map<int, double> predictedUs = predictedUsByKernel(planned);
  std::map<int, double> measuredByKernel;
  double totalMeasured = 0;
  for (const LaunchTimeRow& r : rows) {
    totalMeasured += r.measured;
    if (r.kernel >= 0) measuredByKernel[r.kernel] += r.measured;
  }
  double totalPredicted = 0;
  int within = 0, slower = 0, faster = 0;
  for (const auto& [kernel, measured] : measuredByKernel) {
    const double predicted = predictedUs.count(kernel) ? predictedUs[kernel] : 0;
    totalPredicted += predicted;
    const double ratio = measured / std::max(predicted, 1e-3);
    if (ratio > 2) ++slower;
    else if (ratio < 0.5) ++faster;
    else ++within;
  }

  const bool launchByLaunch = times.options.launchByLaunch;
  std::vector<LaunchTimeRow> sorted = rows;
  std::sort(sorted.begin(), sorted.end(), [](const LaunchTimeRow& a, const LaunchTimeRow& b) { return a.measured > b.measured; });
  std::string out = fmt::format(
      "timed {}: median of {} repetitions\n",
      launchByLaunch ? "launch by launch, an event recorded before each launch"
                     : fmt::format("in one CUDA graph as llmc-train replays it, an event node before each launch; "
                                   "the {} launches under {} us there timed again as a graph of {} copies (r)",
                                   std::count(times.repeated.begin(), times.repeated.end(), true), kShortLaunchUs,
                                   kShortLaunchCopies),
      times.options.reps);
  out += fmt::format("{:<34} {:>7} {:>3} {:>12} {:>12} {:>8}  {}\n", "launch", "role", "TC", "measured us",
                     "predicted us", "meas/pred", "model's bound");
  const int shown = top < 0 ? static_cast<int>(sorted.size()) : std::min<int>(top, static_cast<int>(sorted.size()));
  for (int i = 0; i < shown; ++i) {
    const LaunchTimeRow& r = sorted[static_cast<size_t>(i)];
    out += fmt::format("{:<34} {:>7} {:>3} {:>11.1f}{} {:>12} {:>8}  {}\n", r.name.substr(0, 34), r.role,
                       r.tensorCores ? "yes" : "", r.measured, r.repeated ? "r" : " ",
                       r.predicted >= 0 ? fmt::format("{:.1f}", r.predicted) : "-",
                       r.predicted > 0 ? fmt::format("{:.2f}", r.measured / r.predicted) : "-", r.bound);
  }
  const std::string measuredHow =
      launchByLaunch ? "launch by launch, sum of medians"
                     : fmt::format("sum of medians in the graph with event nodes; the graph without them, as "
                                   "llmc-train replays it: {:.3f} ms",
                                   times.graphUs / 1e3);
  out += fmt::format("total: measured {:.3f} ms ({}), predicted {:.3f} ms; "
                     "{} kernels within 2x of the prediction, {} slower than 2x, {} faster than 2x\n",
                     totalMeasured / 1e3, measuredHow, totalPredicted / 1e3, within, slower, faster);

  std::map<std::string, std::tuple<int, double, double>> byKind;  // launches, measured, predicted (us)
  for (const LaunchTimeRow& r : rows) {
    auto& [count, measured, predicted] = byKind[r.kind];
    ++count;
    measured += r.measured;
    predicted += std::max(0.0, r.predicted);
  }
  out += fmt::format("by kind: {:<22} {:>8} {:>14} {:>14}\n", "", "launches", "measured ms", "predicted ms");
  for (const auto& [kind, figures] : byKind)
    out += fmt::format("         {:<22} {:>8} {:>14.3f} {:>14.3f}\n", kind, std::get<0>(figures),
                       std::get<1>(figures) / 1e3, std::get<2>(figures) / 1e3);
  return out;
}

nlohmann::json launchTimesJson(const std::vector<LaunchTimeRow>& rows, const LaunchTimes& times) {
  nlohmann::json out = nlohmann::json::array();
  for (const LaunchTimeRow& r : rows)
    out.push_back({{"launch", r.name}, {"role", r.role}, {"kind", r.kind}, {"kernel", r.kernel},
                   {"tensor_cores", r.tensorCores}, {"measured_us", r.measured}, {"predicted_us", r.predicted},
                   {"in_graph_us", r.inGraph},
                   {"bound", r.bound},
                   {"timed", r.repeated ? "copies" : times.options.launchByLaunch ? "launch by launch" : "in order"}});
  return out;
}

}  // namespace llmc::cuda
