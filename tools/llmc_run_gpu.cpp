// llmc-run's run on the GPU (tools/llmc_run.h): the diagram planned for the
// arch, its kernels compiled by NVRTC and run on GPU 0, checked against the
// interpreter or timed. Built where the CUDA toolkit is.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "atomic_file.h"
#include "cuda_context.h"
#include "cuda_stream.h"
#include "device_buffer.h"
#include "driver/backend.h"
#include "graph_inputs.h"
#include "jit.h"
#include "launch_time_report.h"
#include "launch_timing.h"
#include "llmc_run.h"
#include "lowering/lowering.h"
#include "module_check.h"
#include "module_executor.h"

namespace llmc_run {

namespace cuda = llmc::cuda;

struct Gpu {
  cuda::Context context{0};
};

std::shared_ptr<Gpu> openGpu(std::string& missing) {
  try {
    return std::make_shared<Gpu>();
  } catch (const cuda::NoGpuError& e) {
    missing = e.what();
  } catch (const cuda::CudaError& e) {  // cuDeviceGet and the like failing: no usable GPU either
    missing = e.what();
  }
  return nullptr;
}

int gpuComputeCapability(const Gpu& gpu) { return gpu.context.computeCapability(); }
std::string gpuName(const Gpu& gpu) { return gpu.context.name(); }

namespace {

// Each output's size and range, for a run without --check.
void printOutputs(const cuda::ModuleExecutor& executor, const llmc::Graph& graph) {
  fmt::print("{:<24} {:<32} {:>12} {:>12} {:>12} {:>10}\n", "output", "type", "norm", "min", "max", "non-finite");
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const std::optional<llmc::HostTensor> got = cuda::readOutput(executor, graph, i);
    if (!got) throw std::logic_error(fmt::format("output {} has no buffer in the module", graph.outputs[i].name));
    double norm = 0, lo = INFINITY, hi = -INFINITY;
    int64_t nonFinite = 0;
    for (double x : got->data) {
      if (!std::isfinite(x)) {
        ++nonFinite;
        continue;
      }
      norm += x * x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    fmt::print("{:<24} {:<32} {:>12.5g} {:>12.5g} {:>12.5g} {:>10}\n", graph.outputs[i].name, got->type.str(),
               std::sqrt(norm), lo, hi, nonFinite);
  }
}

// --check: every output against the interpreter; true where all are within tolerance.
bool checkAgainstInterpreter(cuda::ModuleExecutor& executor, const llmc::Graph& graph,
                             const std::map<std::string, llmc::HostTensor>& inputs, cuda::DeviceBuffer& arena,
                             const Invocation& in) {
  const cuda::Reference reference = cuda::referenceFor(graph, executor.module(), in.bf16);
  const cuda::OutputChecks checks = cuda::checkOutputs(executor, graph, inputs, reference, in.seed);
  fmt::print("against the interpreter (f64); tolerance {} of each output's norm plus twice what rounding alone moves it\n",
             reference.lowPrecision ? "3e-2" : "1e-4");
  fmt::print("{:<24} {:<32} {:>13} {:>14} {:>10} {:>10}\n", "output", "type", "max abs error", "relative error",
             "tolerance", "rounding");
  int wrong = 0;
  const cuda::OutputCheck* firstWrong = nullptr;
  for (const cuda::OutputCheck& o : checks.outputs) {
    const cuda::Judgement& j = o.judgement;
    const bool bad = !o.hasBuffer || j.wrong();
    if (bad && !firstWrong) firstWrong = &o;
    wrong += bad;
    if (!o.hasBuffer) {
      fmt::print("{:<24} {:<32} no buffer of the module holds it  FAIL\n", o.name, o.type.str());
      continue;
    }
    fmt::print("{:<24} {:<32} {:>13.3g} {:>14.3g} {:>10.3g} {:>10.3g}  {}\n", o.name, o.type.str(), o.maxAbsError,
               j.relativeError(), j.relativeTolerance(), j.relativeRounding(),
               !bad ? "ok" : o.finite ? "FAIL" : "FAIL (not finite)");
  }
  if (!wrong) {
    fmt::print("all {} outputs within tolerance\n", checks.outputs.size());
    return true;
  }
  fmt::print("{} of {} outputs beyond tolerance", wrong, checks.outputs.size());
  if (firstWrong->hasBuffer)
    fmt::print("; {}", cuda::firstWrongLaunch(executor, graph, inputs, arena, reference, checks.largestScale));
  fmt::print("\n");
  return false;
}

// --bench: every launch timed; the table, and the file --out names.
void benchmark(cuda::ModuleExecutor& executor, const std::vector<llmc::PlannedKernel>& kernels, const Invocation& in,
               const std::string& arch) {
  const cuda::Stream stream;
  const cuda::LaunchTimes times = cuda::timeLaunches(executor, stream, {.launchByLaunch = false, .reps = in.reps});
  const std::vector<cuda::LaunchTimeRow> rows = cuda::launchTimeRows(executor.module(), kernels, times);
  fmt::print("{}", cuda::describeLaunchTimes(rows, kernels, times, -1));
  if (in.outPath.empty()) return;
  try {
    llmc::writeFileAtomically(in.outPath, cuda::launchTimesJson(rows, times).dump(1) + "\n",
                              {.nonRegular = llmc::NonRegularDestination::WriteInto});
  } catch (const llmc::FileWriteError& e) {
    throw llmc::InputFileError(fmt::format("--out: {}", e.what()));
  }
  if (!in.quiet)
    fmt::print("wrote {}; beside the model: llmc-compile {}{}{}{} --arch {} --storage {} --emit perf --measured {}\n",
             in.outPath, in.options.path, in.options.entry.empty() ? "" : " --entry " + in.options.entry,
             in.sizesText.empty() ? "" : " --set " + in.sizesText, in.options.grad ? " --grad" : "", arch,
             in.bf16 ? "bf16" : "f32", in.outPath);
}

}  // namespace

int runOnGpu(Gpu& gpu, const Invocation& in, const std::string& arch, const llmc::Target& target,
             const llmc::CostOptions& cost, const llmc::Graph& graph,
             const std::map<std::string, llmc::HostTensor>& inputs) {
  try {
    const cuda::Context& context = gpu.context;
    if (arch == "sm_90a" && context.computeCapability() < 90)
      usageError(fmt::format("--arch sm_90a plans for Hopper (wgmma, TMA), which GPU 0 ({}, {}) is not: give --arch sm_80 "
                             "or auto", context.name(), context.arch()));
    if (context.computeCapability() < 80)
      usageError(fmt::format("GPU 0 ({}, {}) is older than sm_80, the oldest arch llmc plans for", context.name(),
                             context.arch()));

    llmc::BackendOptions backend;
    backend.cost = cost;
    backend.emit = llmc::emitOptionsFor(cost);
    backend.until = "write";
    const llmc::Backend planned = llmc::compileBackend(graph, target, backend);
    const cuda::JitResult jit = cuda::compileModuleKernels(*planned.module, context.arch());
    cuda::ModuleExecutor executor(*planned.module, {});
    executor.load(jit.kernels);
    if (!in.quiet)
      fmt::print("{} ({}{}, {}, planned for {}) on {}: {} launches; {}\n", graph.name, in.sizesText,
               in.options.grad ? ", with gradients" : "", in.bf16 ? "bf16" : "f32", arch, context.name(),
               executor.module().launches.size(), jit.summary.describe());
    cuda::DeviceBuffer arena(static_cast<size_t>(std::max<int64_t>(executor.memoryPlan().arenaBytes, 1)));
    cuda::runPoisoned(executor, graph, inputs, arena, false);
    bool ok = true;
    if (in.check) ok = checkAgainstInterpreter(executor, graph, inputs, arena, in);
    else printOutputs(executor, graph);
    if (in.bench) benchmark(executor, planned.kernels, in, arch);
    return ok ? 0 : kCheckFailed;
  } catch (const cuda::KernelCompileError& e) {
    std::fprintf(stderr, "llmc-run: NVRTC refused a kernel llmc emitted (a bug in llmc): %s\n", e.what());
    return kInternalError;
  } catch (const cuda::CudaError& e) {
    std::fprintf(stderr, "llmc-run: on the GPU: %s\n", e.what());
    return kInternalError;
  }
}

}  // namespace llmc_run
