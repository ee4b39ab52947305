// llmc-compile: diagram files in; IR, kernels, reports or CUDA out. The
// front end's passes (driver/pipeline.h) make the IR; where the output needs
// a target, the back end's stages (driver/backend.h) follow.
#include <pthread.h>
#include <unistd.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analysis/scan_streams.h"
#include "analysis/streamability.h"
#include "atomic_file.h"
#include "command_line.h"
#include "driver/backend.h"
#include "driver/pipeline.h"
#include "ir/json_export.h"
#include "ir/print.h"
#include "lowering/lowering.h"
#include "planning/data_parallel_cost.h"
#include "planning/memory_plan.h"
#include "planning/target.h"
#include "report/graph_drawing.h"
#include "report/html_report.h"
#include "report/measured_times.h"
#include "report/perf_report.h"
#include "report/pseudocode.h"
#ifdef LLMC_HAVE_NVRTC
#include "nvrtc_compiler.h"
#endif

namespace {

const char* kUsage = R"(usage: llmc-compile FILE.dg [options]

Compiles the last diagram of FILE.dg (or the one named with --entry) and prints
the result.

options:
  --emit KIND         what to print: ir (the inlined primitive graph, as a
                      diagram; the default), json (the same graph as JSON), or
                      streams (for each reduced axis, whether the whole diagram
                      streams over it, with the accumulator it needs),
                      pseudocode (the kernels, partitioned for --arch, as
                      loops), perf (the performance model per kernel), cuda
                      (the CUDA C++ source of every launch, docs/codegen.md)
                      or launches (the launch description of that source as
                      JSON: grid, block, parameters, tensor maps, buffers),
                      or ptx (that source compiled with NVRTC for --arch; no
                      GPU needed), or memory (the device memory plan of that
                      source: arena, peak, outputs written in place over
                      their inputs, the largest arrays at the peak), or dot
                      (the diagram as a Graphviz graph: a box a primitive,
                      wires labelled with their axes, a frame a composite's
                      call; `dot -Tsvg` draws it), or dot-plan (the same with
                      the kernels planned for --arch as coloured frames: each
                      one's partition, predicted time and bound), or svg and
                      svg-plan (those laid out by Graphviz's dot, which must
                      be on PATH), or report (one self-contained HTML page:
                      the svg-plan drawing a box a kernel, the perf table
                      sortable and grouped, a roofline; docs/performance.md)
  --arch ARCH         the target for pseudocode, perf, cuda, launches, ptx,
                      memory, dot-plan, svg-plan and report: sm_80, sm_90a, a
                      target .json file, or auto (the GPU present); default
                      sm_90a
  --device NAME       a device of the arch's file (H100-SXM, H200, ...)
  --storage f32|bf16  how floats are stored in memory, for the model and the
                      CUDA (default bf16)
  --f32 LIST          under bf16 storage, the graph inputs and outputs named in
                      LIST (comma-separated; NAME* names those starting with
                      NAME) stored in f32, as llmc-train keeps its gradients
                      for its f32 master weights: --f32 'grad_*'
  --caller-memory     with --emit memory: the graph's inputs and outputs live
                      in memory the caller places (as llmc-train places its
                      parameters, gradients and tokens); the arena holds the rest
  --json              with --emit perf: the report as JSON
  --measured FILE     with --emit perf or report: set each kernel's measured
                      time (a step_kernels_bench --json file of the same plan)
                      and its ratio to the prediction beside the model
  --group-by LIST     with --emit perf: after the total, the time and share of
                      each group of kernels, a table per grouping: pass
                      (forward, backward, optimizer), kind (the engine), path
                      (the composite calls a kernel comes from) or path:N (their
                      first N: a scan's i=3 is a layer); e.g. pass,kind,path:3
  --sort time         with --emit perf: the kernels slowest first (measured
                      where --measured gives it, else predicted)
  --depth N           with --emit dot or svg: composite calls nested deeper than N
                      frames drawn as one box each (0: every call of the
                      diagram one box; default: all open); with dot-plan or
                      svg-plan: each kernel one box, in frames of its first N
                      calls, wires where one reads what another makes; with
                      report: that drawing's N (default 3)
  --gpus N            with --grad --emit perf: data-parallel training over N GPUs of
                      one node; adds the gradients' communication over the
                      interconnect and how much of it the backward hides
  --zero 0|1          with --gpus: ZeRO stage (1: sharded optimizer state,
                      reduce-scatter + all-gather; default 0, all-reduce)
  --set NAME=N        bind the size NAME to N; repeat it, or give several at
                      once: --set B=4,T=64
  --entry NAME        the diagram to compile (default: the last one in FILE)
  --grad              add the backward pass: the outputs become the loss and
                      the gradient of every param input (grad_NAME); with a
                      target (pseudocode, perf, cuda, launches, ptx) the cost
                      model then decides what the backward recomputes
  --hold-less 0|1     with --grad and a target: 1 (default) remakes in the
                      backward, for the price of writing it again, a value
                      the forward stores and the backward reads that is made
                      elementwise from what the backward holds anyway (GPT-2's
                      GELU output, beside its derivative), so that it is not
                      held from the forward to the backward; 0: time alone
                      decides what is remade
  --row-products      with a target: a contraction over a stream's rows of a
                      value the stream makes joins that stream, each block
                      adding its rows' share by atomics (attention's dQ beside
                      dK and dV, in one pass: planning/row_products.h),
                      wherever it can. By default where the model prices it
                      cheaper than the kernels without
  --no-row-products   never join row products to their streams
  --loss NAME         with --grad: the output to differentiate (default: the
                      only output)
  --wrt A,B,...       with --grad: differentiate against these inputs instead
                      of the params
  --dump-after PASS   also print what PASS made to stderr: the IR after a pass
                      of the front end (elaborate, canonicalize; with a
                      target one-hot-gathers, masked-sums and
                      split-contractions; with --grad autodiff, reassociate,
                      collect-terms, and with a target recompute),
                      or, with a target (pseudocode, perf, cuda, launches,
                      ptx, memory), what a stage of the
                      back end made: fuse (the kernels and their nodes),
                      partition (each kernel's partition), lower and unfuse
                      (each kernel's engine), order (the launches in order),
                      write (the launch description) or memory (the memory
                      plan); docs/ir.md, section 8
  --time-passes       print each pass's and stage's time to stderr
  --no-comments       leave the per-line comments (woven axes, composite path)
                      out of --emit ir
  -o FILE             write the output to FILE instead of standard output,
                      whole or not at all (a device such as /dev/null is
                      written into)
  --quiet             no notes on stderr (such as a report's missing drawing);
                      errors and the requested output still come
  --version           print llmc-compile's version
  -h, --help          show this help

An option's value may follow it (--emit perf) or be joined by '=' (--emit=perf).
A size given with --set that no diagram reads is a command-line error.

exit status: 0 on success, 1 for an error in the diagrams, 2 for a bad command line,
3 for an internal error (a bug in llmc-compile).
)";

[[noreturn]] void usageError(const std::string& message) {
  std::fprintf(stderr, "llmc-compile: %s\n(see llmc-compile --help)\n", message.c_str());
  std::exit(2);
}

// What the command line asks for.
struct Invocation {
  llmc::PipelineOptions options;
  std::string emit = "ir", outPath, arch = "sm_90a", device, measuredPath;
  std::string commandLine;  // as given, for the report to show
  bool json = false;
  bool quiet = false;  // --quiet: no notes on stderr
  llmc::PerfReportLayout perfLayout;  // --group-by, --sort (--emit perf)
  int gpus = 1, zero = 0;  // data parallel (--emit perf)
  int drawDepth = -1;      // --emit dot, svg: calls deeper than this drawn as one box (-1: none)
  llmc::CostOptions cost;
  bool comments = true;
  std::vector<std::string> f32Names;  // --f32: names, or prefixes ending in *
  bool callerMemory = false;          // --caller-memory

  // The outputs made from kernels, which are planned for a target.
  bool needsTarget() const {
    return emit == "pseudocode" || emit == "perf" || emit == "cuda" || emit == "launches" || emit == "ptx" ||
           emit == "memory" || emit == "dot-plan" || emit == "svg-plan" || emit == "report";
  }
};

bool isOneOf(const std::string& name, const std::vector<std::string>& names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The passes of the front end that make IR, which --dump-after prints.
const std::vector<std::string> kPassesWithIR = {"elaborate", "canonicalize", "one-hot-gathers", "masked-sums",
                                                 "autodiff",  "reassociate",  "collect-terms", "split-contractions",
                                                 "recompute"};
// The passes whose rewrites are priced on a target: they run only with one.
const std::vector<std::string> kPassesForATarget = {"one-hot-gathers", "masked-sums", "split-contractions", "recompute"};
// The passes of the backward: they run only with --grad.
const std::vector<std::string> kPassesForGrad = {"autodiff", "reassociate", "collect-terms", "recompute"};

// Checks what the options say together. Exits with status 2 for a bad combination.
void checkInvocation(const Invocation& in) {
  const llmc::PipelineOptions& options = in.options;
  if (options.path.empty()) usageError("no input file");
  if ((in.gpus > 1 || in.zero) && (in.emit != "perf" || !options.grad))
    usageError("--gpus and --zero model data-parallel training: they go with --grad --emit perf");
  if (!options.grad && (!options.loss.empty() || !options.wrt.empty())) usageError("--loss and --wrt need --grad");
  if (!in.measuredPath.empty() && in.emit != "perf" && in.emit != "report")
    usageError("--measured goes with --emit perf or report");
  if ((!in.perfLayout.groupings.empty() || in.perfLayout.slowestFirst) && (in.emit != "perf" || in.json))
    usageError("--group-by and --sort go with --emit perf, as text (the JSON has every kernel's path, pass and engine)");
  if (in.callerMemory && in.emit != "memory") usageError("--caller-memory goes with --emit memory");
  if (!in.f32Names.empty() && !in.needsTarget())
    usageError("--f32 goes with an --emit of the planned kernels (pseudocode, perf, cuda, launches, ptx, memory, ...)");
  if (in.drawDepth >= 0 && !isOneOf(in.emit, {"dot", "svg", "dot-plan", "svg-plan", "report"}))
    usageError("--depth goes with --emit dot, svg, dot-plan, svg-plan or report");
  const std::string& dumpAfter = options.reporting.dumpAfter;
  if (isOneOf(dumpAfter, llmc::backendStageNames()) && !in.needsTarget())
    usageError(fmt::format("--dump-after {}: the back end's stages run for a target (--emit pseudocode, perf, cuda, "
                           "launches, ptx or memory)", dumpAfter));
  if (isOneOf(dumpAfter, kPassesForGrad) && !options.grad)
    usageError(fmt::format("--dump-after {}: the pass runs on the backward, with --grad", dumpAfter));
  if (isOneOf(dumpAfter, kPassesForATarget) && !in.needsTarget())
    usageError(fmt::format("--dump-after {}: the pass is priced on a target and runs only with one (--emit "
                           "pseudocode, perf, cuda, launches, ptx or memory)", dumpAfter));
}

// The command line as a shell would take it back: a word with anything but
// letters, digits and _./=,:+- in single quotes.
std::string shellWords(int argc, char** argv) {
  std::string out = "llmc-compile";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const bool plain = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                               "0123456789_./=,:+-") == std::string::npos;
    std::string quoted;
    for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += " " + (plain ? word : "'" + quoted + "'");
  }
  return out;
}

// Parses the command line; nullopt where it asked for --help (printed).
std::optional<Invocation> parseCommandLine(int argc, char** argv) {
  Invocation in;
  in.commandLine = shellWords(argc, argv);
  llmc::PipelineOptions& options = in.options;
  llmc::Arguments args(argc, argv);
  while (args.next()) {
    const std::string& arg = args.arg();
    auto value = [&] { return args.value(); };
    if (arg == "-h" || arg == "--help" || arg == "--version") args.takesNoValue();
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    } else if (arg == "--version") {
      std::printf("llmc-compile %s\n", LLMC_VERSION);
      return std::nullopt;
    } else if (arg == "--quiet") {
      in.quiet = true;
    } else if (arg == "--emit") {
      in.emit = value();
      if (!isOneOf(in.emit, {"ir", "json", "streams", "pseudocode", "perf", "cuda", "launches", "ptx", "memory", "dot",
                             "dot-plan", "svg", "svg-plan", "report"}))
        usageError(fmt::format("unknown --emit '{}' (known: ir, json, streams, pseudocode, perf, cuda, launches, ptx, "
                               "memory, dot, dot-plan, svg, svg-plan, report)",
                               in.emit));
    } else if (arg == "--arch") {
      in.arch = value();
    } else if (arg == "--device") {
      in.device = value();
    } else if (arg == "--f32") {
      const std::string list = value();
      for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(',', at), list.size());
        if (end > at) in.f32Names.push_back(list.substr(at, end - at));
        at = end + 1;
      }
      if (in.f32Names.empty()) usageError("--f32 expects names of graph inputs or outputs, comma-separated");
    } else if (arg == "--caller-memory") {
      args.takesNoValue();
      in.callerMemory = true;
    } else if (arg == "--storage") {
      std::string storage = value();
      if (storage != "f32" && storage != "bf16") usageError("--storage expects f32 or bf16");
      in.cost.storageBytes = storage == "bf16" ? 2 : 4;
    } else if (arg == "--row-products") {
      args.takesNoValue();
      in.cost.rowProducts = true;
    } else if (arg == "--no-row-products") {
      args.takesNoValue();
      in.cost.rowProductsWhereCheaper = false;
    } else if (arg == "--hold-less") {
      const std::string hold = value();
      if (hold != "0" && hold != "1") usageError("--hold-less expects 0 or 1");
      in.options.remaking.holdLess = hold == "1";
    } else if (arg == "--json") {
      in.json = true;
    } else if (arg == "--measured") {
      in.measuredPath = value();
    } else if (arg == "--group-by") {
      const std::string list = value();
      for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(',', at), list.size());
        const std::string grouping = list.substr(at, end - at);
        if (!llmc::isPerfGrouping(grouping))
          usageError(fmt::format("--group-by: '{}' is not a grouping (pass, kind, path, path:N with N from 1)", grouping));
        in.perfLayout.groupings.push_back(grouping);
        at = end + 1;
      }
    } else if (arg == "--sort") {
      const std::string order = value();
      if (order != "time") usageError(fmt::format("--sort expects time (slowest first), got '{}'", order));
      in.perfLayout.slowestFirst = true;
    } else if (arg == "--depth") {
      const std::string n = value();
      if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos)
        usageError(fmt::format("--depth expects a number of frames (0 or more), got '{}'", n));
      in.drawDepth = std::stoi(n);
    } else if (arg == "--gpus") {
      const std::string n = value();
      if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1)
        usageError(fmt::format("--gpus expects a number of GPUs (1 or more), got '{}'", n));
      in.gpus = std::stoi(n);
    } else if (arg == "--zero") {
      const std::string z = value();
      if (z != "0" && z != "1") usageError(fmt::format("--zero expects 0 or 1, got '{}'", z));
      in.zero = z == "1" ? 1 : 0;
    } else if (arg == "--set") {
      try {
        for (const auto& [name, size] : llmc::parseSizeBindings(value())) options.sizes[name] = size;
      } catch (const std::invalid_argument& e) {
        usageError(e.what());
      }
    } else if (arg == "--grad") {
      options.grad = true;
    } else if (arg == "--loss") {
      options.loss = value();
    } else if (arg == "--wrt") {
      std::string list = value();
      for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        options.wrt.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (arg == "--entry") {
      options.entry = value();
    } else if (arg == "--dump-after") {
      options.reporting.dumpAfter = value();
      if (!isOneOf(options.reporting.dumpAfter, kPassesWithIR) &&
          !isOneOf(options.reporting.dumpAfter, llmc::backendStageNames()))
        usageError(fmt::format("--dump-after: no pass or stage '{}' to dump after (passes with IR: elaborate, "
                               "canonicalize, one-hot-gathers, masked-sums, autodiff, reassociate, collect-terms, "
                               "split-contractions, recompute; "
                               "stages: fuse, partition, lower, unfuse, order, write, memory)", options.reporting.dumpAfter));
    } else if (arg == "--time-passes") {
      options.reporting.timePasses = true;
    } else if (arg == "--no-comments") {
      in.comments = false;
    } else if (arg == "-o") {
      in.outPath = value();
    } else if (!arg.empty() && arg[0] == '-') {
      usageError(fmt::format("unknown option '{}'", arg));
    } else if (options.path.empty()) {
      options.path = arg;
    } else {
      usageError(fmt::format("more than one input file ('{}' and '{}')", options.path, arg));
    }
  }
  checkInvocation(in);
  options.reporting.dump = [](const std::string& text) { std::fputs(text.c_str(), stderr); };
  return in;
}

