// llmc-compile: diagram files in, IR (and later pseudocode, performance
// models and CUDA) out.
#include <pthread.h>
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>

#include "atomic_file.h"
#include "planning/data_parallel_cost.h"
#include "codegen/emit_cuda.h"
#include "ir/json_export.h"
#include "planning/memory_plan.h"
#include "driver/pipeline.h"
#include "ir/print.h"
#include "report/measured_times.h"
#include "lowering/lowering.h"
#include "report/perf_report.h"
#include "report/pseudocode.h"
#include "analysis/streamability.h"
#include "planning/target.h"
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
                      their inputs, the largest arrays at the peak)
  --arch ARCH         the target for pseudocode, perf, cuda, launches and ptx: sm_80, sm_90a, a
                      target .json file, or auto (the GPU present); default sm_90a
  --device NAME       a device of the arch's file (H100-SXM, H200, ...)
  --storage f32|bf16  how floats are stored in memory, for the model and the
                      CUDA (default bf16)
  --json              with --emit perf: the report as JSON
  --measured FILE     with --emit perf: set each kernel's measured time (a
                      step_kernels_bench --json file of the same plan) and its
                      ratio to the prediction beside the model
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
  --loss NAME         with --grad: the output to differentiate (default: the
                      only output)
  --wrt A,B,...       with --grad: differentiate against these inputs instead
                      of the params
  --dump-after PASS   also print the IR after PASS to stderr; passes with IR:
                      elaborate, canonicalize, autodiff, reassociate, recompute
  --time-passes       print each pass's time to stderr
  --no-comments       leave the per-line comments (woven axes, composite path)
                      out of --emit ir
  -o FILE             write the output to FILE instead of standard output,
                      whole or not at all (a device such as /dev/null is
                      written into)
  -h, --help          show this help

exit status: 0 on success, 1 for an error in the diagrams, 2 for a bad command line,
3 for an internal error (a bug in llmc-compile).
)";

[[noreturn]] void usageError(const std::string& message) {
  std::fprintf(stderr, "llmc-compile: %s\n(see llmc-compile --help)\n", message.c_str());
  std::exit(2);
}


}  // namespace

