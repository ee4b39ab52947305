// `llmc-compile --emit report`: a plan as one self-contained HTML page, its
// style and script inside it (html_report_assets.h), nothing fetched from
// anywhere, so that it opens from a file, is attached to an issue or kept
// beside a benchmark's results. Three parts:
//  - the plan drawn a box a kernel in frames of its composite calls: the
//    `--emit svg-plan --depth N` drawing (graph_drawing.h), laid out by
//    Graphviz before it is given here;
//  - the kernels as `--emit perf --json` lists them (perf_report.h): engine,
//    pass, path, partition, work, bytes, predicted time and bound, measured
//    time beside it where given; sortable by a column, and grouped by pass,
//    kind or path (its first N calls) with each group's total and share of
//    the step (perf_groups.h);
//  - the roofline (roofline.h): a dot a kernel under the target's roofs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planning/partition.h"

namespace llmc {

// The frames of composite calls the report draws its plan in where --depth
// is not given: GPT-2's step a frame a layer (gpt2_logits/gpt2_hidden/i=3).
constexpr int kReportPlanDepth = 3;

// What the page says beyond the plan itself.
struct HtmlReportInputs {
  std::string command;  // the command line that made it, shown at its top
  // The plan's drawing as Graphviz's SVG; empty where there is none, with
  // `drawingMissing` saying why (dot not on PATH, dot failed): the page
  // says so in the drawing's place.
  std::string planSvg, drawingMissing;
  int planDepth = kReportPlanDepth;  // the frames the drawing has (--depth)
  const std::map<int, double>* measured = nullptr;  // seconds by kernel id (measured_times.h)
  std::string measuredFile;                         // where they were read from
};

std::string htmlReport(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                       const HtmlReportInputs& inputs);

}  // namespace llmc