// The drawing laid out by Graphviz's dot (--emit svg, svg-plan, report): the DOT text
// through a temporary file, the SVG read back. Empty, with `why`, where dot
// is missing or fails; `dotEmit` is the --emit that prints the DOT text.
std::string layOutSvg(const std::string& dotText, std::string& why, const std::string& dotEmit) {
  if (std::system("command -v dot > /dev/null 2>&1") != 0) {
    why = fmt::format("Graphviz's dot is not on PATH (Debian: apt-get install graphviz); --emit {} prints the graph it "
                      "would lay out", dotEmit);
    return "";
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string input = fmt::format("{}/llmc-drawing-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  const int fd = mkstemp(input.data());
  if (fd < 0) {
    why = fmt::format("cannot make a temporary file in {}", input.substr(0, input.rfind('/')));
    return "";
  }
  const bool written = ::write(fd, dotText.data(), dotText.size()) == static_cast<ssize_t>(dotText.size());
  ::close(fd);
  const std::string svg = input + ".svg";
  std::string output;
  if (!written) {
    why = "cannot write the drawing to " + input;
  } else if (std::system(fmt::format("dot -Tsvg '{}' -o '{}'", input, svg).c_str()) != 0) {
    why = "Graphviz's dot failed on the drawing";
  } else {
    std::ifstream in(svg, std::ios::binary);
    output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (output.empty()) why = "Graphviz's dot wrote nothing";
  }
  std::remove(input.c_str());
  std::remove(svg.c_str());
  return output;
}

// The performance report, as text or JSON, with the data-parallel level where asked.
std::string perfReport(const Invocation& in, const llmc::Graph& graph, const std::vector<llmc::PlannedKernel>& kernels,
                       const llmc::Target& target) {
  std::optional<std::map<int, double>> measured;
  if (!in.measuredPath.empty()) measured = llmc::readMeasuredKernelSeconds(in.measuredPath, kernels);
  if (!in.json) {
    std::string output = llmc::perfReportText(graph, kernels, target, measured ? &*measured : nullptr, in.perfLayout);
    if (in.gpus > 1)
      output += llmc::describeDataParallel(llmc::dataParallelCost(graph, kernels, target, in.gpus, in.zero), target);
    return output;
  }
  nlohmann::json report = llmc::perfReportJson(graph, kernels, target, measured ? &*measured : nullptr);
  if (in.gpus > 1) {
    const llmc::DataParallelCost dp = llmc::dataParallelCost(graph, kernels, target, in.gpus, in.zero);
    report["data_parallel"] = {{"gpus", dp.gpus},
                               {"zero", dp.zero},
                               {"collectives", dp.collectives},
                               {"interconnect", target.interconnect},
                               {"gradient_bytes", dp.gradientBytes},
                               {"parameter_bytes", dp.parameterBytes},
                               {"bytes_per_gpu", dp.bytesPerGpu},
                               {"seconds", dp.seconds},
                               {"backward_seconds", dp.backwardSeconds},
                               {"exposed_seconds", dp.exposedSeconds}};
  }
  return report.dump(2) + "\n";
}

// The HTML page of the plan (report/html_report.h): its drawing laid out by
// dot, where dot can; the page says so where it cannot.
std::string htmlReport(const Invocation& in, const llmc::Graph& graph, const std::vector<llmc::PlannedKernel>& kernels,
                       const llmc::Target& target) {
  std::optional<std::map<int, double>> measured;
  if (!in.measuredPath.empty()) measured = llmc::readMeasuredKernelSeconds(in.measuredPath, kernels);
  llmc::HtmlReportInputs inputs;
  inputs.command = in.commandLine;
  inputs.planDepth = in.drawDepth >= 0 ? in.drawDepth : llmc::kReportPlanDepth;
  inputs.planSvg = layOutSvg(llmc::drawPlanDot(graph, kernels, inputs.planDepth), inputs.drawingMissing,
                             fmt::format("dot-plan --depth {}", inputs.planDepth));
  if (!inputs.drawingMissing.empty() && !in.quiet)
    std::fprintf(stderr, "llmc-compile: --emit report: the plan is not drawn: %s\n", inputs.drawingMissing.c_str());
  inputs.measured = measured ? &*measured : nullptr;
  inputs.measuredFile = in.measuredPath;
  return llmc::htmlReport(graph, kernels, target, inputs);
}

// The graph inputs and outputs --f32 names; a name it gives that matches none
// is a usage error.
std::set<std::string> f32Values(const Invocation& in, const llmc::Graph& graph) {
  std::vector<std::string> names;
  for (llmc::NodeId id : graph.inputs) names.push_back(graph.node(id).name);
  for (const llmc::GraphOutput& o : graph.outputs) names.push_back(o.name);
  std::set<std::string> out;
  for (const std::string& pattern : in.f32Names) {
    const bool prefix = pattern.back() == '*';
    const std::string stem = prefix ? pattern.substr(0, pattern.size() - 1) : pattern;
    bool matched = false;
    for (const std::string& name : names)
      if (prefix ? name.starts_with(stem) : name == stem) out.insert(name), matched = true;
    if (!matched)
      usageError(fmt::format("--f32 {}: no input or output of {} is {}", pattern, graph.name,
                             prefix ? fmt::format("named {}...", stem) : fmt::format("named {}", stem)));
  }
  return out;
}

// What the back end's stages made, as --emit asks (an output that needs a target).
std::string backendOutput(const Invocation& in, const llmc::Graph& graph, const llmc::Target& target) {
  llmc::BackendOptions backend;
  backend.cost = in.cost;
  backend.emit = llmc::emitOptionsFor(in.cost);
  backend.emit.f32Values = f32Values(in, graph);
  backend.callerMemory = in.callerMemory;
  // The reports of the model (perf, report) show each kernel's launch as written: through the write stage.
  backend.until = isOneOf(in.emit, {"pseudocode", "dot-plan", "svg-plan"}) ? "unfuse"
                  : in.emit == "memory"                                                    ? "memory"
                                                                                           : "write";
  backend.reporting = in.options.reporting;
  const llmc::Backend made = llmc::compileBackend(graph, target, backend);
  if (in.emit == "cuda") return made.module->source;
  if (in.emit == "ptx") {
#ifdef LLMC_HAVE_NVRTC
    return llmc::cuda::compileWithNvrtc({graph.name, made.module->source, target.arch, {}}).ptx;
#else
    throw std::logic_error("unreachable: --emit ptx without NVRTC");
#endif
  }
  if (in.emit == "memory") return llmc::describeMemoryPlan(*made.module, *made.memory);
  if (in.emit == "launches") return llmc::launchesToJson(*made.module).dump(2) + "\n";
  if (in.emit == "pseudocode") return llmc::printPseudocode(graph, made.kernels, target);
  if (in.emit == "dot-plan" || in.emit == "svg-plan") return llmc::drawPlanDot(graph, made.kernels, in.drawDepth);
  if (in.emit == "report") return htmlReport(in, graph, made.kernels, target);
  return perfReport(in, graph, made.kernels, target);
}

// The output --emit asks for. Throws what the passes throw.
std::string compile(Invocation& in) {
  // Kernels are planned for a target, whose cost model also decides what
  // the backward pass recomputes.
  std::optional<llmc::Target> target;
  if (in.needsTarget()) {
    target = in.arch == "auto" ? llmc::detectTarget() : llmc::loadTarget(in.arch, in.device);
    in.options.target = &*target;
    in.options.cost = in.cost;
  }
  std::set<std::string> used;
  in.options.usedSizes = &used;
  llmc::Graph graph = llmc::compileToIR(in.options);
  for (const auto& [name, size] : in.options.sizes)
    if (!used.count(name))
      usageError(fmt::format("--set {}={}: no size of {} is named '{}'{}", name, size, in.options.path, name,
                             used.empty() ? "" : fmt::format(" (it reads: {})", fmt::join(used, ", "))));
  if (in.emit == "json") return llmc::graphToJson(graph).dump(2) + "\n";
  if (in.emit == "dot" || in.emit == "svg") return llmc::drawDiagramDot(graph, in.drawDepth);
  if (target) return backendOutput(in, graph, *target);
  if (in.emit == "streams") {
    std::string output;
    std::set<llmc::NodeId> everything;
    for (const auto& n : graph.nodes) everything.insert(n.id);
    for (const auto& axis : llmc::reducedAxes(graph))
      output += llmc::describeStream(graph, llmc::analyzeStream(graph, everything, axis));
    for (const auto& n : graph.nodes)
      if (n.op == llmc::Op::Scan) output += llmc::describeScanStream(graph, llmc::analyzeScanStream(n));
    return output;
  }
  return llmc::printGraph(graph, llmc::PrintOptions{in.comments});
}

int compileMain(int argc, char** argv) {
  std::optional<Invocation> in;
  try {
    in = parseCommandLine(argc, argv);
  } catch (const llmc::UsageError& e) {
    usageError(e.what());
  }
  if (!in) return 0;
#ifndef LLMC_HAVE_NVRTC
  if (in->emit == "ptx") {
    std::fputs("llmc-compile: --emit ptx needs NVRTC; this llmc-compile was built without the CUDA toolkit\n", stderr);
    return 2;
  }
#endif
  std::string output;
  try {
    output = compile(*in);
  } catch (const llmc::CompileError& e) {
    std::fputs(e.what(), stderr);
    return 1;
  } catch (const llmc::TargetError& e) {
    std::fprintf(stderr, "llmc-compile: %s\n", e.what());
    return 1;
  } catch (const llmc::MeasurementError& e) {
    std::fprintf(stderr, "llmc-compile: --measured %s\n", e.what());
    return 1;
  } catch (const std::logic_error& e) {  // the verifier found a compiler bug
    std::fprintf(stderr, "llmc-compile: internal compiler error: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {  // a bug in llmc, not in the diagrams: report it, don't abort
    std::fprintf(stderr, "llmc-compile: internal error: %s\n", e.what());
    return 3;
  }
  if (in->emit == "svg" || in->emit == "svg-plan") {
    std::string why;
    output = layOutSvg(output, why, in->emit == "svg" ? "dot" : "dot-plan");
    if (!why.empty()) {
      std::fprintf(stderr, "llmc-compile: --emit %s: %s\n", in->emit.c_str(), why.c_str());
      return 2;
    }
  }
  if (in->outPath.empty()) {
    std::fputs(output.c_str(), stdout);
    return 0;
  }
  // Whole or not at all (common/atomic_file.h): a fresh temporary beside FILE,
  // renamed over it; a device such as /dev/null is written into, as `>` would.
  try {
    llmc::writeFileAtomically(in->outPath, output, {.nonRegular = llmc::NonRegularDestination::WriteInto});
  } catch (const llmc::FileWriteError& e) {
    std::fprintf(stderr, "llmc-compile: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

// The compiler's passes recurse along the graph (the CUDA writer once per
// node of an elementwise chain), so a diagram of a 100,000-node chain needs
// more stack than a process's main thread has (8 MiB): compile on a thread
// with 1 GiB reserved (pages are committed only as they are used).
int main(int argc, char** argv) {
  struct Call {
    int argc;
    char** argv;
    int status = 3;
  } call{argc, argv};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{1} << 30);
  pthread_t thread;
  auto run = [](void* p) -> void* {
    Call* c = static_cast<Call*>(p);
    c->status = compileMain(c->argc, c->argv);
    return nullptr;
  };
  if (pthread_create(&thread, &attr, run, &call) != 0) return compileMain(argc, argv);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return call.status;
}
