#include "report/html_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>

#include "report/html_report_assets.h"
#include "report/html_text.h"
#include "report/perf_groups.h"
#include "report/roofline.h"

namespace llmc {

namespace {

// A kernel's measured seconds, or nullptr where there are none.
const double* measuredSeconds(const HtmlReportInputs& inputs, const PlannedKernel& k) {
  if (!inputs.measured) return nullptr;
  auto m = inputs.measured->find(k.kernel.id);
  return m == inputs.measured->end() ? nullptr : &m->second;
}

// JSON inside a <script> element: no '<' (which could close the element), nor
// '>' or '&', all of which JSON may write as \u escapes inside its strings,
// the only place they can occur.
std::string jsonForScript(const nlohmann::json& value) {
  std::string out;
  for (char c : value.dump()) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

// Graphviz's SVG as an element of the page: from its <svg> tag on, without
// the XML declaration and the DOCTYPE (which names a DTD by URL, and which
// HTML does not take inside a page).
std::string svgForPage(const std::string& svg) {
  const size_t start = svg.find("<svg");
  return start == std::string::npos ? std::string() : svg.substr(start);
}

// The page's title, the command line, and the step's totals.
std::string headerSection(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                          const HtmlReportInputs& inputs) {
  double predicted = 0, measuredTotal = 0;
  int within = 0, slower = 0, faster = 0, unmeasured = 0;
  for (const auto& k : kernels) {
    predicted += k.cost.predicted;
    if (const double* m = measuredSeconds(inputs, k)) {
      measuredTotal += *m;
      const double ratio = *m / k.cost.predicted;
      ratio > 2 ? ++slower : ratio < 0.5 ? ++faster : ++within;
    } else {
      ++unmeasured;
    }
  }
  std::string out = fmt::format("<header>\n<h1>{} on {} ({})</h1>\n", escapeHtml(graph.name), escapeHtml(target.device),
                                escapeHtml(target.arch));
  if (!inputs.command.empty())
    out += fmt::format("<p class=\"command\"><code>{}</code></p>\n", escapeHtml(inputs.command));
  out += fmt::format("<p class=\"summary\" id=\"summary\">{} kernels, <b>{:.3f} ms predicted</b> by the performance "
                     "model for the target of <code>{}</code>",
                     kernels.size(), predicted * 1e3, escapeHtml(target.file));
  if (inputs.measured)
    out += fmt::format("; <b>{:.3f} ms measured</b> (<code>{}</code>): {} kernels within 2x of the prediction, "
                       "{} slower, {} faster, {} not measured",
                       measuredTotal * 1e3, escapeHtml(inputs.measuredFile), within, slower, faster, unmeasured);
  out += ".</p>\n<nav><a href=\"#plan\">plan</a><a href=\"#kernels\">kernels</a>"
         "<a href=\"#roofline\">roofline</a></nav>\n</header>\n";
  return out;
}

// The drawing of the plan, or why there is none.
std::string planSection(const std::vector<PlannedKernel>& kernels, const HtmlReportInputs& inputs) {
  std::string out = fmt::format(
      "<section id=\"plan\">\n<h2>Plan</h2>\n<p class=\"note\">Each of the {} kernels one box (its name, partition, "
      "predicted time and bound, engine, pass and composite path), inside frames of the first {} composite calls "
      "of its path (<code>--depth {}</code>), a wire where one kernel reads what another makes; as "
      "<code>--emit svg-plan --depth {}</code> draws it. Click a box for its row in the table.</p>\n",
      kernels.size(), inputs.planDepth, inputs.planDepth, inputs.planDepth);
  const std::string svg = svgForPage(inputs.planSvg);
  if (svg.empty()) {
    out += fmt::format("<p class=\"missing\" id=\"drawing-missing\">The plan is not drawn: {}.</p>\n",
                       escapeHtml(inputs.drawingMissing.empty() ? "Graphviz's dot gave no drawing"
                                                                 : inputs.drawingMissing));
    return out + "</section>\n";
  }
  out += "<div class=\"controls\">zoom: <button id=\"zoom-fit\">whole drawing</button><button id=\"zoom-out\">&minus;"
         "</button><button id=\"zoom-in\">+</button><button id=\"zoom-actual\">actual size</button></div>\n";
  return out + "<div class=\"drawing\">\n" + svg + "</div>\n</section>\n";
}

// The groupings the table offers: pass, kind, the path cut to each depth
// short of the deepest, and the whole path.
std::vector<std::string> groupingNames(const Graph& graph, const std::vector<PlannedKernel>& kernels) {
  size_t deepest = 0;
  for (const auto& k : kernels) deepest = std::max(deepest, kernelSource(graph, k).calls.size());
  std::vector<std::string> names = {"pass", "kind"};
  for (size_t depth = 1; depth < deepest; ++depth) names.push_back(fmt::format("path:{}", depth));
  names.push_back("path");
  return names;
}

std::string groupingLabel(const std::string& name) {
  if (name == "pass") return "pass (forward, backward)";
  if (name == "kind") return "kind (the engine)";
  if (name == "path") return "path (all its calls)";
  const std::string depth = name.substr(5);
  return fmt::format("path, its first {} call{}", depth, depth == "1" ? "" : "s");
}

// Each grouping's groups as perfGroups gives them (largest first), and the
// group of each kernel, by its row: what the script groups the table by.
nlohmann::json groupingsJson(const Graph& graph, const std::vector<PlannedKernel>& kernels,
                             const HtmlReportInputs& inputs) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& name : groupingNames(graph, kernels)) {
    const std::vector<PerfGroup> groups = perfGroups(graph, kernels, name, inputs.measured);
    std::map<std::string, int> index;
    nlohmann::json list = nlohmann::json::array();
    for (const PerfGroup& g : groups) {
      index[g.key] = static_cast<int>(list.size());
      list.push_back({{"key", g.key}, {"kernels", g.kernels}, {"predicted", g.predicted}, {"measured", g.measured}});
    }
    nlohmann::json keys = nlohmann::json::array();
    for (const auto& k : kernels) keys.push_back(index.at(perfGroupKey(graph, k, name)));
    out.push_back({{"name", name}, {"groups", list}, {"keys", keys}});
  }
  return out;
}

// A column of the table: its heading, whether it holds numbers (sorted as
// such, right-aligned), and what it means (the heading's tooltip).
struct Column {
  const char* heading;
  bool numeric;
  const char* meaning;
};

std::vector<Column> tableColumns(bool measured) {
  std::vector<Column> columns = {
      {"#", true, "the kernel's place in the plan (launch order)"},
      {"kernel", false, "the kernel's name: k<id>_<the value it computes>"},
      {"pass", false, "forward, backward or optimizer"},
      {"path", false, "the composite calls of the box the kernel is anchored on"},
      {"engine", false, "what the kernel runs on (the lowering's choice)"},
      {"partition", false, "grid | stream | split, as --emit perf prints it"},
      {"blocks", true, "thread blocks launched"},
      {"GFLOP", true, "tensor-core and fp32 operations (a multiply-add 2), as the roofline counts them"},
      {"GMEM MB", true, "bytes moved between GMEM and L2"},
      {"L2 MB", true, "bytes moved between L2 and the SMs"},
      {"FLOP/B", true, "operations per byte moved between GMEM and L2 (the roofline's x)"},
      {"predicted us", true, "the performance model's time"}};
  if (measured) {
    columns.push_back({"measured us", true, "the time of the --measured file (launches summed)"});
    columns.push_back({"meas/pred", true, "measured over predicted"});
  }
  columns.push_back({"TFLOP/s", true, "operations over the measured time where given, else the predicted (the roofline's y)"});
  columns.push_back({"bound by", false, "the term of the model that bounds the predicted time"});
  return columns;
}

// A numeric cell: `value` for sorting (none: sorted last) and its text.
std::string numberCell(std::optional<double> value, const std::string& text) {
  return fmt::format("<td class=\"num\" data-v=\"{}\">{}</td>", value ? fmt::format("{}", *value) : "",
                     value ? text : "-");
}

// One kernel's row.
std::string kernelRow(const Graph& graph, const PlannedKernel& k, int row, const HtmlReportInputs& inputs,
                      const std::string& colour) {
  const KernelSource source = kernelSource(graph, k);
  const double flops = kernelFlops(k.cost), gmem = k.cost.level("GMEM").movedBytes, l2 = k.cost.level("L2").movedBytes;
  const double* measured = measuredSeconds(inputs, k);
  const double seconds = measured ? *measured : k.cost.predicted;
  std::string out = fmt::format("<tr id=\"kernel-row-{0}\" data-row=\"{0}\" data-kernel=\"{1}\">", row,
                                escapeHtml(k.kernel.name));
  out += fmt::format("<td class=\"num\" data-v=\"{0}\">{0}</td>", row);
  out += fmt::format("<td class=\"name\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td>", colour,
                     escapeHtml(k.kernel.name));
  // A long path wraps after a call's '/', not inside a call's name.
  std::string path;
  for (char c : escapeHtml(source.path)) path += c == '/' ? std::string("/<wbr>") : std::string(1, c);
  out += fmt::format("<td>{}</td><td class=\"path\" title=\"{}\">{}</td><td>{}</td><td class=\"mono partition\">{}</td>",
                     escapeHtml(source.pass), escapeHtml(source.path), path, escapeHtml(k.cost.engine),
                     escapeHtml(partitionText(graph, k)));
  out += numberCell(static_cast<double>(k.cost.blocks), fmt::format("{}", k.cost.blocks));
  out += numberCell(flops, fmt::format("{:.3f}", flops / 1e9));
  out += numberCell(gmem, fmt::format("{:.2f}", gmem / 1e6));
  out += numberCell(l2, fmt::format("{:.2f}", l2 / 1e6));
  out += numberCell(gmem > 0 ? std::optional<double>(flops / gmem) : std::nullopt, fmt::format("{:.3g}", flops / gmem));
  out += numberCell(k.cost.predicted, fmt::format("{:.2f}", k.cost.predicted * 1e6));
  if (inputs.measured) {
    out += numberCell(measured ? std::optional<double>(*measured) : std::nullopt,
                      fmt::format("{:.2f}", measured ? *measured * 1e6 : 0));
    out += numberCell(measured ? std::optional<double>(*measured / k.cost.predicted) : std::nullopt,
                      fmt::format("{:.2f}", measured ? *measured / k.cost.predicted : 0));
  }
  out += numberCell(seconds > 0 ? std::optional<double>(flops / seconds) : std::nullopt,
                    fmt::format("{:.3f}", seconds > 0 ? flops / seconds / 1e12 : 0));
  out += fmt::format("<td>{}{}</td></tr>\n", escapeHtml(k.cost.bottleneck),
                     k.cost.fits ? "" : " <span class=\"unfit\">(does not fit)</span>");
  return out;
}

// The kernels' table and its controls: the grouping, opening and closing groups.
std::string kernelSection(const Graph& graph, const std::vector<PlannedKernel>& kernels,
                          const HtmlReportInputs& inputs) {
  std::string out = "<section id=\"kernels\">\n<h2>Kernels</h2>\n<p class=\"note\">The kernels as <code>--emit perf "
                    "--json</code> lists them. Click a heading to sort by it (again: the other way); group them to see "
                    "each group's total and its share of the step's time (<code>--emit perf --group-by</code>).</p>\n";
  out += "<div class=\"controls\"><label>group by <select id=\"group-by\">"
         "<option value=\"\">nothing (each kernel)</option>";
  for (const std::string& name : groupingNames(graph, kernels))
    out += fmt::format("<option value=\"{}\">{}</option>", escapeHtml(name), escapeHtml(groupingLabel(name)));
  out += "</select></label><button id=\"expand-all\">open all groups</button>"
         "<button id=\"collapse-all\">close all groups</button></div>\n";
  out += "<div class=\"table-wrap\">\n<table class=\"kernels\" id=\"kernel-table\">\n<thead><tr>";
  for (const Column& c : tableColumns(inputs.measured != nullptr))
    out += fmt::format("<th{} title=\"{}\">{}</th>", c.numeric ? " class=\"num\"" : "", escapeHtml(c.meaning),
                       escapeHtml(c.heading));
  out += "</tr></thead>\n<tbody>\n";
  const std::map<std::string, std::string> colours = engineColours(kernels);
  for (size_t i = 0; i < kernels.size(); ++i)
    out += kernelRow(graph, kernels[i], static_cast<int>(i), inputs, colours.at(kernels[i].cost.engine));
  return out + "</tbody>\n</table>\n</div>\n</section>\n";
}

// The roofline at GMEM (shown) and at L2 (a choice away), and what its axes mean.
std::string rooflineSection(const std::vector<PlannedKernel>& kernels, const Target& target,
                            const HtmlReportInputs& inputs) {
  std::string out = fmt::format(
      "<section id=\"roofline\">\n<h2>Roofline</h2>\n<p class=\"note\">x: the kernel's arithmetic intensity, its "
      "floating-point operations (tensor-core and fp32 work as the cost model counts it, a multiply-add 2; the "
      "special functions and integer work left out) per byte the model moves between GMEM and L2 (its DRAM "
      "traffic), or, picked below, between L2 and the SMs. y: those operations over the kernel's {} time. "
      "The roofs are the target's (<code>{}</code>, {}): GMEM's and L2's attainable byte rates, the tensor cores' "
      "and the fp32 lanes' peaks (solid) and attainable rates (dashed; for contractions on the CUDA cores where the "
      "plan has them). Hollow dots are off the scale (no "
      "floating-point work, or no bytes at the level); click a dot for its row in the table.</p>\n",
      inputs.measured ? "measured time where the measurement file gives it, else its predicted" : "predicted",
      escapeHtml(target.file), escapeHtml(target.device));
  out += "<div class=\"controls\">bytes moved between: <label><input type=\"radio\" name=\"roofline-level\" "
         "value=\"GMEM\" checked> GMEM and L2</label><label><input type=\"radio\" name=\"roofline-level\" value=\"L2\">"
         " L2 and the SMs</label></div>\n";
  out += rooflineSvg(kernels, target, inputs.measured, "GMEM");
  std::string l2 = rooflineSvg(kernels, target, inputs.measured, "L2");
  l2.insert(l2.find("<svg") + 4, " style=\"display:none\"");
  return out + l2 + "</section>\n";
}

}  // namespace

std::string htmlReport(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                       const HtmlReportInputs& inputs) {
  double predicted = 0, measured = 0;
  for (const auto& k : kernels) {
    predicted += k.cost.predicted;
    if (const double* m = measuredSeconds(inputs, k)) measured += *m;
  }
  const nlohmann::json data = {{"predicted", predicted},
                               {"measured", inputs.measured ? nlohmann::json(measured) : nlohmann::json(nullptr)},
                               {"groupings", groupingsJson(graph, kernels, inputs)}};
  std::string out = fmt::format("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                                "<meta name=\"generator\" content=\"llmc-compile --emit report\">\n"
                                "<title>llmc report: {} on {}</title>\n<style>{}</style>\n</head>\n<body>\n",
                                escapeHtml(graph.name), escapeHtml(target.device),
                                htmlReportStyle());
  out += headerSection(graph, kernels, target, inputs);
  out += planSection(kernels, inputs);
  out += kernelSection(graph, kernels, inputs);
  out += rooflineSection(kernels, target, inputs);
  out += "<script type=\"application/json\" id=\"report-data\">" + jsonForScript(data) + "</script>\n";
  out += fmt::format("<script>{}</script>\n</body>\n</html>\n", htmlReportScript());
  return out;
}

}  // namespace llmc