namespace {

int compileMain(int argc, char** argv) {
  llmc::PipelineOptions options;
  std::string emit = "ir", outPath, arch = "sm_90a", device, measuredPath;
  bool json = false;
  int gpus = 1, zero = 0;  // data parallel (--emit perf)
  llmc::CostOptions cost;
  bool comments = true;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) usageError(fmt::format("{} needs a value", flag));
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--emit") {
      emit = value("--emit");
      if (emit != "ir" && emit != "json" && emit != "streams" && emit != "pseudocode" && emit != "perf" &&
          emit != "cuda" && emit != "launches" && emit != "ptx" && emit != "memory")
        usageError(fmt::format("unknown --emit '{}' (known: ir, json, streams, pseudocode, perf, cuda, launches, ptx, memory)", emit));
    } else if (arg == "--arch") {
      arch = value("--arch");
    } else if (arg == "--device") {
      device = value("--device");
    } else if (arg == "--storage") {
      std::string storage = value("--storage");
      if (storage != "f32" && storage != "bf16") usageError("--storage expects f32 or bf16");
      cost.storageBytes = storage == "bf16" ? 2 : 4;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--measured") {
      measuredPath = value("--measured");
    } else if (arg == "--gpus") {
      const std::string n = value("--gpus");
      if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1)
        usageError(fmt::format("--gpus expects a number of GPUs (1 or more), got '{}'", n));
      gpus = std::stoi(n);
    } else if (arg == "--zero") {
      const std::string z = value("--zero");
      if (z != "0" && z != "1") usageError(fmt::format("--zero expects 0 or 1, got '{}'", z));
      zero = z == "1" ? 1 : 0;
    } else if (arg == "--set") {
      try {
        for (const auto& [name, size] : llmc::parseSizeBindings(value("--set"))) options.sizes[name] = size;
      } catch (const std::invalid_argument& e) {
        usageError(e.what());
      }
    } else if (arg == "--grad") {
      options.grad = true;
    } else if (arg == "--loss") {
      options.loss = value("--loss");
    } else if (arg == "--wrt") {
      std::string list = value("--wrt");
      for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        options.wrt.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (arg == "--entry") {
      options.entry = value("--entry");
    } else if (arg == "--dump-after") {
      options.dumpAfter = value("--dump-after");
      if (options.dumpAfter != "elaborate" && options.dumpAfter != "canonicalize" && options.dumpAfter != "autodiff" &&
          options.dumpAfter != "reassociate" && options.dumpAfter != "recompute")
        usageError(fmt::format("--dump-after: no IR after pass '{}' (passes with IR: elaborate, canonicalize, "
                               "autodiff, reassociate, recompute)", options.dumpAfter));
    } else if (arg == "--time-passes") {
      options.timePasses = true;
    } else if (arg == "--no-comments") {
      comments = false;
    } else if (arg == "-o") {
      outPath = value("-o");
    } else if (!arg.empty() && arg[0] == '-') {
      usageError(fmt::format("unknown option '{}'", arg));
    } else if (options.path.empty()) {
      options.path = arg;
    } else {
      usageError(fmt::format("more than one input file ('{}' and '{}')", options.path, arg));
    }
  }
  if (options.path.empty()) usageError("no input file");
  if ((gpus > 1 || zero) && (emit != "perf" || !options.grad))
    usageError("--gpus and --zero model data-parallel training: they go with --grad --emit perf");
  if (!options.grad && (!options.loss.empty() || !options.wrt.empty())) usageError("--loss and --wrt need --grad");
  if (!measuredPath.empty() && emit != "perf") usageError("--measured goes with --emit perf");
  options.dump = [](const std::string& text) { std::fputs(text.c_str(), stderr); };

  std::string output;
  try {
    // Kernels are planned for a target, whose cost model also decides what
    // the backward pass recomputes.
    std::optional<llmc::Target> target;
    if (emit == "pseudocode" || emit == "perf" || emit == "cuda" || emit == "launches" || emit == "ptx" ||
        emit == "memory") {
      target = arch == "auto" ? llmc::detectTarget() : llmc::loadTarget(arch, device);
      options.target = &*target;
      options.cost = cost;
    }
    llmc::Graph graph = llmc::compileToIR(options);
    if (emit == "json") {
      output = llmc::graphToJson(graph).dump(2) + "\n";
    } else if (target) {
      const llmc::EmitOptions emitOptions = llmc::emitOptionsFor(cost);
      auto kernels = llmc::lowerKernels(graph, *target, cost, emitOptions);
      std::optional<std::map<int, double>> measured;
      if (!measuredPath.empty()) measured = llmc::readMeasuredKernelSeconds(measuredPath, kernels);
      if (emit == "cuda") output = llmc::emitCuda(graph, kernels, *target, emitOptions).source;
      else if (emit == "ptx") {
#ifdef LLMC_HAVE_NVRTC
        llmc::CudaModule module = llmc::emitCuda(graph, kernels, *target, emitOptions);
        output = llmc::cuda::compileWithNvrtc({graph.name, module.source, target->arch, {}}).ptx;
#else
        std::fputs("llmc-compile: --emit ptx needs NVRTC; this llmc-compile was built without the CUDA toolkit\n", stderr);
        return 2;
#endif
      } else if (emit == "memory") {
        const llmc::CudaModule module = llmc::emitCuda(graph, kernels, *target, emitOptions);
        output = llmc::describeMemoryPlan(module, llmc::planMemory(module, std::vector<bool>(module.buffers.size(), false)));
      } else if (emit == "launches")
        output = llmc::launchesToJson(llmc::emitCuda(graph, kernels, *target, emitOptions)).dump(2) + "\n";
      else if (emit == "pseudocode") output = llmc::printPseudocode(graph, kernels, *target);
      else if (json) {
        nlohmann::json report = llmc::perfReportJson(graph, kernels, *target, measured ? &*measured : nullptr);
        if (gpus > 1) {
          const llmc::DataParallelCost dp = llmc::dataParallelCost(graph, kernels, *target, gpus, zero);
          report["data_parallel"] = {{"gpus", dp.gpus},
                                     {"zero", dp.zero},
                                     {"collectives", dp.collectives},
                                     {"interconnect", target->interconnect},
                                     {"gradient_bytes", dp.gradientBytes},
                                     {"parameter_bytes", dp.parameterBytes},
                                     {"bytes_per_gpu", dp.bytesPerGpu},
                                     {"seconds", dp.seconds},
                                     {"backward_seconds", dp.backwardSeconds},
                                     {"exposed_seconds", dp.exposedSeconds}};
        }
        output = report.dump(2) + "\n";
      } else {
        output = llmc::perfReportText(graph, kernels, *target, measured ? &*measured : nullptr);
        if (gpus > 1) output += llmc::describeDataParallel(llmc::dataParallelCost(graph, kernels, *target, gpus, zero), *target);
      }
    } else if (emit == "streams") {
      std::set<llmc::NodeId> everything;
      for (const auto& n : graph.nodes) everything.insert(n.id);
      for (const auto& axis : llmc::reducedAxes(graph))
        output += llmc::describeStream(graph, llmc::analyzeStream(graph, everything, axis));
    } else {
      output = llmc::printGraph(graph, llmc::PrintOptions{comments});
    }
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
  if (outPath.empty()) {
    std::fputs(output.c_str(), stdout);
    return 0;
  }
  // Whole or not at all (common/atomic_file.h): a fresh temporary beside FILE,
  // renamed over it; a device such as /dev/null is written into, as `>` would.
  try {
    llmc::writeFileAtomically(outPath, output, {.nonRegular = llmc::NonRegularDestination::WriteInto});
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
