// The GPU check: every configuration of a diagram run on GPU 0 as
// tests/cuda/emit_cuda_gpu_test.cpp runs its cases (one arena placed by the
// memory plan, poisoned with NaN bytes; fresh random inputs; every output
// read back) and judged against the f64 interpreter as
// runtime/cuda/module_check.h says (llmc-run --check judges the same way).
// A failure also names the first launch whose buffer is wrong, found by
// running the module again one launch at a time.
#include <fmt/format.h>

#include <algorithm>

#include "checks.h"
#include "codegen/emit_cuda.h"
#include "cuda_context.h"
#include "device_buffer.h"
#include "jit.h"
#include "lowering/lowering.h"
#include "module_check.h"
#include "module_executor.h"
#include "planning/target.h"

namespace llmc::fuzz {

namespace {

const std::optional<cuda::Context>& context() {
  static const std::optional<cuda::Context> c = cuda::contextOrSkip();
  return c;
}

std::string outputKind(const std::string& name) { return name.rfind("grad_", 0) == 0 ? "a gradient" : name; }

// One configuration; a failure names the first output that is wrong and the
// first launch whose buffer is.
std::optional<Failure> runConfig(const DiagramSpec& spec, const DiagramFile& file, const Config& c,
                                 const CheckOptions& options) {
  const Target target = loadTarget(c.arch);
  const bool bf16 = c.storage == "bf16";
  CostOptions cost;
  cost.storageBytes = bf16 ? 2 : 4;
  cost.rowProducts = options.rowProducts;
  const Graph graph = compileGraph(file, spec, c.grad, &target, cost.storageBytes, c.scansAlways);
  // Lowered as llmc-compile and llmc-train lower it (lowering.h).
  const EmitOptions emit{.storage = bf16 ? StorageType::BF16 : StorageType::F32};
  const CudaModule module = emitCuda(graph, lowerKernels(graph, target, cost, emit), target, emit);
  const cuda::Context& ctx = *context();
  // Planned for c.arch, compiled for the GPU present: sm_80's code (mma.sync, cp.async) runs on Hopper too.
  const cuda::JitResult compiled = cuda::compileKernels(cuda::kernelSources(module, ctx.arch()), nullptr,
                                                        options.compileThreads, cuda::JitWorkers::Threads);
  const auto inputs = randomInputs(graph, spec, spec.seed + 7919, bf16);
  cuda::ModuleExecutor executor(module, {});
  executor.load(compiled.kernels);
  cuda::DeviceBuffer arena(static_cast<size_t>(std::max<int64_t>(executor.memoryPlan().arenaBytes, 1)));
  // One launch at a time under a sanitizer: its report names the launch.
  cuda::runPoisoned(executor, graph, inputs, arena, options.sanitizerFriendly);

  const cuda::Reference reference = cuda::referenceFor(graph, module, bf16);
  const cuda::OutputChecks checks = cuda::checkOutputs(executor, graph, inputs, reference, spec.seed);
  for (const cuda::OutputCheck& o : checks.outputs) {
    if (!o.hasBuffer)
      return Failure{"gpu", fmt::format("gpu {}: an output has no buffer", c.str()), fmt::format("output {}", o.name)};
    const cuda::Judgement& j = o.judgement;
    if (!j.wrong()) continue;
    std::string launches;
    for (const KernelLaunch& l : module.launches) launches += l.name + " ";
    return Failure{"gpu",
                   fmt::format("gpu {}: {} {}", c.str(), outputKind(o.name), o.finite ? "differs from the interpreter" : "is not finite"),
                   fmt::format("gpu {}: output {}: relative error {:.3g}, tolerance {:.3g} (rounding alone {:.3g}); {}; {} launches: {}",
                               c.str(), o.name, j.relativeError(), j.relativeTolerance(), j.relativeRounding(),
                               cuda::firstWrongLaunch(executor, graph, inputs, arena, reference, checks.largestScale),
                               module.launches.size(), launches)};
  }
  return std::nullopt;
}

}  // namespace

bool gpuAvailable(std::string* why) {
  if (context()) return true;
  if (why) *why = "no GPU (or no CUDA driver) could be used";
  return false;
}

std::optional<Failure> checkGpu(const DiagramSpec& spec, const DiagramFile& file, const CheckOptions& options) {
  if (!context()) throw std::runtime_error("--checks gpu: no GPU");
  for (const Config& c : configsFor(spec, options)) {
    try {
      if (auto f = runConfig(spec, file, c, options)) return f;
    } catch (const std::exception& e) {
      return failureFrom("gpu", c.str(), e);
    }
  }
  return std::nullopt;
}

}  // namespace llmc::fuzz
